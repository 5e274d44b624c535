package ipsets

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/errs"
)

// MaxSetBackoff is the longest a set that keeps failing on its own waits
// between two tries. The first retry comes after Options.RetryInterval,
// and each failure in a row doubles the wait up to this bound (the loop's
// own default bound for whole drivers).
const MaxSetBackoff = dataplane.DefaultBackoffMax

// failure is a set's failed attempts to be read, written or destroyed.
type failure struct {
	dataplane.Retry        // Err names the set
	destroy         bool   // failed in ApplyDeletions, which reports it
	pass            uint64 // the Apply or ApplyDeletions of the last failure
}

// waiting reports whether set failed and its next try is not due at now.
func (set *ipset) waiting(now time.Time) bool {
	return set.fail != nil && set.fail.Waiting(now)
}

// failed records that set failed with err, which says why without naming
// the set, and schedules its next try.
func (s *IPSets) failed(set *ipset, err error, destroy bool, now time.Time) {
	f := set.fail
	if f == nil || f.destroy != destroy {
		f = &failure{destroy: destroy}
		set.fail = f
	}
	named := errs.Also(fmt.Errorf("set %s: %s", set.kname, strings.TrimPrefix(err.Error(), "ipsets: ")), err)
	f.Retry = f.Failed(dataplane.Backoff{Initial: s.retry, Max: MaxSetBackoff}, now, named)
	f.pass = s.pass
	s.log.Warn("ipsets: set failed; the others are written, it is retried later",
		"set", set.kname, "retry_in", f.RetryAfter(now), "error", err)
}

// outcome completes res and returns the error of an Apply (destroy false)
// or ApplyDeletions (destroy true): nil when no set of that kind is
// failing, else a *dataplane.PartialError (in an error that carries the
// package's prefix) that names each, counting those tried in this call
// apart from those waiting for their retry, with res.RetryAfter no later
// than the first one's next try.
func (s *IPSets) outcome(res dataplane.ApplyResult, destroy bool, now time.Time) (dataplane.ApplyResult, error) {
	var failing []*ipset
	for _, set := range s.sets {
		if set.fail != nil && set.fail.destroy == destroy {
			failing = append(failing, set)
		}
	}
	if len(failing) == 0 {
		return res, nil
	}
	slices.SortFunc(failing, func(a, b *ipset) int { return strings.Compare(a.kname, b.kname) })
	pe := &dataplane.PartialError{Errs: make([]error, len(failing))}
	for i, set := range failing {
		pe.Errs[i] = set.fail.Err
		if set.fail.pass == s.pass {
			pe.Failed++
		} else {
			pe.Waiting++
		}
		wait := s.retry // due, but not tried in this call
		if set.fail.Waiting(now) {
			wait = set.fail.RetryAfter(now)
		}
		if res.RetryAfter <= 0 || wait < res.RetryAfter {
			res.RetryAfter = wait
		}
	}
	return res, fmt.Errorf("ipsets: %w", pe)
}

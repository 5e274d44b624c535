package ipsets

import (
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/netfilter"
)

// MaxSetBackoff is the longest a set that keeps failing on its own waits
// between two tries. The first retry comes after Options.RetryInterval,
// and each failure in a row doubles the wait up to this bound (the loop's
// own default bound for whole drivers).
const MaxSetBackoff = dataplane.DefaultBackoffMax

// The operations of a set's ObjectError: its header or members written,
// read back, destroyed.
const (
	opWrite   = "write"
	opRead    = "read"
	opDestroy = "destroy"
)

// errSetInUse is netfilter.ErrSetInUse under the package's prefix: the
// Reason of a set that kernel references keep from being destroyed or
// having its type changed.
var errSetInUse = setErr(netfilter.ErrSetInUse)

// failed records in the ledger that the set kname failed (op, why, and the
// cause err): it is retried on its own backoff, and the others are not held
// back.
func (s *IPSets) failed(kname, op string, reason error, detail string, err error) {
	e := s.ledger.Fail(kname, &dataplane.ObjectError{Driver: "ipsets", Op: op, Kind: kindSet, Name: kname,
		Reason: reason, Detail: detail, Err: err})
	s.log.Warn("ipsets: set failed; the others are written, it is retried later",
		"set", kname, "op", op, "retry_at", e.RetryAt, "error", e)
}

// result completes res with the ledger's failures and returns the error
// of an Apply or ApplyDeletions: nil when no set is failing, else the
// ledger's *dataplane.PartialError (the sets of the other call, which this
// one does not try, waiting). res.RetryAfter is no later than the first
// failing set's next try, and than RetryInterval when a set that is due
// was not tried (a destroy that only ApplyDeletions makes, a write that
// only Apply makes).
func (s *IPSets) result(res dataplane.ApplyResult) (dataplane.ApplyResult, error) {
	err := s.ledger.Err()
	if err == nil {
		return res, nil
	}
	after := s.ledger.RetryAfter()
	for kname := range s.sets {
		if _, failing := s.ledger.Get(kname); failing && !s.ledger.Waiting(kname) {
			after = minWait(after, s.retry)
			break
		}
	}
	res.RetryAfter = minWait(res.RetryAfter, after)
	return res, err
}

// minWait returns the shorter of two waits, zero meaning none.
func minWait(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

package ipsets

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/dataplane"
)

// op is what an Apply does to one set.
type op uint8

const (
	opUpdate   op = iota + 1 // add and delete members
	opCreate                 // create the set and fill it
	opSwap                   // fill a temporary set and swap it in
	opRecreate               // destroy the unreferenced set, create and fill it
)

type step struct {
	set  *ipset
	op   op
	want header
}

// Apply brings the kernel's sets to the desired state, except removals of
// whole sets (ApplyDeletions): it creates missing sets, writes member
// changes, and swaps in sets whose size or range changed, all in one
// `ipset restore`. At start and after a failure it first re-reads every
// owned set; after QueueResync it lists the kernel's sets and re-reads a
// ResyncBudget's worth of them.
//
// A set whose type must change while a rule refers to it is left as it is
// and reported with an error wrapping ErrSetInUse, after everything else
// was written.
func (s *IPSets) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.sync(ctx); err != nil {
		s.fullResync = true
		return dataplane.ApplyResult{}, err
	}
	steps, blocked, err := s.plan(ctx)
	if err != nil {
		s.fullResync = true
		return dataplane.ApplyResult{}, err
	}
	if len(steps) > 0 {
		script := s.script(steps)
		if _, err := s.run(ctx, bytes.NewReader(script), "restore"); err != nil {
			s.fullResync = true
			rerr := newRestoreError(script, err)
			s.log.Warn("ipsets: ipset restore failed; re-reading the kernel on the next apply",
				"line", rerr.Line, "error", strings.TrimSpace(rerr.Stderr))
			return dataplane.ApplyResult{}, rerr
		}
		s.commit(steps)
	}
	var res dataplane.ApplyResult
	if len(s.recheck) > 0 || len(blocked) > 0 {
		res.RetryAfter = s.retry
	}
	return res, errors.Join(blocked...)
}

// sync re-reads the kernel as far as needed.
func (s *IPSets) sync(ctx context.Context) error {
	if s.fullResync {
		if err := s.resyncAll(ctx); err != nil {
			return err
		}
		s.fullResync, s.namesResync = false, false
		return nil
	}
	if s.namesResync {
		if err := s.resyncNames(ctx); err != nil {
			return err
		}
		s.namesResync = false
	}
	return s.recheckSome(ctx)
}

// plan decides what to do with every desired set, in kernel-name order.
func (s *IPSets) plan(ctx context.Context) (steps []step, blocked []error, err error) {
	for _, set := range s.sets {
		if !set.wanted {
			continue
		}
		want := headerOf(&set.meta)
		var o op
		switch {
		case set.kernel == nil:
			o = opCreate
		case *set.kernel == want:
			if !set.members.synced() || len(set.foreign) > 0 {
				o = opUpdate
			}
		case swappable(*set.kernel, want):
			o = opSwap
		default:
			o = opRecreate
		}
		if o != 0 {
			steps = append(steps, step{set: set, op: o, want: want})
		}
	}
	slices.SortFunc(steps, func(a, b step) int { return strings.Compare(a.set.kname, b.set.kname) })
	kept := steps[:0]
	for _, st := range steps {
		if st.op == opRecreate {
			refs, err := s.referenced(ctx, st.set.kname)
			if err != nil {
				return nil, nil, err
			}
			if refs > 0 {
				blocked = append(blocked, fmt.Errorf("%w: set %s is %s %v in the kernel and must become %s %v, but %d kernel reference(s) hold it: the kernel swaps only sets of equal type and family; remove the references or use a new set name",
					ErrSetInUse, st.set.kname, st.set.kernel.typ, st.set.kernel.family, st.want.typ, st.want.family, refs))
				continue
			}
		}
		kept = append(kept, st)
	}
	return kept, blocked, nil
}

// tempName returns a name for the temporary set of a swap: the prefix, "~"
// (which set names cannot contain) and the lowest free number.
func (s *IPSets) tempName() string {
	for i := 0; ; i++ {
		name := s.prefix + "~" + strconv.Itoa(i)
		if _, ok := s.sets[name]; !ok {
			return name
		}
	}
}

// script renders the restore input for steps.
func (s *IPSets) script(steps []step) []byte {
	size := 0
	for _, st := range steps {
		n := len(st.set.members.adds) + len(st.set.members.dels) + len(st.set.foreign)
		if st.op == opSwap || st.op == opRecreate {
			n = st.set.members.desiredLen()
		}
		size += (n + 4) * (len(st.set.kname) + 32)
	}
	b := make([]byte, 0, size)
	var temp string
	for _, st := range steps {
		set := st.set
		switch st.op {
		case opCreate:
			b = appendCreate(b, set.kname, st.want, true)
			b = appendMembers(b, "add ", set.kname, set.members.pendingAdds(), "")
		case opRecreate:
			b = append(b, "destroy "...)
			b = append(b, set.kname...)
			b = append(b, '\n')
			b = appendCreate(b, set.kname, st.want, false)
			b = appendMembers(b, "add ", set.kname, set.members.desired(), "")
		case opSwap:
			if temp == "" {
				temp = s.tempName()
			}
			b = appendCreate(b, temp, st.want, false)
			b = appendMembers(b, "add ", temp, set.members.desired(), "")
			b = append(b, "swap "...)
			b = append(b, set.kname...)
			b = append(b, ' ')
			b = append(b, temp...)
			b = append(b, "\ndestroy "...)
			b = append(b, temp...)
			b = append(b, '\n')
		case opUpdate:
			for _, raw := range set.foreign {
				b = append(b, "del "...)
				b = append(b, set.kname...)
				b = append(b, ' ')
				b = append(b, raw...)
				b = append(b, " -exist\n"...)
			}
			b = appendMembers(b, "del ", set.kname, set.members.pendingDels(), " -exist")
			b = appendMembers(b, "add ", set.kname, set.members.pendingAdds(), " -exist")
		}
	}
	return b
}

// appendMembers appends one "<verb><kname> <member><suffix>" line per
// member of seq.
func appendMembers(b []byte, verb, kname string, seq iter.Seq[Member], suffix string) []byte {
	for m := range seq {
		b = append(b, verb...)
		b = append(b, kname...)
		b = append(b, ' ')
		b = m.appendTo(b)
		b = append(b, suffix...)
		b = append(b, '\n')
	}
	return b
}

// commit records that the kernel now holds the desired state of the sets
// of steps and reports the member changes.
func (s *IPSets) commit(steps []step) {
	for _, st := range steps {
		set := st.set
		var notify func(Member, bool)
		if s.onChange != nil {
			notify = func(m Member, added bool) { s.notify(set.name, m, added) }
		}
		set.members.commit(notify)
		h := st.want
		set.kernel, set.foreign = &h, nil
		s.log.Debug("ipsets: set written", "set", set.kname, "members", set.members.desiredLen())
	}
}

func (s *IPSets) notify(name string, m Member, added bool) {
	if s.onChange != nil {
		s.onChange(MemberChange{Set: name, Member: m, Added: added})
	}
}

// ApplyDeletions destroys owned sets that are not desired, at most
// MaxDestroysPerApply per call. A set still referenced by a kernel
// component (an iptables rule) cannot be destroyed: it is kept and tried
// again later, and the call asks to be repeated with RetryAfter instead of
// failing. Sets that wait are tried in turn, so one set in use never holds
// back the others.
func (s *IPSets) ApplyDeletions(ctx context.Context) (dataplane.ApplyResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var res dataplane.ApplyResult
	if s.fullResync {
		// The kernel's state is unknown until Apply re-reads it.
		return res, nil
	}
	var doomed []*ipset
	for _, set := range s.sets {
		if !set.wanted && set.kernel != nil {
			doomed = append(doomed, set)
		}
	}
	slices.SortFunc(doomed, func(a, b *ipset) int {
		if c := cmp.Compare(a.tried, b.tried); c != 0 {
			return c
		}
		return strings.Compare(a.kname, b.kname)
	})
	for i, set := range doomed {
		if i == s.maxDestroys {
			res.RetryAfter = s.retry
			break
		}
		s.tries++
		set.tried = s.tries
		if _, err := s.run(ctx, nil, "destroy", set.kname); err != nil {
			switch {
			case isInUse(err):
				s.log.Debug("ipsets: set still in use; destroying it later", "set", set.kname)
				res.RetryAfter = s.retry
				continue
			case isNotExist(err):
			default:
				s.fullResync = true
				return dataplane.ApplyResult{}, fmt.Errorf("%w: destroy %s: %w", ErrCommand, set.kname, err)
			}
		}
		for m := range set.members.kernel() {
			s.notify(set.name, m, false)
		}
		delete(s.sets, set.kname)
		s.log.Debug("ipsets: set destroyed", "set", set.kname)
	}
	return res, nil
}

var errorLine = regexp.MustCompile(`Error in line (\d+):`)

// newRestoreError builds the error of a failed restore of script.
func newRestoreError(script []byte, err error) *RestoreError {
	e := &RestoreError{Err: err, Stderr: stderrOf(err)}
	var ce *command.Error
	if errors.As(err, &ce) {
		e.Stdout = string(ce.Stdout)
	}
	if m := errorLine.FindStringSubmatch(e.Stderr); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
	}
	first, last := 1, 5
	if e.Line > 0 {
		first, last = max(1, e.Line-2), e.Line+2
	}
	var b strings.Builder
	n := 0
	_ = lines(script, func(line []byte) error {
		n++
		if n >= first && n <= last {
			marker := "  "
			if n == e.Line {
				marker = "> "
			}
			fmt.Fprintf(&b, "%s%d: %s\n", marker, n, line)
		}
		if n > last {
			return errStop
		}
		return nil
	})
	e.Input = b.String()
	return e
}

var errStop = errors.New("stop")

package ipsets

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/netfilter"
)

// op is what an Apply does to one set.
type op uint8

const (
	opUpdate   op = iota + 1 // add, then delete members in place
	opCreate                 // create the set and fill it
	opSwap                   // fill a temporary set and swap it in
	opRecreate               // destroy the unreferenced set, create and fill it
)

type step struct {
	set  *ipset
	op   op
	want header
}

// When an update of a set whose header is unchanged is written by a swap
// instead of in place: when the adds and deletes number more than
// swapShareNum/swapShareDen of the desired members, and at least
// minSwapChanges. Measured on a 100k-member hash:ip set (kernel 6.18,
// ipset 7.17), an in-place update costs about 5.5µs per added or deleted
// member, the adds growing the hash past its old size; filling a fresh
// set, swapping it in and destroying the old one about 3.5µs per desired
// member. Replacing 15% of the members took 160-230 ms in place and
// 330-450 ms by swap, 25% 360-490 ms against 460-470 ms, 30% about the
// same, 35% and more favoured the swap, and replacing all of them took
// 1.1-1.5 s in place against 0.35-0.5 s. The break-even is near changes
// = 0.6 × desired. Below about a hundred changes an update costs well
// under a millisecond while a swap adds a create and a destroy (which
// waits for an RCU grace period on some kernels), so small updates stay
// in place whatever their share.
const (
	swapShareNum   = 3
	swapShareDen   = 5
	minSwapChanges = 128
)

// maxRestoresPerApply bounds the restores of one Apply: the first, and
// one more after each set that failed on its own was taken out. Failures
// beyond that are likely not the sets' own (the kernel is out of memory,
// say), so they fail the Apply as a whole.
const maxRestoresPerApply = 8

// Apply brings the kernel's sets to the desired state, except removals of
// whole sets (ApplyDeletions): it creates missing sets, writes member
// changes, and swaps in sets whose size or range changed or whose members
// mostly changed, all in one `ipset restore`. At start and after a failure
// it first re-reads every owned set; after QueueResync it lists the
// kernel's sets and re-reads a ResyncBudget's worth of them. A nil ctx
// means context.Background().
//
// One set never holds back the others. When the kernel refuses a line of
// the restore, the set the line belongs to is taken out of the input,
// the sets written before it are re-read, and the rest is written again,
// within the same Apply; the failed set is retried on its own backoff
// (see Options.RetryInterval). A set whose type must change while a rule
// refers to it (netfilter.ErrSetInUse), and a set ipset cannot read, wait the same
// way. While any set waits, Apply returns an error wrapping
// dataplane.ErrPartial that names each such set, and asks through
// ApplyResult.RetryAfter to be called again when the first is due.
// Failures that belong to no set (ipset missing, the set list unreadable,
// a restore killed) fail the Apply as a whole.
func (s *IPSets) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger.Begin()
	err := s.sync(ctx)
	var steps []step
	if err == nil {
		steps, err = s.planAndRecord(ctx)
	}
	for round := 1; err == nil && len(steps) > 0; round++ {
		script, ends, temp := s.script(steps)
		out, rerr := s.run(ctx, bytes.NewReader(script), "restore")
		if rerr == nil {
			s.commit(steps)
			break
		}
		e := newRestoreError(script, out, rerr)
		i := blame(ends, e)
		if i < 0 || round == maxRestoresPerApply {
			s.log.Warn("ipsets: ipset restore failed; re-reading the kernel on the next apply",
				"line", e.Line, "error", e.Message())
			err = restoreError(e)
			break
		}
		s.failed(steps[i].set.kname, opWrite, ErrRestore, fmt.Sprintf("line %d %q: %s", e.Line, e.FailedLine(), ipsetMessage(e.Message())), e)
		// The lines before the failing one were written, or some of them:
		// read back what they touched, then write the rest again.
		if err = s.reread(ctx, steps[:i+1], temp); err == nil {
			steps, err = s.planAndRecord(ctx)
		}
	}
	if err != nil {
		s.fullResync = true
		return dataplane.ApplyResult{}, err
	}
	var res dataplane.ApplyResult
	if len(s.recheck) > 0 {
		res.RetryAfter = s.retry
	}
	return s.result(res)
}

// blame returns the index of the step whose lines (ends holds each step's
// last line) include the line e failed on, or -1 when the failure is not
// one line's: ipset named no line, or did not exit with its own status.
func blame(ends []int, e *command.RestoreError) int {
	if e.Line <= 0 || !refused(e.Err) {
		return -1
	}
	i, _ := slices.BinarySearch(ends, e.Line)
	if i == len(ends) {
		return -1
	}
	return i
}

// reread reads back the sets of steps, and the temporary set of their
// swaps (temp, when not empty), after a failed restore, reporting the
// member changes that the restore did write. A temporary set left behind
// is then known, so the next swap takes another name and ApplyDeletions
// destroys it.
func (s *IPSets) reread(ctx context.Context, steps []step, temp string) error {
	for _, st := range steps {
		if err := s.read(ctx, st.set.kname, true); err != nil {
			return err
		}
	}
	if temp == "" {
		return nil
	}
	return s.read(ctx, temp, false)
}

// blocked is a set that must be destroyed and created again while refs
// kernel references hold it: it is not written.
type blocked struct {
	st   step
	refs int
}

// plan decides what to do with every desired set that is not waiting for
// a retry, in kernel-name order. It also returns the sets whose write
// kernel references block and the sets that need no write. It writes
// nothing and records nothing: Apply (planAndRecord) and Plan both decide
// with it.
func (s *IPSets) plan(ctx context.Context) (steps []step, stuck []blocked, done []*ipset, err error) {
	for _, set := range s.sets {
		if !set.wanted || set.unread {
			continue
		}
		want := headerOf(&set.meta)
		var o op
		switch {
		case set.kernel == nil:
			o = opCreate
		case *set.kernel == want:
			switch {
			case set.members.synced() && len(set.foreign) == 0:
			case swapPays(set):
				o = opSwap
			default:
				o = opUpdate
			}
		case swappable(*set.kernel, want):
			o = opSwap
		default:
			o = opRecreate
		}
		switch {
		case o == 0:
			done = append(done, set)
		case !s.ledger.Waiting(set.kname):
			steps = append(steps, step{set: set, op: o, want: want})
		}
	}
	slices.SortFunc(steps, func(a, b step) int { return strings.Compare(a.set.kname, b.set.kname) })
	kept := steps[:0]
	for _, st := range steps {
		if st.op == opRecreate {
			refs, err := s.referenced(ctx, st.set.kname)
			if err != nil {
				return nil, nil, nil, err
			}
			if refs > 0 {
				stuck = append(stuck, blocked{st: st, refs: refs})
				continue
			}
		}
		kept = append(kept, st)
	}
	return kept, stuck, done, nil
}

// planAndRecord plans (see plan) and records the outcome on the sets: a
// set that needs no write is no longer failing (repaired, or nothing left
// to do), a blocked one fails.
func (s *IPSets) planAndRecord(ctx context.Context) ([]step, error) {
	steps, stuck, done, err := s.plan(ctx)
	if err != nil {
		return nil, err
	}
	for _, set := range done {
		s.ledger.Forget(set.kname)
	}
	for _, b := range stuck {
		set := b.st.set
		s.failed(set.kname, opWrite, errSetInUse, fmt.Sprintf("it is %s %v in the kernel and must become %s %v, but %d kernel reference(s) hold it: the kernel swaps only sets of equal type and family; remove the references or use a new set name",
			set.kernel.typ, set.kernel.family, b.st.want.typ, b.st.want.family, b.refs), nil)
	}
	return steps, nil
}

// writes returns how many writes the step makes, as Plan lists them: the
// set created, swapped in or recreated (one), and each member added, and
// deleted when the set is written in place or swapped (those it cannot
// represent included); a recreated set gets every desired member.
func (st step) writes() int {
	m := &st.set.members
	switch st.op {
	case opCreate:
		return 1 + len(m.adds)
	case opRecreate:
		return 1 + m.desiredLen()
	case opSwap:
		return 1 + len(m.adds) + len(st.set.foreign) + len(m.dels)
	}
	return len(m.adds) + len(st.set.foreign) + len(m.dels)
}

// swapPays reports whether a set whose header is unchanged is better
// written by swapping in a new set than in place: when most of it
// changes, or when adding before deleting would overfill it.
func swapPays(set *ipset) bool {
	m := &set.members
	changes := len(m.adds) + len(m.dels) + len(set.foreign)
	if set.meta.Type != netfilter.BitmapPort && m.kernelLen()+len(set.foreign)+len(m.adds) > set.meta.MaxSize {
		return true
	}
	return changes >= minSwapChanges && changes*swapShareDen > m.desiredLen()*swapShareNum
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

// script renders the restore input for steps. It also returns the number
// of lines written up to the end of each step, and the name of the
// temporary set its swaps use ("" when none).
func (s *IPSets) script(steps []step) (b []byte, ends []int, temp string) {
	size := 0
	for _, st := range steps {
		n := len(st.set.members.adds) + len(st.set.members.dels) + len(st.set.foreign)
		if st.op == opSwap || st.op == opRecreate {
			n = st.set.members.desiredLen()
		}
		size += (n + 4) * (len(st.set.kname) + 32)
	}
	b = make([]byte, 0, size)
	ends = make([]int, len(steps))
	lines := 0
	for i, st := range steps {
		set, start := st.set, len(b)
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
			// Adds first: a member that stays is never missing, and the
			// set never holds fewer members than before and after.
			b = appendMembers(b, "add ", set.kname, set.members.pendingAdds(), " -exist")
			for _, raw := range set.foreign {
				b = append(b, "del "...)
				b = append(b, set.kname...)
				b = append(b, ' ')
				b = append(b, raw...)
				b = append(b, " -exist\n"...)
			}
			b = appendMembers(b, "del ", set.kname, set.members.pendingDels(), " -exist")
		}
		lines += bytes.Count(b[start:], []byte{'\n'})
		ends[i] = lines
	}
	return b, ends, temp
}

// appendMembers appends one "<verb><kname> <member><suffix>" line per
// member of seq.
func appendMembers(b []byte, verb, kname string, seq iter.Seq[netfilter.Member], suffix string) []byte {
	for m := range seq {
		b = append(b, verb...)
		b = append(b, kname...)
		b = append(b, ' ')
		b, _ = m.AppendText(b) // the driver holds only valid members
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
		var notify func(netfilter.Member, bool)
		if s.onChange != nil {
			notify = func(m netfilter.Member, added bool) { s.notify(set.name, m, added) }
		}
		s.writes += uint64(st.writes())
		set.members.commit(notify)
		h := st.want
		set.kernel, set.foreign = &h, nil
		s.ledger.Forget(set.kname)
		s.log.Debug("ipsets: set written", "set", set.kname, "members", set.members.desiredLen())
	}
}

// notify reports a member change of the set called name; the temporary
// sets of swaps are not reported.
func (s *IPSets) notify(name string, m netfilter.Member, added bool) {
	if s.onChange != nil && netfilter.ValidSetName(name) {
		s.onChange(netfilter.MemberChange{Set: name, Member: m, Added: added})
	}
}

// doomed returns the owned sets that are not desired and may be destroyed
// now, in the order ApplyDeletions tries them: those tried least recently
// first, then by kernel name.
func (s *IPSets) doomed() []*ipset {
	var doomed []*ipset
	for _, set := range s.sets {
		if !set.wanted && set.kernel != nil && !set.unread && !s.ledger.Waiting(set.kname) {
			doomed = append(doomed, set)
		}
	}
	slices.SortFunc(doomed, func(a, b *ipset) int {
		if c := cmp.Compare(a.tried, b.tried); c != 0 {
			return c
		}
		return strings.Compare(a.kname, b.kname)
	})
	return doomed
}

// ApplyDeletions destroys owned sets that are not desired, at most
// MaxDestroysPerApply per call. A nil ctx means context.Background().
//
// A set that cannot be destroyed — still referenced by a kernel component
// such as a foreign iptables rule (netfilter.ErrSetInUse), or refused otherwise —
// never holds back the others: it is kept and tried again on its own
// backoff, and ApplyDeletions returns an error wrapping
// dataplane.ErrPartial naming it, with ApplyResult.RetryAfter set for its
// next try. ApplyResult.RetryAfter also asks for another call while sets
// remain beyond MaxDestroysPerApply.
func (s *IPSets) ApplyDeletions(ctx context.Context) (dataplane.ApplyResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var res dataplane.ApplyResult
	if s.fullResync {
		// The kernel's state is unknown until Apply re-reads it.
		return res, nil
	}
	s.ledger.Begin()
	doomed := s.doomed()
	for i, set := range doomed {
		if i == s.maxDestroys {
			res.RetryAfter = s.retry
			break
		}
		s.tries++
		set.tried = s.tries
		if _, err := s.run(ctx, nil, "destroy", set.kname); err != nil && !isNotExist(err) {
			switch {
			case isInUse(err):
				s.failed(set.kname, opDestroy, errSetInUse, "", err)
			case refused(err):
				s.failed(set.kname, opDestroy, ErrCommand, "", err)
			default:
				s.fullResync = true
				return dataplane.ApplyResult{}, fmt.Errorf("%w: destroy %s: %w", ErrCommand, set.kname, err)
			}
			continue
		}
		for m := range set.members.kernel() {
			s.notify(set.name, m, false)
		}
		delete(s.sets, set.kname)
		s.ledger.Forget(set.kname)
		s.writes++
		s.log.Debug("ipsets: set destroyed", "set", set.kname)
	}
	return s.result(res)
}

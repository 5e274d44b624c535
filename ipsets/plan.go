package ipsets

import (
	"context"
	"iter"
	"slices"
	"strings"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/netfilter"
)

// The kinds of the driver's objects in its Plan and State.
const (
	kindSet     dataplane.ObjectKind = "set"
	kindElement dataplane.ObjectKind = "element"
)

// setText returns a set as its create line says it, without the verb:
// "np-x hash:ip family inet maxelem 1024", and "+options" after it for a
// kernel set with options the driver never sets (timeout, counters …).
func setText(kname string, h header) string {
	t := strings.TrimSuffix(strings.TrimPrefix(string(appendCreate(nil, kname, h, false)), "create "), "\n")
	if h.extra {
		t += " +options"
	}
	return t
}

// elementWrites returns one write of op per member of seq, "kname member",
// sorted.
func elementWrites(op dataplane.WriteOp, kname string, seq iter.Seq[netfilter.Member]) []dataplane.Write {
	var ws []dataplane.Write
	for m := range seq {
		ws = append(ws, dataplane.Write{Op: op, Kind: kindElement, Object: kname + " " + m.String()})
	}
	slices.SortFunc(ws, func(a, b dataplane.Write) int { return strings.Compare(a.Object, b.Object) })
	return ws
}

// Plan returns the writes the next Apply and ApplyDeletions would make,
// set by set in kernel-name order, decided by the code Apply decides
// with: a created set ("+ set", then "+ element" for each member); a set
// written in place (its members added, then the members it cannot
// represent and the unwanted ones deleted); a set swapped for a new one
// ("~ set", Detail "swapped in" and the header it replaces, then the
// members that change); a set destroyed and created again as its type
// changes ("~ set", Detail "destroyed and created" and the old header,
// then every member, the old ones going with the old set); then the
// owned sets ApplyDeletions would destroy ("- set"), in its order and
// within MaxDestroysPerApply. Members are "set member", sorted within a
// set. A set waiting for its retry, one ipset cannot read and one whose
// type change kernel references block are not written and not listed.
// It reads the kernel where Apply would (at start, after a failure or
// QueueResync), and that read serves the next Apply; it writes nothing.
// It implements dataplane.Planner. A nil ctx is context.Background().
func (s *IPSets) Plan(ctx context.Context) (dataplane.Plan, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := dataplane.Plan{Driver: s.Name()}
	s.ledger.Begin()
	if err := s.sync(ctx); err != nil {
		s.fullResync = true
		return p, err
	}
	steps, _, _, err := s.plan(ctx)
	if err != nil {
		s.fullResync = true
		return p, err
	}
	for _, st := range steps {
		set := st.set
		m := &set.members
		switch st.op {
		case opCreate:
			p.Writes = append(p.Writes, dataplane.Write{Op: dataplane.WriteAdd, Kind: kindSet, Object: setText(set.kname, st.want)})
			p.Writes = append(p.Writes, elementWrites(dataplane.WriteAdd, set.kname, m.pendingAdds())...)
			continue
		case opRecreate:
			p.Writes = append(p.Writes, dataplane.Write{Op: dataplane.WriteReplace, Kind: kindSet, Object: setText(set.kname, st.want),
				Detail: "destroyed and created, was " + setText(set.kname, *set.kernel)})
			p.Writes = append(p.Writes, elementWrites(dataplane.WriteAdd, set.kname, m.desired())...)
			continue
		case opSwap:
			p.Writes = append(p.Writes, dataplane.Write{Op: dataplane.WriteReplace, Kind: kindSet, Object: setText(set.kname, st.want),
				Detail: "swapped in, was " + setText(set.kname, *set.kernel)})
		}
		p.Writes = append(p.Writes, elementWrites(dataplane.WriteAdd, set.kname, m.pendingAdds())...)
		foreign := slices.Sorted(slices.Values(set.foreign))
		for _, raw := range foreign {
			p.Writes = append(p.Writes, dataplane.Write{Op: dataplane.WriteDelete, Kind: kindElement, Object: set.kname + " " + raw})
		}
		p.Writes = append(p.Writes, elementWrites(dataplane.WriteDelete, set.kname, m.pendingDels())...)
	}
	for i, set := range s.doomed() {
		if i == s.maxDestroys {
			break
		}
		p.Writes = append(p.Writes, dataplane.Write{Op: dataplane.WriteDelete, Kind: kindSet, Object: setText(set.kname, *set.kernel)})
	}
	return p, nil
}

// State returns the owned sets the kernel holds ("set" objects, as their
// create line says them) and their members ("element", "set member"), as
// last read and then written; the drift: sets missing, of another header
// or not wanted, and members missing or unwanted (those the driver cannot
// represent included); and the failing sets, in the order they first
// failed (the driver's ledger: each a *dataplane.ObjectError of Kind
// "set", Op "write", "read" or "destroy", Name the kernel name, Attempts
// the failures in a row). It reads the kernel where
// Apply would, and writes nothing. It implements dataplane.Stater. A nil
// ctx is context.Background().
func (s *IPSets) State(ctx context.Context) (dataplane.State, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := dataplane.State{Driver: s.Name()}
	s.ledger.Begin()
	if err := s.sync(ctx); err != nil {
		s.fullResync = true
		return st, err
	}
	for kname, set := range s.sets {
		if set.kernel != nil && !set.unread {
			st.Owned = append(st.Owned, dataplane.Object{Kind: kindSet, Text: setText(kname, *set.kernel)})
			for m := range set.members.kernel() {
				st.Owned = append(st.Owned, dataplane.Object{Kind: kindElement, Text: kname + " " + m.String()})
			}
			for _, raw := range set.foreign {
				st.Owned = append(st.Owned, dataplane.Object{Kind: kindElement, Text: kname + " " + raw})
				st.Drift = append(st.Drift, dataplane.Drift{Kind: kindElement, Name: kname + " " + raw, Have: kname + " " + raw})
			}
		}
		if !set.wanted {
			if set.kernel != nil {
				st.Drift = append(st.Drift, dataplane.Drift{Kind: kindSet, Name: kname, Have: setText(kname, *set.kernel)})
			}
			continue
		}
		want := headerOf(&set.meta)
		switch {
		case set.kernel == nil:
			st.Drift = append(st.Drift, dataplane.Drift{Kind: kindSet, Name: kname, Want: setText(kname, want)})
		case *set.kernel != want:
			st.Drift = append(st.Drift, dataplane.Drift{Kind: kindSet, Name: kname, Want: setText(kname, want), Have: setText(kname, *set.kernel)})
		}
		for m := range set.members.pendingAdds() {
			t := kname + " " + m.String()
			st.Drift = append(st.Drift, dataplane.Drift{Kind: kindElement, Name: t, Want: t})
		}
		for m := range set.members.pendingDels() {
			t := kname + " " + m.String()
			st.Drift = append(st.Drift, dataplane.Drift{Kind: kindElement, Name: t, Have: t})
		}
	}
	st.Failing = s.ledger.Errors()
	dataplane.SortState(&st)
	return st, nil
}

var (
	_ dataplane.Planner = (*IPSets)(nil)
	_ dataplane.Stater  = (*IPSets)(nil)
)

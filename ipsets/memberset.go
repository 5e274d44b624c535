package ipsets

import (
	"iter"

	"github.com/nodeplane/nodeplane/netfilter"
)

// memberSet tracks a set's desired members against the kernel's. Every
// member is in at most one of three maps, so a member the kernel agrees on
// is stored once:
//
//   - inSync: desired and in the kernel;
//   - adds: desired, not in the kernel;
//   - dels: in the kernel, not desired.
//
// It is built for large sets: maps are sized up front when the final size
// is known, a fresh set's pending map becomes its in-sync map without
// copying once written, and an emptied large map is dropped rather than
// kept (Go maps never shrink).
type memberSet struct {
	inSync, adds, dels map[netfilter.Member]struct{}
}

func (s *memberSet) desiredLen() int { return len(s.inSync) + len(s.adds) }

func (s *memberSet) kernelLen() int { return len(s.inSync) + len(s.dels) }

// synced reports whether the kernel holds exactly the desired members.
func (s *memberSet) synced() bool { return len(s.adds) == 0 && len(s.dels) == 0 }

func (s *memberSet) desiredHas(m netfilter.Member) bool {
	if _, ok := s.inSync[m]; ok {
		return true
	}
	_, ok := s.adds[m]
	return ok
}

func put(m *map[netfilter.Member]struct{}, k netfilter.Member) {
	if *m == nil {
		*m = map[netfilter.Member]struct{}{}
	}
	(*m)[k] = struct{}{}
}

// want makes m desired and reports whether it was not.
func (s *memberSet) want(m netfilter.Member) bool {
	if _, ok := s.inSync[m]; ok {
		return false
	}
	if _, ok := s.adds[m]; ok {
		return false
	}
	if _, ok := s.dels[m]; ok {
		delete(s.dels, m)
		put(&s.inSync, m)
		return true
	}
	put(&s.adds, m)
	return true
}

// unwant makes m not desired and reports whether it was.
func (s *memberSet) unwant(m netfilter.Member) bool {
	if _, ok := s.inSync[m]; ok {
		delete(s.inSync, m)
		put(&s.dels, m)
		return true
	}
	if _, ok := s.adds[m]; ok {
		delete(s.adds, m)
		return true
	}
	return false
}

// replaceDesired makes members (duplicates allowed) the desired members
// and reports whether that changed them.
func (s *memberSet) replaceDesired(members []netfilter.Member) bool {
	before := s.desiredLen()
	// fresh is set once a member that was not desired is seen: without
	// one, and with as many members as before, nothing changed.
	fresh := false
	wasAdd := func(m netfilter.Member) {
		if !fresh {
			_, ok := s.adds[m]
			fresh = !ok
		}
	}
	if s.kernelLen() == 0 {
		adds := make(map[netfilter.Member]struct{}, len(members))
		for _, m := range members {
			wasAdd(m)
			adds[m] = struct{}{}
		}
		s.inSync, s.adds = nil, adds
		return fresh || len(adds) != before
	}
	// Two passes, so that both maps are allocated at their final size:
	// growing a map of 100k members costs more than looking them up.
	inKernel := make([]bool, len(members))
	nIn := 0
	for i, m := range members {
		if s.kernelHas(m) {
			inKernel[i] = true
			nIn++
		}
	}
	in := make(map[netfilter.Member]struct{}, nIn)
	var adds map[netfilter.Member]struct{}
	if nIn < len(members) {
		adds = make(map[netfilter.Member]struct{}, len(members)-nIn)
	}
	for i, m := range members {
		if !inKernel[i] {
			wasAdd(m)
			adds[m] = struct{}{}
			continue
		}
		if !fresh {
			_, ok := s.inSync[m]
			fresh = !ok
		}
		in[m] = struct{}{}
	}
	// The kernel's members that are not kept are deleted: the old in-sync
	// map (about to be dropped) less those kept, and the old deletes.
	dels := s.inSync
	for m := range in {
		delete(dels, m)
	}
	for m := range s.dels {
		if _, ok := in[m]; !ok {
			put(&dels, m)
		}
	}
	if len(dels) == 0 {
		dels = nil
	}
	s.inSync, s.adds, s.dels = in, adds, dels
	return fresh || len(in)+len(adds) != before
}

// clearDesired makes no member desired.
func (s *memberSet) clearDesired() {
	if len(s.dels) == 0 {
		s.dels = s.inSync
	} else {
		for m := range s.inSync {
			s.dels[m] = struct{}{}
		}
	}
	s.inSync, s.adds = nil, nil
}

// clearKernel records that the kernel holds no member (the set is gone).
func (s *memberSet) clearKernel() {
	if len(s.adds) == 0 {
		s.adds = s.inSync
	} else {
		for m := range s.inSync {
			s.adds[m] = struct{}{}
		}
	}
	s.inSync, s.dels = nil, nil
}

// replaceKernel replaces the kernel's members with those dump reports.
// When notify is not nil it is called for each member the kernel gained
// (true) or lost (false) since the last view. On error nothing changes.
func (s *memberSet) replaceKernel(dump func(add func(netfilter.Member)) error, notify func(m netfilter.Member, added bool)) error {
	k := make(map[netfilter.Member]struct{}, s.kernelLen())
	if err := dump(func(m netfilter.Member) { k[m] = struct{}{} }); err != nil {
		return err
	}
	if notify != nil {
		for m := range k {
			if !s.kernelHas(m) {
				notify(m, true)
			}
		}
		for m := range s.kernel() {
			if _, ok := k[m]; !ok {
				notify(m, false)
			}
		}
	}
	var adds, dels map[netfilter.Member]struct{}
	for _, want := range [2]map[netfilter.Member]struct{}{s.inSync, s.adds} {
		for m := range want {
			if _, ok := k[m]; !ok {
				put(&adds, m)
			}
		}
	}
	for m := range k {
		if !s.desiredHas(m) {
			put(&dels, m)
			delete(k, m)
		}
	}
	if len(k) == 0 {
		k = nil
	}
	s.inSync, s.adds, s.dels = k, adds, dels
	return nil
}

func (s *memberSet) kernelHas(m netfilter.Member) bool {
	if _, ok := s.inSync[m]; ok {
		return true
	}
	_, ok := s.dels[m]
	return ok
}

// commit records that the kernel now holds the desired members, calling
// notify (when not nil) for each member removed, then each added.
func (s *memberSet) commit(notify func(m netfilter.Member, added bool)) {
	if notify != nil {
		for m := range s.dels {
			notify(m, false)
		}
		for m := range s.adds {
			notify(m, true)
		}
	}
	switch {
	case len(s.adds) == 0:
	case len(s.inSync) < len(s.adds):
		// Merge the smaller map into the larger.
		for m := range s.inSync {
			s.adds[m] = struct{}{}
		}
		s.inSync = s.adds
	default:
		for m := range s.adds {
			s.inSync[m] = struct{}{}
		}
	}
	s.adds, s.dels = nil, nil
}

func seqOf(maps ...map[netfilter.Member]struct{}) iter.Seq[netfilter.Member] {
	return func(yield func(netfilter.Member) bool) {
		for _, mm := range maps {
			for m := range mm {
				if !yield(m) {
					return
				}
			}
		}
	}
}

func (s *memberSet) desired() iter.Seq[netfilter.Member] { return seqOf(s.inSync, s.adds) }
func (s *memberSet) kernel() iter.Seq[netfilter.Member]  { return seqOf(s.inSync, s.dels) }
func (s *memberSet) pendingAdds() iter.Seq[netfilter.Member] {
	return seqOf(s.adds)
}
func (s *memberSet) pendingDels() iter.Seq[netfilter.Member] { return seqOf(s.dels) }

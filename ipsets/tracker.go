package ipsets

import "iter"

// memberSet tracks a set's desired members against the kernel's. Every
// member is in at most one of three maps, so a member the kernel agrees on
// is stored once:
//
//   - inSync: desired and in the kernel;
//   - adds: desired, not in the kernel;
//   - dels: in the kernel, not desired.
//
// It is internal/delta's SetTracker specialised for large sets: maps are
// sized up front when the final size is known, a fresh set's pending map
// becomes its in-sync map without copying once written, and an emptied
// large map is dropped rather than kept (Go maps never shrink).
type memberSet struct {
	inSync, adds, dels map[Member]struct{}
}

func (s *memberSet) desiredLen() int { return len(s.inSync) + len(s.adds) }

func (s *memberSet) kernelLen() int { return len(s.inSync) + len(s.dels) }

// synced reports whether the kernel holds exactly the desired members.
func (s *memberSet) synced() bool { return len(s.adds) == 0 && len(s.dels) == 0 }

func (s *memberSet) desiredHas(m Member) bool {
	if _, ok := s.inSync[m]; ok {
		return true
	}
	_, ok := s.adds[m]
	return ok
}

func put(m *map[Member]struct{}, k Member) {
	if *m == nil {
		*m = map[Member]struct{}{}
	}
	(*m)[k] = struct{}{}
}

// want makes m desired.
func (s *memberSet) want(m Member) {
	if _, ok := s.inSync[m]; ok {
		return
	}
	if _, ok := s.dels[m]; ok {
		delete(s.dels, m)
		put(&s.inSync, m)
		return
	}
	put(&s.adds, m)
}

// unwant makes m not desired.
func (s *memberSet) unwant(m Member) {
	if _, ok := s.inSync[m]; ok {
		delete(s.inSync, m)
		put(&s.dels, m)
		return
	}
	delete(s.adds, m)
}

// replaceDesired makes members (duplicates allowed) the desired members.
func (s *memberSet) replaceDesired(members []Member) {
	if s.kernelLen() == 0 {
		s.adds = make(map[Member]struct{}, len(members))
		for _, m := range members {
			s.adds[m] = struct{}{}
		}
		s.inSync = nil
		return
	}
	in := make(map[Member]struct{}, min(len(members), s.kernelLen()))
	var adds, dels map[Member]struct{}
	for _, m := range members {
		_, inKernel := s.inSync[m]
		if !inKernel {
			_, inKernel = s.dels[m]
		}
		if inKernel {
			in[m] = struct{}{}
		} else {
			put(&adds, m)
		}
	}
	for _, old := range [2]map[Member]struct{}{s.inSync, s.dels} {
		for m := range old {
			if _, ok := in[m]; !ok {
				put(&dels, m)
			}
		}
	}
	s.inSync, s.adds, s.dels = in, adds, dels
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

// replaceKernel replaces the kernel's members with those dump reports. On
// error nothing changes.
func (s *memberSet) replaceKernel(dump func(add func(Member)) error) error {
	k := make(map[Member]struct{}, s.kernelLen())
	if err := dump(func(m Member) { k[m] = struct{}{} }); err != nil {
		return err
	}
	var adds, dels map[Member]struct{}
	for _, want := range [2]map[Member]struct{}{s.inSync, s.adds} {
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

// commit records that the kernel now holds the desired members, calling
// notify (when not nil) for each member removed, then each added.
func (s *memberSet) commit(notify func(m Member, added bool)) {
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
	case len(s.inSync) == 0:
		s.inSync = s.adds
	default:
		for m := range s.adds {
			s.inSync[m] = struct{}{}
		}
	}
	s.adds, s.dels = nil, nil
}

func seqOf(maps ...map[Member]struct{}) iter.Seq[Member] {
	return func(yield func(Member) bool) {
		for _, mm := range maps {
			for m := range mm {
				if !yield(m) {
					return
				}
			}
		}
	}
}

func (s *memberSet) desired() iter.Seq[Member] { return seqOf(s.inSync, s.adds) }
func (s *memberSet) kernel() iter.Seq[Member]  { return seqOf(s.inSync, s.dels) }
func (s *memberSet) pendingAdds() iter.Seq[Member] {
	return seqOf(s.adds)
}
func (s *memberSet) pendingDels() iter.Seq[Member] { return seqOf(s.dels) }

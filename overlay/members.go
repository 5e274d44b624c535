package overlay

import (
	"net/netip"

	"github.com/nodeplane/nodeplane/netfilter"
)

// setSink is where the node-address set is declared: an netfilter.Sets.
type setSink interface {
	// AddOrReplaceSet declares the whole set.
	AddOrReplaceSet(meta netfilter.SetMetadata, members []netfilter.Member) error
	// AddMembers declares more members.
	AddMembers(name string, members []netfilter.Member) error
	// RemoveMembers withdraws members.
	RemoveMembers(name string, members []netfilter.Member) error
}

// memberSet keeps one hash:net set equal to the node underlay addresses plus
// fixed extra prefixes, declaring only the changes after the first Flush.
// A member wanted twice (two nodes with one address, or an address that is
// also an extra prefix) stays until neither wants it.
type memberSet struct {
	sink    setSink
	name    string
	refs    map[netfilter.Member]int
	add     map[netfilter.Member]struct{}
	del     map[netfilter.Member]struct{}
	created bool
}

// newMemberSet returns the set name on sink holding extra. A nil sink makes
// every method a no-op.
func newMemberSet(sink setSink, name string, extra []netip.Prefix) *memberSet {
	m := &memberSet{sink: sink, name: name, refs: map[netfilter.Member]int{}, add: map[netfilter.Member]struct{}{}, del: map[netfilter.Member]struct{}{}}
	for _, p := range extra {
		for _, mem := range netfilter.NetMembers(p) {
			m.ref(mem, 1)
		}
	}
	return m
}

// Add counts one more want of addr.
func (m *memberSet) Add(addr netip.Addr) {
	if addr.IsValid() {
		m.ref(netfilter.IPMember(addr), 1)
	}
}

// Remove counts one want of addr less.
func (m *memberSet) Remove(addr netip.Addr) {
	if addr.IsValid() {
		m.ref(netfilter.IPMember(addr), -1)
	}
}

func (m *memberSet) ref(mem netfilter.Member, d int) {
	if m == nil || m.sink == nil {
		return
	}
	n := m.refs[mem] + d
	switch {
	case n <= 0 && m.refs[mem] > 0:
		delete(m.refs, mem)
		if _, ok := m.add[mem]; ok {
			delete(m.add, mem)
		} else {
			m.del[mem] = struct{}{}
		}
	case n > 0 && m.refs[mem] == 0:
		m.refs[mem] = n
		if _, ok := m.del[mem]; ok {
			delete(m.del, mem)
		} else {
			m.add[mem] = struct{}{}
		}
	case n > 0:
		m.refs[mem] = n
	}
}

// Len returns the number of members.
func (m *memberSet) Len() int {
	if m == nil {
		return 0
	}
	return len(m.refs)
}

// Flush declares the set (whole, the first time) and then its changes.
func (m *memberSet) Flush() error {
	if m == nil || m.sink == nil {
		return nil
	}
	if !m.created {
		all := make([]netfilter.Member, 0, len(m.refs))
		for mem := range m.refs {
			all = append(all, mem)
		}
		if err := m.sink.AddOrReplaceSet(netfilter.SetMetadata{Name: m.name, Type: netfilter.HashNet}, all); err != nil {
			return err
		}
		m.created = true
		m.add, m.del = map[netfilter.Member]struct{}{}, map[netfilter.Member]struct{}{} // fresh: see routeCalc.Flush
		return nil
	}
	if len(m.add) > 0 {
		if err := m.sink.AddMembers(m.name, keys(m.add)); err != nil {
			return err
		}
		m.add = map[netfilter.Member]struct{}{}
	}
	if len(m.del) > 0 {
		if err := m.sink.RemoveMembers(m.name, keys(m.del)); err != nil {
			return err
		}
		m.del = map[netfilter.Member]struct{}{}
	}
	return nil
}

func keys[K comparable](m map[K]struct{}) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

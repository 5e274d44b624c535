package policy

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/nodeplane/nodeplane/netfilter"
)

// Model is the policy state as the messages left it: policies, profiles,
// sets and endpoints, each checked as it arrives. A Manager renders from
// one, and Explain decides from one; it is plain data with no I/O. A Model
// is not safe for concurrent use.
type Model struct {
	policies  map[string]Policy
	profiles  map[string]Profile
	sets      map[string]*modelSet
	workloads map[string]Workload
	hosts     map[string]HostEndpoint
	ifaces    map[string]string // workload interface → workload ID
	hostIf    map[string]string // host endpoint interface → host endpoint ID
}

type modelSet struct {
	kind    SetKind
	members map[netfilter.Member]struct{}
	// refused: the Manager's set driver refused the set, so its rules
	// match as the kernel's do (setBad).
	refused bool
}

// markRefused records whether the set driver refused set id (the Manager
// calls it as it declares the set).
func (m *Model) markRefused(id string, refused bool) {
	if s, ok := m.sets[id]; ok {
		s.refused = refused
	}
}

// setBad reports whether set id, which the model holds, cannot serve a
// reference that wants a set of kind: the set driver refused it, or it is
// of another kind (named ports named as addresses, say). A rule that names
// it then matches no packet, whether it names it as an alternative (no
// packet is in it) or as an exception (every packet is, so that a bad
// exception never widens an allow).
func (m *Model) setBad(id string, kind SetKind) bool {
	s, ok := m.sets[id]
	return ok && (s.refused || s.kind != kind)
}

// NewModel returns an empty Model.
func NewModel() *Model {
	return &Model{
		policies:  map[string]Policy{},
		profiles:  map[string]Profile{},
		sets:      map[string]*modelSet{},
		workloads: map[string]Workload{},
		hosts:     map[string]HostEndpoint{},
		ifaces:    map[string]string{},
		hostIf:    map[string]string{},
	}
}

// Update applies one message. It returns whether msg is one of the
// package's message types, and an error for a message it refuses (an
// invalid object, a delta of an unknown set, an interface another
// endpoint has), in which case nothing changed. Other types are ignored.
func (m *Model) Update(msg any) (known bool, err error) {
	switch u := msg.(type) {
	case PolicyUpdate:
		if err := u.Policy.Validate(); err != nil {
			return true, err
		}
		m.policies[u.Policy.ID] = clonePolicy(u.Policy)
	case PolicyRemove:
		delete(m.policies, u.ID)
	case ProfileUpdate:
		if err := u.Profile.Validate(); err != nil {
			return true, err
		}
		p := u.Profile
		p.Ingress, p.Egress = slices.Clone(p.Ingress), slices.Clone(p.Egress)
		m.profiles[p.ID] = p
	case ProfileRemove:
		delete(m.profiles, u.ID)
	case SetUpdate:
		if err := u.Validate(); err != nil {
			return true, err
		}
		s := &modelSet{kind: u.Kind, members: make(map[netfilter.Member]struct{}, len(u.Members))}
		for _, mem := range u.Members {
			s.members[mem] = struct{}{}
		}
		m.sets[u.ID] = s
	case SetDelta:
		s, ok := m.sets[u.ID]
		if !ok {
			return true, fmt.Errorf("%w %s: a delta of a set not given", ErrInvalidSet, u.ID)
		}
		if err := validMembers(u.ID, s.kind, slices.Concat(u.Add, u.Remove)); err != nil {
			return true, err
		}
		for _, mem := range u.Remove {
			delete(s.members, mem)
		}
		for _, mem := range u.Add {
			s.members[mem] = struct{}{}
		}
	case SetRemove:
		delete(m.sets, u.ID)
	case WorkloadUpdate:
		w := u.Endpoint
		if err := w.Validate(); err != nil {
			return true, err
		}
		if other, ok := m.ifaces[w.Iface]; ok && other != w.ID {
			return true, fmt.Errorf("%w %s: interface %s belongs to workload %s", ErrInvalidEndpoint, w.ID, w.Iface, other)
		}
		m.removeWorkload(w.ID)
		m.workloads[w.ID] = cloneWorkload(w)
		m.ifaces[w.Iface] = w.ID
	case WorkloadRemove:
		m.removeWorkload(u.ID)
	case HostEndpointUpdate:
		h := u.Endpoint
		if err := h.Validate(); err != nil {
			return true, err
		}
		if other, ok := m.hostIf[h.Iface]; ok && other != h.ID {
			return true, fmt.Errorf("%w %s: interface %s belongs to host endpoint %s", ErrInvalidEndpoint, h.ID, h.Iface, other)
		}
		m.removeHost(h.ID)
		m.hosts[h.ID] = cloneHost(h)
		m.hostIf[h.Iface] = h.ID
	case HostEndpointRemove:
		m.removeHost(u.ID)
	default:
		return false, nil
	}
	return true, nil
}

func (m *Model) removeWorkload(id string) {
	if old, ok := m.workloads[id]; ok {
		delete(m.ifaces, old.Iface)
		delete(m.workloads, id)
	}
}

func (m *Model) removeHost(id string) {
	if old, ok := m.hosts[id]; ok {
		delete(m.hostIf, old.Iface)
		delete(m.hosts, id)
	}
}

// Policy returns the policy id and whether it is known.
func (m *Model) Policy(id string) (Policy, bool) {
	p, ok := m.policies[id]
	return p, ok
}

// Profile returns the profile id and whether it is known.
func (m *Model) Profile(id string) (Profile, bool) {
	p, ok := m.profiles[id]
	return p, ok
}

// Set returns the kind of set id and whether it is known.
func (m *Model) Set(id string) (SetKind, bool) {
	s, ok := m.sets[id]
	if !ok {
		return 0, false
	}
	return s.kind, true
}

// SetMembers returns the members of set id, sorted with Member.Compare.
func (m *Model) SetMembers(id string) []netfilter.Member {
	s, ok := m.sets[id]
	if !ok {
		return nil
	}
	out := slices.Collect(maps.Keys(s.members))
	slices.SortFunc(out, netfilter.Member.Compare)
	return out
}

// HasMember reports whether set id holds mem.
func (m *Model) HasMember(id string, mem netfilter.Member) bool {
	s, ok := m.sets[id]
	if !ok {
		return false
	}
	_, ok = s.members[mem]
	return ok
}

// Workload returns the workload id and whether it is known.
func (m *Model) Workload(id string) (Workload, bool) {
	w, ok := m.workloads[id]
	return w, ok
}

// WorkloadByIface returns the workload on interface name and whether
// there is one.
func (m *Model) WorkloadByIface(name string) (Workload, bool) {
	id, ok := m.ifaces[name]
	if !ok {
		return Workload{}, false
	}
	return m.workloads[id], true
}

// Workloads returns every workload, sorted by interface name.
func (m *Model) Workloads() []Workload {
	out := slices.Collect(maps.Values(m.workloads))
	slices.SortFunc(out, func(a, b Workload) int { return cmp.Compare(a.Iface, b.Iface) })
	return out
}

// HostEndpoint returns the host endpoint id and whether it is known.
func (m *Model) HostEndpoint(id string) (HostEndpoint, bool) {
	h, ok := m.hosts[id]
	return h, ok
}

// HostEndpointByIface returns the host endpoint that covers interface
// name: the one that names it, else the wildcard endpoint, if any.
func (m *Model) HostEndpointByIface(name string) (HostEndpoint, bool) {
	if id, ok := m.hostIf[name]; ok {
		return m.hosts[id], true
	}
	if id, ok := m.hostIf[WildcardIface]; ok {
		return m.hosts[id], true
	}
	return HostEndpoint{}, false
}

// HostEndpoints returns every host endpoint, sorted by interface name (the
// wildcard first).
func (m *Model) HostEndpoints() []HostEndpoint {
	out := slices.Collect(maps.Values(m.hosts))
	slices.SortFunc(out, func(a, b HostEndpoint) int { return cmp.Compare(a.Iface, b.Iface) })
	return out
}

// PolicyIDs returns the IDs of every policy, sorted.
func (m *Model) PolicyIDs() []string { return slices.Sorted(maps.Keys(m.policies)) }

// ProfileIDs returns the IDs of every profile, sorted.
func (m *Model) ProfileIDs() []string { return slices.Sorted(maps.Keys(m.profiles)) }

// SetIDs returns the IDs of every set, sorted.
func (m *Model) SetIDs() []string { return slices.Sorted(maps.Keys(m.sets)) }

func clonePolicy(p Policy) Policy {
	p.Ingress, p.Egress = slices.Clone(p.Ingress), slices.Clone(p.Egress)
	return p
}

func cloneTiers(ts []TierPolicies) []TierPolicies {
	out := slices.Clone(ts)
	for i := range out {
		out[i].Ingress, out[i].Egress = slices.Clone(out[i].Ingress), slices.Clone(out[i].Egress)
	}
	return out
}

func cloneWorkload(w Workload) Workload {
	w.Tiers, w.Profiles = cloneTiers(w.Tiers), slices.Clone(w.Profiles)
	return w
}

func cloneHost(h HostEndpoint) HostEndpoint {
	h.Tiers, h.ForwardTiers = cloneTiers(h.Tiers), cloneTiers(h.ForwardTiers)
	h.PreDNATTiers, h.UntrackedTiers = cloneTiers(h.PreDNATTiers), cloneTiers(h.UntrackedTiers)
	h.Profiles = slices.Clone(h.Profiles)
	return h
}

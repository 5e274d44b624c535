package selector

import (
	"cmp"
	"maps"
	"reflect"
	"slices"

	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
)

// Flush returns the messages of package policy for what changed since the
// last Flush, each object at most once and only when it differs from what
// was sent: sets first (SetUpdate for a set new to the receiver, SetDelta
// for one it has), then ProfileUpdate, PolicyUpdate, WorkloadRemove and
// WorkloadUpdate, then PolicyRemove, ProfileRemove and SetRemove, so a
// receiver never meets a reference before its target, nor loses a target
// before its references (nothing refers to a workload). A workload whose
// interface changed is removed and added again. Within a kind, messages are sorted by ID. It
// returns nil when nothing changed.
func (x *Index) Flush() []any {
	var out []any

	// Sets.
	for _, s := range sortedBy(slices.Collect(maps.Keys(x.dirtySets)), func(s *setState) string { return s.id }) {
		if s.fresh {
			members := slices.SortedFunc(maps.Keys(s.members), netfilter.Member.Compare)
			out = append(out, policy.SetUpdate{ID: s.id, Kind: s.kind, Members: members})
			s.fresh = false
			continue
		}
		var d policy.SetDelta
		for m, was := range s.pending {
			if now := s.members[m] > 0; now != was {
				if now {
					d.Add = append(d.Add, m)
				} else {
					d.Remove = append(d.Remove, m)
				}
			}
		}
		clear(s.pending)
		if len(d.Add)+len(d.Remove) > 0 {
			d.ID = s.id
			slices.SortFunc(d.Add, netfilter.Member.Compare)
			slices.SortFunc(d.Remove, netfilter.Member.Compare)
			out = append(out, d)
		}
	}
	clear(x.dirtySets)
	var setRemoves []any
	for _, id := range slices.Sorted(maps.Keys(x.removedSets)) {
		setRemoves = append(setRemoves, policy.SetRemove{ID: id})
	}
	clear(x.removedSets)

	// Profiles: refcounted by the namespaces that have local endpoints,
	// since namespaces may share one.
	var profRemoves []any
	touched, want := map[string]struct{}{}, map[string]policy.Profile{}
	for _, ns := range slices.Sorted(maps.Keys(x.dirtyProfiles)) {
		var p policy.Profile
		if x.nsLocal[ns] > 0 {
			p = x.profileOf(ns)
		}
		if oldID := x.nsProfile[ns]; oldID != p.ID {
			if oldID != "" {
				touched[oldID] = struct{}{}
				if x.profileUsers[oldID]--; x.profileUsers[oldID] == 0 {
					delete(x.profileUsers, oldID)
				}
				delete(x.nsProfile, ns)
			}
			if p.ID != "" {
				x.profileUsers[p.ID]++
				x.nsProfile[ns] = p.ID
			}
		}
		if p.ID != "" {
			want[p.ID] = p
		}
	}
	clear(x.dirtyProfiles)
	for id, p := range want {
		if sent, ok := x.sentProfiles[id]; !ok || !reflect.DeepEqual(sent, p) {
			touched[id] = struct{}{}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(touched)) {
		sent, wasSent := x.sentProfiles[id]
		if x.profileUsers[id] == 0 {
			if wasSent {
				delete(x.sentProfiles, id)
				profRemoves = append(profRemoves, policy.ProfileRemove{ID: id})
			}
		} else if p, ok := want[id]; ok && (!wasSent || !reflect.DeepEqual(sent, p)) {
			x.sentProfiles[id] = p
			out = append(out, policy.ProfileUpdate{Profile: p})
		}
	}

	// Policies.
	var polRemoves []any
	for _, id := range slices.Sorted(maps.Keys(x.dirtyPolicies)) {
		sent, wasSent := x.sentPolicies[id]
		if p := x.policies[id]; p != nil {
			if !wasSent || !reflect.DeepEqual(sent, p.out) {
				x.sentPolicies[id] = p.out
				out = append(out, policy.PolicyUpdate{Policy: p.out})
			}
		} else if wasSent {
			delete(x.sentPolicies, id)
			polRemoves = append(polRemoves, policy.PolicyRemove{ID: id})
		}
	}
	clear(x.dirtyPolicies)

	// Workloads: nothing refers to one, so removes go first; one whose
	// interface changed is removed and sent again, so that no update
	// meets an interface the receiver still gives to another workload.
	var updates []any
	for _, id := range slices.Sorted(maps.Keys(x.dirtyWls)) {
		sent, wasSent := x.sentWls[id]
		if ep := x.endpoints[id]; ep != nil && ep.Local {
			w := x.workload(ep)
			if wasSent && reflect.DeepEqual(sent, w) {
				continue
			}
			if wasSent && sent.Iface != w.Iface {
				out = append(out, policy.WorkloadRemove{ID: id})
			}
			x.sentWls[id] = w
			updates = append(updates, policy.WorkloadUpdate{Endpoint: w})
		} else if wasSent {
			delete(x.sentWls, id)
			out = append(out, policy.WorkloadRemove{ID: id})
		}
	}
	clear(x.dirtyWls)

	out = append(out, updates...)
	out = append(out, polRemoves...)
	out = append(out, profRemoves...)
	return append(out, setRemoves...)
}

// workload returns the workload of a local endpoint: the tiers of the
// policies that apply to it, in order, and its namespace's profile.
func (x *Index) workload(ep *endpoint) policy.Workload {
	byTier := map[string][]*pol{}
	for n := range ep.nodes {
		for p := range n.applies {
			byTier[p.Tier] = append(byTier[p.Tier], p)
		}
	}
	names := slices.SortedFunc(maps.Keys(byTier), func(a, b string) int {
		if c := cmp.Compare(x.tiers[a].order, x.tiers[b].order); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	w := policy.Workload{ID: ep.ID, Iface: ep.Iface}
	for _, name := range names {
		ps := byTier[name]
		slices.SortFunc(ps, func(a, b *pol) int {
			if c := cmp.Compare(a.Order, b.Order); c != 0 {
				return c
			}
			return cmp.Compare(a.ID, b.ID)
		})
		t := policy.TierPolicies{Name: name, EndOfTier: policy.Deny}
		if tt, ok := x.tiers[name]; ok {
			t.EndOfTier = tt.end
		}
		for _, p := range ps {
			if !p.NoIngress {
				t.Ingress = append(t.Ingress, p.ID)
			}
			if !p.NoEgress {
				t.Egress = append(t.Egress, p.ID)
			}
		}
		w.Tiers = append(w.Tiers, t)
	}
	if p := x.profileOf(ep.Namespace); p.ID != "" {
		w.Profiles = []string{p.ID}
	}
	return w
}

func sortedBy[T any](s []T, key func(T) string) []T {
	slices.SortFunc(s, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	return s
}

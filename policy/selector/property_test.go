package selector_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
	"github.com/nodeplane/nodeplane/policy/selector"
)

// inputs are the current inputs of an Index, to build a fresh one from.
type inputs struct {
	namespaces map[string]map[string]string
	endpoints  map[string]selector.Endpoint
	tiers      map[string]tierIn
	policies   map[string]selector.Policy
}

type tierIn struct {
	order int
	end   policy.Action
}

type gen struct{ r *rand.Rand }

func (g gen) pick(s ...string) string { return s[g.r.IntN(len(s))] }

func (g gen) labels(keys ...string) map[string]string {
	l := map[string]string{}
	for _, k := range keys {
		if g.r.IntN(3) > 0 {
			l[k] = g.pick("x", "y", "z")
		}
	}
	return l
}

func (g gen) requirement(keys ...string) selector.Requirement {
	k := g.pick(keys...)
	switch op := selector.Op(1 + g.r.IntN(6)); op {
	case selector.Equals, selector.NotEquals:
		return req(k, op, g.pick("x", "y", "z"))
	case selector.In, selector.NotIn:
		return req(k, op, g.pick("x", "y"), g.pick("y", "z"))
	default:
		return req(k, op)
	}
}

func (g gen) selector() selector.Selector {
	var s selector.Selector
	for range g.r.IntN(3) {
		s.Endpoint = append(s.Endpoint, g.requirement("app", "role"))
	}
	if g.r.IntN(3) == 0 {
		s.Namespace = []selector.Requirement{g.requirement("env")}
	}
	return s
}

func (g gen) portName() selector.PortName {
	if g.r.IntN(2) == 0 {
		return selector.PortName{Protocol: netfilter.ProtoTCP, Name: "http"}
	}
	return selector.PortName{Protocol: netfilter.ProtoUDP, Name: "dns"}
}

func (g gen) peer() selector.Peer {
	var p selector.Peer
	if g.r.IntN(2) == 0 {
		s := g.selector()
		p.Selector = &s
	}
	if g.r.IntN(4) == 0 {
		s := g.selector()
		p.NotSelector = &s
	}
	if g.r.IntN(3) == 0 {
		p.NamedPorts = []selector.PortName{g.portName()}
	}
	if g.r.IntN(5) == 0 {
		p.NotNamedPorts = []selector.PortName{g.portName()}
	}
	return p
}

func (g gen) policy(id string) selector.Policy {
	p := selector.Policy{ID: id, Tier: g.pick("t0", "t1", "t2"), Order: float64(g.r.IntN(3)), AppliesTo: g.selector(),
		NoIngress: g.r.IntN(4) == 0, NoEgress: g.r.IntN(4) == 0}
	for range g.r.IntN(3) {
		p.Ingress = append(p.Ingress, selector.Rule{Action: policy.Allow, Src: g.peer()})
	}
	for range g.r.IntN(2) {
		p.Egress = append(p.Egress, selector.Rule{Action: policy.Deny, Dst: g.peer()})
	}
	return p
}

func (g gen) endpoint(id string) selector.Endpoint {
	e := selector.Endpoint{ID: id, Namespace: g.pick("n0", "n1", "n2"), Labels: g.labels("app", "role"),
		Local: g.r.IntN(2) == 0}
	if e.Local {
		e.Iface = g.pick("if0", "if1", "if2", "if3", "if4", "if5") // shared: SetEndpoint may refuse it
	}
	for range g.r.IntN(3) {
		if g.r.IntN(3) == 0 {
			e.Addrs = append(e.Addrs, netip.AddrFrom16([16]byte{0: 0xfd, 15: byte(1 + g.r.IntN(4))}))
		} else {
			e.Addrs = append(e.Addrs, netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + g.r.IntN(6))}))
		}
	}
	if g.r.IntN(2) == 0 {
		e.NamedPorts = append(e.NamedPorts, selector.NamedPort{Name: "http", Protocol: netfilter.ProtoTCP, Port: uint16(80 + g.r.IntN(2))})
	}
	if g.r.IntN(3) == 0 {
		e.NamedPorts = append(e.NamedPorts, selector.NamedPort{Name: "dns", Protocol: netfilter.ProtoUDP, Port: 53})
	}
	return e
}

// step makes one random change to x and records it in in.
func (g gen) step(t *testing.T, x *selector.Index, in *inputs) {
	switch g.r.IntN(10) {
	case 0:
		name := g.pick("n0", "n1", "n2")
		l := g.labels("env")
		require.NoError(t, x.SetNamespace(name, l))
		in.namespaces[name] = l
	case 1:
		name := g.pick("n0", "n1", "n2")
		x.RemoveNamespace(name)
		delete(in.namespaces, name)
	case 2, 3, 4:
		e := g.endpoint(fmt.Sprintf("e%d", g.r.IntN(12)))
		taken := false
		for _, o := range in.endpoints {
			taken = taken || e.Local && o.Local && o.Iface == e.Iface && o.ID != e.ID
		}
		err := x.SetEndpoint(e)
		if taken {
			require.ErrorIs(t, err, selector.ErrInvalidEndpoint, "interface %s is taken", e.Iface)
			return
		}
		require.NoError(t, err)
		in.endpoints[e.ID] = e
	case 5:
		id := fmt.Sprintf("e%d", g.r.IntN(12))
		x.RemoveEndpoint(id)
		delete(in.endpoints, id)
	case 6:
		name := g.pick("t0", "t1", "t2")
		if g.r.IntN(4) == 0 {
			x.RemoveTier(name)
			delete(in.tiers, name)
			return
		}
		ti := tierIn{order: g.r.IntN(3), end: policy.Deny}
		if g.r.IntN(2) == 0 {
			ti.end = policy.Pass
		}
		require.NoError(t, x.SetTier(name, ti.order, ti.end))
		in.tiers[name] = ti
	case 7, 8:
		p := g.policy(fmt.Sprintf("p%d", g.r.IntN(6)))
		require.NoError(t, x.SetPolicy(p))
		in.policies[p.ID] = p
	case 9:
		id := fmt.Sprintf("p%d", g.r.IntN(6))
		x.RemovePolicy(id)
		delete(in.policies, id)
	}
}

// build returns a fresh Index from in.
func build(t *testing.T, in *inputs) *selector.Index {
	x := selector.New(selector.Options{})
	for name, l := range in.namespaces {
		require.NoError(t, x.SetNamespace(name, l))
	}
	for name, ti := range in.tiers {
		require.NoError(t, x.SetTier(name, ti.order, ti.end))
	}
	for _, p := range in.policies {
		require.NoError(t, x.SetPolicy(p))
	}
	for _, e := range in.endpoints {
		require.NoError(t, x.SetEndpoint(e))
	}
	return x
}

// state is everything a Model holds that the Index sends.
type state struct {
	Sets      map[string][]netfilter.Member
	Kinds     map[string]policy.SetKind
	Policies  map[string]policy.Policy
	Profiles  map[string]policy.Profile
	Workloads []policy.Workload
}

func stateOf(m *policy.Model) state {
	s := state{Sets: map[string][]netfilter.Member{}, Kinds: map[string]policy.SetKind{},
		Policies: map[string]policy.Policy{}, Profiles: map[string]policy.Profile{}, Workloads: m.Workloads()}
	for _, id := range m.SetIDs() {
		s.Sets[id] = m.SetMembers(id)
		s.Kinds[id], _ = m.Set(id)
	}
	for _, id := range m.PolicyIDs() {
		s.Policies[id], _ = m.Policy(id)
	}
	for _, id := range m.ProfileIDs() {
		s.Profiles[id], _ = m.Profile(id)
	}
	return s
}

// oracle checks every address set and named-port set of m against the
// selectors and endpoints of in, matched by brute force.
func oracle(t *testing.T, m *policy.Model, in *inputs) {
	for _, p := range in.policies {
		for _, r := range append(append([]selector.Rule{}, p.Ingress...), p.Egress...) {
			for _, peer := range []selector.Peer{r.Src, r.Dst} {
				portSel := selector.Selector{}
				if peer.Selector != nil {
					portSel = *peer.Selector
				}
				for _, pn := range append(append([]selector.PortName{}, peer.NamedPorts...), peer.NotNamedPorts...) {
					want := map[netfilter.Member]bool{}
					for _, e := range in.endpoints {
						if !portSel.Matches(e.Labels, in.namespaces[e.Namespace]) {
							continue
						}
						for _, np := range e.NamedPorts {
							if np.Name == pn.Name && np.Protocol == pn.Protocol {
								for _, a := range e.Addrs {
									want[netfilter.IPPortMember(a, np.Protocol, np.Port)] = true
								}
							}
						}
					}
					got := m.SetMembers(selector.NamedPortSetID(portSel, pn))
					require.Len(t, got, len(want), "named port %v of %s", pn, portSel)
					for _, mem := range got {
						require.True(t, want[mem], "%v in named port %v of %s", mem, pn, portSel)
					}
				}
				for _, s := range []*selector.Selector{peer.Selector, peer.NotSelector} {
					if s == nil {
						continue
					}
					want := map[netfilter.Member]bool{}
					for _, e := range in.endpoints {
						if s.Matches(e.Labels, in.namespaces[e.Namespace]) {
							for _, a := range e.Addrs {
								want[ip(a.String())] = true
							}
						}
					}
					got := m.SetMembers(selector.SetID(*s))
					require.Len(t, got, len(want), "set of %s", s)
					for _, mem := range got {
						require.True(t, want[mem], "%v in set of %s", mem, s)
					}
				}
			}
		}
	}
}

func TestIndexIncrementalMatchesFresh(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := gen{rand.New(rand.NewPCG(seed, 22))}
			x := selector.New(selector.Options{})
			m := policy.NewModel()
			in := &inputs{namespaces: map[string]map[string]string{}, endpoints: map[string]selector.Endpoint{},
				tiers: map[string]tierIn{}, policies: map[string]selector.Policy{}}
			for range 150 {
				for range 1 + g.r.IntN(4) {
					g.step(t, x, in)
				}
				feed(t, m, x.Flush())
				require.Nil(t, x.Flush(), "a second Flush sends nothing")
				oracle(t, m, in)
				fresh := policy.NewModel()
				feed(t, fresh, build(t, in).Flush())
				require.Equal(t, stateOf(fresh), stateOf(m))
			}
		})
	}
}

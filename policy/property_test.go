package policy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/markbits"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
)

// propNode is a Manager with its filter Table and ip sets on kernelfake.
type propNode struct {
	ns     *kernelfake.Namespace
	m      *policy.Manager
	filter *iptables.Table
	raw    *iptables.Table
	mangle *iptables.Table
	sets   *ipsets.IPSets
}

func newPropNode(t *testing.T) *propNode {
	ns := kernelfake.New(kernelfake.Options{})
	table := func(name string) *iptables.Table {
		tbl, err := iptables.New(iptables.Options{Table: name, Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-", Kernel: ns})
		require.NoError(t, err)
		return tbl
	}
	filter, raw, mangle := table("filter"), table("raw"), table("mangle")
	sets, err := ipsets.New(ipsets.Options{Family: ipfamily.IPv4, Prefix: "np4-", Kernel: ns})
	require.NoError(t, err)
	layout, err := markbits.NewLayout(markbits.LayoutOptions{})
	require.NoError(t, err)
	m, err := policy.New(policy.Options{Family: ipfamily.IPv4, Filter: filter, Raw: raw, Mangle: mangle, Sets: sets, Marks: layout,
		ChainPrefix: "np-", WorkloadPrefixes: []string{"npv"}})
	require.NoError(t, err)
	return &propNode{ns: ns, m: m, filter: filter, raw: raw, mangle: mangle, sets: sets}
}

// send feeds msgs and applies; an error of the Manager (a refused
// message) is returned, the drivers' fail the test.
func (n *propNode) send(t *testing.T, msgs ...any) error {
	t.Helper()
	for _, msg := range msgs {
		n.m.OnUpdate(msg)
	}
	ctx := context.Background()
	refused := n.m.CompleteDeferredWork(ctx)
	_, err := n.sets.Apply(ctx)
	require.NoError(t, err)
	for _, tbl := range []*iptables.Table{n.raw, n.mangle, n.filter} {
		_, err = tbl.Apply(ctx)
		require.NoError(t, err)
	}
	for {
		// One set is destroyed per call, as the loop paces them.
		res, err := n.sets.ApplyDeletions(ctx)
		require.NoError(t, err)
		if res.RetryAfter == 0 {
			return refused
		}
	}
}

// dump is the filter, raw and mangle tables and the sets as the kernel
// holds them.
func (n *propNode) dump() string {
	var b strings.Builder
	for _, table := range []string{"filter", "raw", "mangle"} {
		for _, c := range n.ns.IPTables().Chains(iptablesfake.BackendNFT, ipfamily.IPv4, table) {
			fmt.Fprintf(&b, "%s %s\n", table, c)
			for _, r := range n.ns.IPTables().Rules(iptablesfake.BackendNFT, ipfamily.IPv4, table, c) {
				fmt.Fprintf(&b, "  %s\n", r)
			}
		}
	}
	for _, s := range slices.Sorted(slices.Values(n.ns.IPSets().Names())) {
		members, _ := n.ns.IPSets().Members(s)
		fmt.Fprintf(&b, "set %s %v\n", s, members)
	}
	return b.String()
}

// TestIncrementalEqualsFromScratch drives a Manager (with Raw and Mangle)
// with random updates and removals of policies, profiles, sets,
// workloads and host endpoints (all four kinds of tiers, the wildcard, a
// move) and set deltas, applying after every batch, and checks after each
// that the kernel holds exactly what a fresh Manager given only the
// resulting state writes: the dirty tracking forgets nothing and leaves
// nothing behind.
func TestIncrementalEqualsFromScratch(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		inc := newPropNode(t)
		addr := func() netip.Addr { return netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(3)), byte(1 + rng.IntN(20))}) }
		member := func() netfilter.Member { return netfilter.IPMember(addr()) }
		rule := func() policy.Rule {
			r := policy.Rule{Action: []policy.Action{policy.Allow, policy.Deny, policy.Pass, policy.Log}[rng.IntN(4)]}
			switch rng.IntN(5) {
			case 0:
				r.Src.Nets = []netip.Prefix{netip.PrefixFrom(addr(), 32)}
			case 1:
				r.Src.Sets = []string{fmt.Sprintf("s%d", rng.IntN(3))}
			case 2:
				r.Protocol = netfilter.ProtoTCP
				r.Dst.Ports = []netfilter.PortRange{netfilter.Port(uint16(80 + rng.IntN(3)))}
			case 3:
				r.Src.NotSets = []string{fmt.Sprintf("s%d", rng.IntN(3))}
				r.Src.Nets = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}
			}
			return r
		}
		ids := func(prefix string, n int) []string {
			var out []string
			for i := range rng.IntN(n + 1) {
				out = append(out, fmt.Sprintf("%s%d", prefix, (i+rng.IntN(4))%4))
			}
			return out
		}
		for round := range 12 {
			var msgs []any
			for range 1 + rng.IntN(5) {
				switch rng.IntN(11) {
				case 0, 1:
					msgs = append(msgs, policy.PolicyUpdate{Policy: policy.Policy{ID: fmt.Sprintf("p%d", rng.IntN(4)),
						Ingress: []policy.Rule{rule(), rule()}, Egress: []policy.Rule{rule()}}})
				case 2:
					msgs = append(msgs, policy.PolicyRemove{ID: fmt.Sprintf("p%d", rng.IntN(4))})
				case 3:
					msgs = append(msgs, policy.ProfileUpdate{Profile: policy.Profile{ID: fmt.Sprintf("pr%d", rng.IntN(2)),
						Ingress: []policy.Rule{rule()}, Egress: []policy.Rule{{Action: policy.Allow}}}})
				case 4:
					msgs = append(msgs, policy.SetUpdate{ID: fmt.Sprintf("s%d", rng.IntN(3)), Kind: policy.SetNets,
						Members: []netfilter.Member{member(), member()}})
				case 5:
					msgs = append(msgs, policy.SetDelta{ID: fmt.Sprintf("s%d", rng.IntN(3)),
						Add: []netfilter.Member{member()}, Remove: []netfilter.Member{member()}})
				case 6:
					msgs = append(msgs, policy.SetRemove{ID: fmt.Sprintf("s%d", rng.IntN(3))})
				case 7:
					w := rng.IntN(5)
					msgs = append(msgs, policy.WorkloadUpdate{Endpoint: policy.Workload{ID: fmt.Sprintf("w%d", w), Iface: fmt.Sprintf("npv%d", w),
						Tiers:    []policy.TierPolicies{{Name: "t", Ingress: ids("p", 2), Egress: ids("p", 1)}},
						Profiles: ids("pr", 1), AdminDown: rng.IntN(8) == 0}})
				case 8:
					msgs = append(msgs, policy.WorkloadRemove{ID: fmt.Sprintf("w%d", rng.IntN(5))})
				case 9:
					h := rng.IntN(3)
					iface := []string{"eth0", "eth1", policy.WildcardIface}[h]
					if h == 0 && rng.IntN(2) == 0 {
						iface = "eth2" // the endpoint moves
					}
					tiers := func(egress bool) []policy.TierPolicies {
						if rng.IntN(3) == 0 {
							return nil
						}
						t := policy.TierPolicies{Name: "h", Ingress: ids("p", 2)}
						if egress {
							t.Egress = ids("p", 1)
						}
						return []policy.TierPolicies{t}
					}
					msgs = append(msgs, policy.HostEndpointUpdate{Endpoint: policy.HostEndpoint{ID: fmt.Sprintf("h%d", h), Iface: iface,
						Tiers: tiers(true), ForwardTiers: tiers(true), PreDNATTiers: tiers(false), UntrackedTiers: tiers(true),
						Profiles: ids("pr", 1)}})
				case 10:
					msgs = append(msgs, policy.HostEndpointRemove{ID: fmt.Sprintf("h%d", rng.IntN(3))})
				}
			}
			if err := inc.send(t, msgs...); err != nil {
				// Only a delta of a set not given is refused here.
				require.ErrorIs(t, err, policy.ErrInvalidSet)
			}

			// The same state, from scratch.
			fresh := newPropNode(t)
			model := inc.m.Model()
			var all []any
			for _, id := range model.SetIDs() {
				kind, _ := model.Set(id)
				all = append(all, policy.SetUpdate{ID: id, Kind: kind, Members: model.SetMembers(id)})
			}
			for _, id := range model.PolicyIDs() {
				p, _ := model.Policy(id)
				all = append(all, policy.PolicyUpdate{Policy: p})
			}
			for _, id := range model.ProfileIDs() {
				p, _ := model.Profile(id)
				all = append(all, policy.ProfileUpdate{Profile: p})
			}
			for _, w := range model.Workloads() {
				all = append(all, policy.WorkloadUpdate{Endpoint: w})
			}
			for _, h := range model.HostEndpoints() {
				all = append(all, policy.HostEndpointUpdate{Endpoint: h})
			}
			require.NoError(t, fresh.send(t, all...))
			if got, want := inc.dump(), fresh.dump(); got != want {
				t.Fatalf("seed %d round %d: after %+v\nincremental:\n%s\nfrom scratch:\n%s", seed, round, msgs, got, want)
			}
		}
	}
}

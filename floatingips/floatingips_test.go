package floatingips_test

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/floatingips"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

type rig struct {
	t   *testing.T
	ns  *kernelfake.Namespace
	f   ipfamily.Family
	nat *iptables.Table
	m   *floatingips.Manager
}

func newRig(t *testing.T, f ipfamily.Family, mutate func(*floatingips.Options)) *rig {
	t.Helper()
	ns := kernelfake.New(kernelfake.Options{})
	nat := managertest.FakeTable(t, ns, "nat", f, "npf-")
	m := managertest.NewManager(t, floatingips.New, floatingips.Options{Family: f, Table: nat, DNATChain: "npf-dnat", SNATChain: "npf-snat"}, mutate)
	return &rig{t: t, ns: ns, f: f, nat: nat, m: m}
}

func (r *rig) pass(msgs ...any) error { return managertest.UpdatePass(r.m, msgs, r.nat) }

func (r *rig) rules(chain string) []string {
	var out []string
	for _, l := range r.ns.IPTables().Rules(iptablesfake.BackendNFT, r.f, "nat", chain) {
		out = append(out, hashComment.ReplaceAllString(l, ""))
	}
	return out
}

var hashComment = regexp.MustCompile(`-m comment --comment "npf:[A-Za-z0-9_-]{16}" `)

func nat(floating, internal string) cluster.NAT {
	return cluster.NAT{Floating: netip.MustParseAddr(floating), Internal: netip.MustParseAddr(internal)}
}

// endpoint is endpoint id on veth0 with the floating IPs nats, and their
// internal addresses as its addresses.
func endpoint(id string, nats ...cluster.NAT) cluster.Endpoint {
	e := cluster.Endpoint{ID: id, Iface: "veth0", FloatingIPs: nats}
	for _, n := range nats {
		e.Addrs = append(e.Addrs, netip.PrefixFrom(n.Internal, n.Internal.BitLen()))
	}
	return e
}

func TestChainsAndJumps(t *testing.T) {
	r := newRig(t, ipfamily.IPv4, nil)
	require.NoError(t, r.pass(
		endpoint("ns/web", nat("198.51.100.10", "10.244.1.5"), nat("2001:db8:f::10", "fd00:10:244:1::5")),
	))
	assert.Equal(t, []string{
		`-d 198.51.100.10/32 -m comment --comment "floating IP of ns/web" -j DNAT --to-destination 10.244.1.5`,
	}, r.rules("npf-dnat"))
	assert.Equal(t, []string{
		`-s 10.244.1.5/32 -d 10.244.1.5/32 -m comment --comment "floating IP of ns/web" -j SNAT --to-source 198.51.100.10`,
	}, r.rules("npf-snat"))
	for hook, chain := range map[string]string{"PREROUTING": "npf-dnat", "OUTPUT": "npf-dnat", "POSTROUTING": "npf-snat"} {
		assert.Equal(t, []string{"-j " + chain}, r.rules(hook), hook)
	}
	// Nothing changed: nothing run.
	calls := len(r.ns.IPTables().Calls())
	require.NoError(t, r.pass(endpoint("ns/web", nat("2001:db8:f::10", "fd00:10:244:1::5"), nat("198.51.100.10", "10.244.1.5"))))
	assert.Len(t, r.ns.IPTables().Calls(), calls)

	// Removed: empty chains, jumps stay.
	require.NoError(t, r.pass(cluster.EndpointRemove{ID: "ns/web"}))
	assert.Empty(t, r.rules("npf-dnat"))
	assert.Empty(t, r.rules("npf-snat"))
	assert.Len(t, r.rules("PREROUTING"), 1)
}

func TestOutboundSNATIPv6(t *testing.T) {
	r := newRig(t, ipfamily.IPv6, func(o *floatingips.Options) {
		o.OutboundSNAT, o.NoSNATSet, o.Jump = true, "np6-all-pools", netfilter.JumpAppend
	})
	require.NoError(t, r.ns.IPSets().Exec("create", "np6-all-pools", "hash:net", "family", "inet6"))
	require.NoError(t, r.pass(endpoint("a", nat("2001:db8:f::10", "fd00:10:244:1::5"))))
	assert.Equal(t, []string{
		`-s fd00:10:244:1::5/128 -d fd00:10:244:1::5/128 -m comment --comment "floating IP of a" -j SNAT --to-source 2001:db8:f::10`,
		`-s fd00:10:244:1::5/128 -m set ! --match-set np6-all-pools dst -m comment --comment "floating IP of a" -j SNAT --to-source 2001:db8:f::10`,
	}, r.rules("npf-snat"))
	assert.Equal(t, []string{
		`-d 2001:db8:f::10/128 -m comment --comment "floating IP of a" -j DNAT --to-destination fd00:10:244:1::5`,
	}, r.rules("npf-dnat"))
	assert.Equal(t, "floatingips-v6", r.m.Name())
}

func TestConflicts(t *testing.T) {
	r := newRig(t, ipfamily.IPv4, nil)
	err := r.pass(
		endpoint("b", nat("198.51.100.10", "10.244.1.6"), nat("198.51.100.11", "10.244.1.5")),
		endpoint("a", nat("198.51.100.10", "10.244.1.5")),
	)
	require.ErrorIs(t, err, floatingips.ErrConflict)
	assert.Contains(t, err.Error(), `floating IP 198.51.100.10 of endpoint "b" is endpoint "a"'s`)
	assert.Contains(t, err.Error(), `internal address 10.244.1.5 of endpoint "b" already has a floating IP (endpoint "a")`)
	nats, conflicts := r.m.NATs()
	assert.Equal(t, []floatingips.EndpointNAT{{ID: "a", NAT: nat("198.51.100.10", "10.244.1.5")}}, nats)
	assert.Len(t, conflicts, 2)
	assert.Len(t, r.rules("npf-dnat"), 1)

	// The first claimant goes: b takes the floating IP.
	require.NoError(t, r.pass(cluster.EndpointRemove{ID: "a"}))
	dnat := r.rules("npf-dnat")
	require.Len(t, dnat, 2)
	assert.Contains(t, dnat[0], "-d 198.51.100.10/32")
	assert.Contains(t, dnat[0], "--to-destination 10.244.1.6")
}

// A floating IP that is an endpoint's own address (a pod's, even one
// without floating IPs of its own) is never in force: its DNAT would take
// that pod's connections, its SNAT lend its address to another. It comes
// into force once no endpoint holds the address.
func TestFloatingIPThatIsAnEndpointsAddress(t *testing.T) {
	for _, f := range ipfamily.All {
		t.Run(f.String(), func(t *testing.T) {
			r := newRig(t, f, nil)
			pod, taker, other := "10.244.1.6", "10.244.1.13", "10.244.1.20"
			if f == ipfamily.IPv6 {
				pod, taker, other = "fd00:10:244:1::6", "fd00:10:244:1::13", "fd00:10:244:1::20"
			}
			b := cluster.Endpoint{ID: "ns/b", Iface: "veth-b", Addrs: []netip.Prefix{netip.MustParsePrefix(pod + "/" + fmt.Sprint(netip.MustParseAddr(pod).BitLen()))}}
			err := r.pass(b, endpoint("ns/i", nat(pod, taker)))
			require.ErrorIs(t, err, floatingips.ErrConflict)
			assert.Contains(t, err.Error(), fmt.Sprintf(`floating IP %s of endpoint "ns/i" is an address of endpoint "ns/b"`, pod))
			assert.Empty(t, r.rules("npf-dnat"))
			assert.Empty(t, r.rules("npf-snat"))

			// One of the endpoint's own other addresses is no floating IP either.
			self := endpoint("ns/i", nat(other, taker))
			self.Addrs = append(self.Addrs, netip.PrefixFrom(netip.MustParseAddr(other), netip.MustParseAddr(other).BitLen()))
			require.ErrorIs(t, r.pass(self), floatingips.ErrConflict)
			assert.Empty(t, r.rules("npf-dnat"))

			// ns/b goes: its address is free to be ns/i's floating IP.
			require.NoError(t, r.pass(endpoint("ns/i", nat(pod, taker)), cluster.EndpointRemove{ID: "ns/b"}))
			assert.Len(t, r.rules("npf-dnat"), 1)
		})
	}
}

func TestInvalidMessagesChangeNothing(t *testing.T) {
	r := newRig(t, ipfamily.IPv4, nil)
	require.NoError(t, r.pass(endpoint("a", nat("198.51.100.10", "10.244.1.5"))))
	for _, msg := range []any{
		cluster.Endpoint{Iface: "veth0", FloatingIPs: []cluster.NAT{nat("198.51.100.10", "10.244.1.5")}},
		cluster.Endpoint{ID: "a", FloatingIPs: []cluster.NAT{nat("198.51.100.11", "10.244.1.6")}}, // no interface
		cluster.Endpoint{ID: "a", Iface: "veth0", FloatingIPs: []cluster.NAT{nat("198.51.100.10", "fd00::5")}},
		cluster.Endpoint{ID: "a", Iface: "veth0", FloatingIPs: []cluster.NAT{nat("198.51.100.10", "198.51.100.10")}},
		cluster.Endpoint{ID: "a", Iface: "veth0", FloatingIPs: []cluster.NAT{{Floating: netip.MustParseAddr("198.51.100.10")}}},
		cluster.Endpoint{ID: "a", Iface: "veth0", FloatingIPs: []cluster.NAT{nat("0.0.0.0", "10.244.1.5")}},
		cluster.Endpoint{ID: "a", Iface: "veth0", Addrs: []netip.Prefix{netip.MustParsePrefix("10.244.1.5/32")},
			FloatingIPs: []cluster.NAT{nat("198.51.100.10", "10.244.1.6")}}, // not its address
		cluster.EndpointRemove{},
	} {
		r.m.OnUpdate(msg)
		err := r.m.CompleteDeferredWork(context.Background())
		require.ErrorIs(t, err, floatingips.ErrInvalidEndpoint, "%+v", msg)
		require.ErrorIs(t, err, cluster.ErrInvalid, "%+v", msg)
		assert.Equal(t, 1, strings.Count(err.Error(), "floatingips: "), err.Error())
		assert.Equal(t, 0, strings.Count(err.Error(), "cluster: "), err.Error())
		require.NoError(t, r.m.CompleteDeferredWork(context.Background()))
		require.NoError(t, r.pass())
		assert.Len(t, r.rules("npf-dnat"), 1)
	}
}

func TestOptions(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	nat := managertest.FakeTable(t, ns, "nat", ipfamily.IPv4, "npf-")
	good := floatingips.Options{Family: ipfamily.IPv4, Table: nat, DNATChain: "npf-dnat", SNATChain: "npf-snat"}
	var nilTable *iptables.Table
	for name, mutate := range map[string]func(*floatingips.Options){
		"no family":      func(o *floatingips.Options) { o.Family = 0 },
		"no table":       func(o *floatingips.Options) { o.Table = nil },
		"nil table":      func(o *floatingips.Options) { o.Table = nilTable },
		"same chains":    func(o *floatingips.Options) { o.SNATChain = o.DNATChain },
		"no dnat chain":  func(o *floatingips.Options) { o.DNATChain = "" },
		"bad snat chain": func(o *floatingips.Options) { o.SNATChain = "!x" },
		// What the Table says of itself (netfilter.TableInfo): refused
		// here, not at every pass.
		"chain not the table's":   func(o *floatingips.Options) { o.SNATChain = "FORWARD" },
		"table of another family": func(o *floatingips.Options) { o.Family = ipfamily.IPv6 },
		"bad jump":                func(o *floatingips.Options) { o.Jump = 5 },
		"set without snat":        func(o *floatingips.Options) { o.NoSNATSet = "np4-x" },
		"bad set":                 func(o *floatingips.Options) { o.OutboundSNAT, o.NoSNATSet = true, "a\"b" },
	} {
		o := good
		mutate(&o)
		_, err := floatingips.New(o)
		require.ErrorIs(t, err, floatingips.ErrInvalidOptions, name)
		assert.Equal(t, 1, strings.Count(err.Error(), "floatingips: "), err.Error())
		assert.NotContains(t, err.Error(), "netfilter: ")
	}
	// A placement past netfilter.JumpNone is refused with the rule model's
	// sentinel.
	bad := good
	bad.Jump = netfilter.JumpNone + 1
	_, err := floatingips.New(bad)
	require.ErrorIs(t, err, netfilter.ErrUnknownJumpPlacement)
	require.EqualError(t, err, "floatingips: invalid options: Jump: unknown jump placement 3")
}

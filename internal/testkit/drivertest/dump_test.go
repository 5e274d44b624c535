package drivertest_test

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

func TestFormatRoute(t *testing.T) {
	names := map[int]string{2: "eth0", 3: "eth1"}
	for _, c := range []struct {
		r    kernel.Route
		want string
	}{
		{kernel.Route{Table: 254, Dst: netip.MustParsePrefix("10.0.0.0/24"), Type: kernel.RTNUnicast, OIF: 2, Protocol: 2, Scope: kernel.ScopeLink, PrefSrc: netip.MustParseAddr("10.0.0.1")},
			"table 254 10.0.0.0/24 metric 0 unicast dev eth0 src 10.0.0.1 proto 2 scope 253"},
		{kernel.Route{Table: 100, Dst: netip.MustParsePrefix("fd00::/64"), Priority: 1024, Type: kernel.RTNBlackhole, OIF: 1, Protocol: 78},
			"table 100 fd00::/64 metric 1024 blackhole proto 78 scope 0"},
		{kernel.Route{Table: 100, Dst: netip.MustParsePrefix("10.1.0.0/16"), Type: kernel.RTNUnicast, TOS: 0x10, MTU: 1400, Flags: kernel.FlagOnlink | kernel.FlagLinkdown,
			Gateway: netip.MustParseAddr("192.168.0.1"), OIF: 9},
			"table 100 10.1.0.0/16 metric 0 unicast tos 0x10 via 192.168.0.1 dev if9 mtu 1400 onlink linkdown proto 0 scope 0"},
		{kernel.Route{Table: 100, Dst: netip.MustParsePrefix("10.2.0.0/16"), Type: kernel.RTNUnicast, NextHops: []kernel.NextHop{
			{OIF: 3, Gateway: netip.MustParseAddr("10.0.1.2"), Weight: 2, Flags: kernel.FlagDead}, {OIF: 2, Gateway: netip.MustParseAddr("10.0.0.2")}}},
			"table 100 10.2.0.0/16 metric 0 unicast nexthop via 10.0.0.2 dev eth0 weight 1 nexthop via 10.0.1.2 dev eth1 weight 3 dead proto 0 scope 0"},
	} {
		assert.Equal(t, c.want, drivertest.FormatRoute(&c.r, names))
	}
}

func TestFormatRule(t *testing.T) {
	assert.Equal(t, "100: not from 10.0.0.0/8 to fd00::/64 fwmark 0x10/0xff iif lo oif eth0 lookup 200 proto 0",
		drivertest.FormatRule(kernel.Rule{Priority: 100, Invert: true, Src: netip.MustParsePrefix("10.0.0.0/8"), Dst: netip.MustParsePrefix("fd00::/64"),
			Mark: 0x10, Mask: 0xff, IIF: "lo", OIF: "eth0", Action: kernel.RuleLookup, Table: 200}))
	assert.Equal(t, "5: goto 9 tos 0x4 ipproto 6 sport 1-2 dport 80-80 uidrange 10-20 suppress_prefixlength 0 suppress_ifgroup 3 realm 7 tun_id 8 proto 4",
		drivertest.FormatRule(kernel.Rule{Priority: 5, Action: kernel.RuleGoto, Goto: 9, TOS: 4, IPProto: 6, SrcPorts: kernel.PortRange{Start: 1, End: 2},
			DstPorts: kernel.PortRange{Start: 80, End: 80}, UID: kernel.UIDRange{Start: 10, End: 20, Set: true},
			SuppressPrefixLen: kernel.Suppressor{Set: true}, SuppressIfGroup: kernel.Suppressor{Value: 3, Set: true}, Realm: 7, TunID: 8, Protocol: 4}))
	assert.Equal(t, "7: action 6 proto 0", drivertest.FormatRule(kernel.Rule{Priority: 7, Action: kernel.RuleBlackhole}))
}

func TestDumpHelpers(t *testing.T) {
	ctx := context.Background()
	ns := kernelfake.New(kernelfake.Options{})
	l, err := ns.AddLink(ctx, kernel.Link{Name: "np-a", Kind: kernel.KindBridge})
	require.NoError(t, err)
	require.NoError(t, ns.SetLinkUp(ctx, l.Index, true))
	errs := ns.ApplyNeighbors(ctx, []kernel.NeighborOp{
		{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: l.Index, IP: netip.MustParseAddr("10.0.0.9"), MAC: net.HardwareAddr{2, 0, 0, 0, 0, 9}}},
		{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: l.Index, IP: netip.MustParseAddr("10.0.0.8"), MAC: net.HardwareAddr{2, 0, 0, 0, 0, 8}, State: kernel.NUDReachable}},
	})
	require.Equal(t, []error{nil, nil}, errs)
	assert.Equal(t, []string{"neigh 10.0.0.9 dev np-a lladdr 02:00:00:00:00:09"}, drivertest.PermanentNeighbors(t, ns, kernel.IPv4))

	assert.Equal(t, []string{"table 255 127.0.0.0/8 metric 0 local dev lo src 127.0.0.1 proto 2 scope 254"}, drivertest.Routes(t, ns, kernel.IPv4, kernel.TableLocal)[:1])
	for _, r := range drivertest.Routes(t, ns, kernel.IPv4) {
		assert.NotContains(t, r, "table 255", "no table local unless asked")
	}
	assert.Equal(t, []string{"0: lookup 255 proto 2", "32766: lookup 254 proto 2", "32767: lookup 253 proto 2"}, drivertest.Rules(t, ns, kernel.IPv4))
	drivertest.Exec(t, ns, "ipset", "create", "np4-a", "hash:ip")
	assert.Equal(t, "np4-a\n", drivertest.Exec(t, ns, "ipset", "list", "-name"))

	drivertest.SameLines(t, "lines", []string{"b", "a", "a"}, []string{"a", "b", "a"})
	n := 0
	drivertest.WaitFor(t, "three tries", func() bool { n++; return n == 3 })
	assert.Equal(t, 3, n)
}

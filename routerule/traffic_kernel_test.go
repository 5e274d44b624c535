//go:build linux

package routerule_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routerule"
)

// TestKernelTrafficFollowsRules builds one host with two pods and shows
// that traffic from pod A to pod B follows the rules programmed in the
// host: a rule sending A's traffic to a table whose route to B is
// unreachable cuts A off, and removing it restores the path. Each match
// kind that forwarded traffic can exercise (source, fwmark set by iptables,
// inverted fwmark, input interface) and the goto and blackhole actions are
// checked, for IPv4 and IPv6.
func TestKernelTrafficFollowsRules(t *testing.T) {
	kerneltest.RequireCommands(t, "ping", "iptables", "ip6tables")
	topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 1, PodsPerHost: 2})
	host := topo.Hosts[0]
	a, b := host.Pods[0], host.Pods[1]
	const table = 100
	const mark = 0x10
	ns, err := kernel.Open(host.NS.Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = ns.Close() })

	for _, fam := range []routerule.Family{routerule.IPv4, routerule.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			ctx := context.Background()
			srcA, dstB := a.IPv4, b.IPv4
			iptables, nlFam := "iptables", netlink.FAMILY_V4
			if fam == routerule.IPv6 {
				srcA, dstB = a.IPv6, b.IPv6
				iptables, nlFam = "ip6tables", netlink.FAMILY_V6
			}
			// Table 100 holds only an unreachable route to pod B.
			require.NoError(t, host.NS.Handle().RouteAdd(&netlink.Route{
				Family: nlFam, Table: table, Type: unix.RTN_UNREACHABLE,
				Dst: &net.IPNet{IP: dstB.AsSlice(), Mask: net.CIDRMask(dstB.BitLen(), dstB.BitLen())},
			}))
			// Mark pod A's packets as they enter the host.
			_, err := host.NS.Exec(ctx, iptables, "-w", "-t", "mangle", "-A", "PREROUTING",
				"-s", srcA.String(), "-j", "MARK", "--set-mark", "0x10/0x10")
			require.NoError(t, err)

			rules, err := routerule.New(routerule.Options{
				Family: fam, Kernel: ns,
				Priorities: []uint32{100, 101, 102}, Tables: []uint32{table, kernel.TableMain},
			})
			require.NoError(t, err)
			set := func(rs ...routerule.Rule) {
				t.Helper()
				require.NoError(t, rules.SetRules(rs))
				_, err := rules.Apply(ctx)
				require.NoError(t, err)
			}
			fromA := netip.PrefixFrom(srcA, srcA.BitLen())
			toTable := routerule.ActionLookup{Table: table}

			// A TCP echo server in pod B, and a check of both ping and TCP.
			server, _ := b.NS.ListenTCP(t, netip.AddrPortFrom(dstB, 0))
			requireReach := func(t *testing.T, want bool, tcp bool) {
				t.Helper()
				checks := []kerneltest.Check{kerneltest.PingCheck(a.NS, dstB)}
				if tcp {
					checks = append(checks, kerneltest.TCPCheck(a.NS, server))
				}
				for _, c := range checks {
					if !want {
						c = kerneltest.Not(c)
					}
					// Long enough for a ping to a silent blackhole to
					// give up on its own (-w3).
					cctx, cancel := context.WithTimeout(ctx, 6*time.Second)
					err := c.Run(cctx)
					cancel()
					require.NoError(t, err, c.Name)
				}
			}
			requireReach(t, true, true)

			cases := []struct {
				name  string
				rules []routerule.Rule
				cut   bool
			}{
				{"from A lookup unreachable table", []routerule.Rule{{Priority: 100, Src: fromA, Action: toTable}}, true},
				{"fwmark lookup unreachable table", []routerule.Rule{{Priority: 100, Mark: mark, Mask: mark, Action: toTable}}, true},
				{"not fwmark (A is marked)", []routerule.Rule{{Priority: 100, Mark: mark, Mask: mark, Invert: true, Action: toTable}}, false},
				{"iif A's veth lookup unreachable table", []routerule.Rule{{Priority: 100, IIF: a.HostVeth, Action: toTable}}, true},
				{"iif B's veth only", []routerule.Rule{{Priority: 100, IIF: b.HostVeth, Action: toTable}}, false},
				{"catch-all lookup unreachable table", []routerule.Rule{{Priority: 101, Action: toTable}}, true},
				{"goto skips the catch-all for A", []routerule.Rule{
					{Priority: 100, Src: fromA, Action: routerule.ActionGoto{Priority: 102}},
					{Priority: 101, Action: toTable},
					{Priority: 102, Action: routerule.ActionLookup{Table: kernel.TableMain}},
				}, false},
				{"goto without a rule at its target is ignored", []routerule.Rule{
					{Priority: 100, Src: fromA, Action: routerule.ActionGoto{Priority: 102}},
					{Priority: 101, Action: toTable},
				}, true},
				{"blackhole from A", []routerule.Rule{{Priority: 100, Src: fromA, Action: routerule.ActionBlackhole{}}}, true},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					// TCP into a silent blackhole only times out: ping
					// alone shows it.
					_, silent := tc.rules[0].Action.(routerule.ActionBlackhole)
					set(tc.rules...)
					requireReach(t, !tc.cut, !silent)
					set()
					requireReach(t, true, !silent)
				})
			}
		})
	}
}

//go:build linux

package netfiltertest_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
)

// TestKernelInsertAndAppendOneHook checks the rule model's promise of a
// top and a bottom of one hook on every backend, with real TCP from the
// client pod to the server pod through the host's FORWARD hook: a rule of
// InsertRules that accepts the connection wins over a rule of AppendRules
// that drops it, and the converse — an inserted drop before an appended
// accept — drops it. (On nftables the two once sat in two base chains, and
// an accept in the first did not stop the drop in the second.)
func TestKernelInsertAndAppendOneHook(t *testing.T) {
	kerneltest.RequireCommands(t, "iptables-legacy-save", "iptables-nft-save", "ip6tables-legacy-save")
	fwd := netfilter.HookForward
	for _, b := range []backend{iptBackend(iptables.BackendLegacy), iptBackend(iptables.BackendNFT), nftBackend()} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 1, PodsPerHost: 2})
			host := topo.Hosts[0]
			k, err := kernel.Open(host.NS.Path())
			require.NoError(t, err)
			t.Cleanup(func() { k.Close() })
			startServers(t, host.NS, host.Pods[1].NS)
			for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
				e := newEnv(topo, k, f)
				tbl := b.table(t, e, "filter")
				toServer := []netfilter.Match{tcp, netfilter.DestNet(netip.PrefixFrom(e.serverAddr, e.serverAddr.BitLen())), netfilter.DestPorts(netfilter.Port(port))}
				accept := netfilter.Rule{Matches: toServer, Action: netfilter.Accept()}
				drop := netfilter.Rule{Matches: toServer, Action: netfilter.Drop()}
				for _, c := range []struct {
					name           string
					insert, append netfilter.Rule
					want           outcome
				}{
					{"insert accept, append drop", accept, drop, accepted},
					{"insert drop, append accept", drop, accept, dropped},
				} {
					require.NoError(t, tbl.InsertRules("test", fwd, []netfilter.Rule{c.insert}))
					require.NoError(t, tbl.AppendRules("test", fwd, []netfilter.Rule{c.append}))
					_, err := tbl.Apply(context.Background())
					require.NoError(t, err)
					got := doProbe(t, e, tcpForward, c.want == dropped)
					require.Equal(t, c.want, got, "%s %v: %s", b.name, f, c.name)
				}
				require.NoError(t, tbl.InsertRules("test", fwd, nil))
				require.NoError(t, tbl.AppendRules("test", fwd, nil))
				_, err := tbl.Apply(context.Background())
				require.NoError(t, err)
			}
		})
	}
}

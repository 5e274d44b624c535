//go:build linux

package masquerade_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/masquerade"
)

// TestKernelMasquerade runs the Manager on host1 of two hosts joined by a
// veth: a pod's connection to host2 (outside every pool, and with no route
// back to the pods) works only once masqueraded, and conntrack shows the
// source translated to host1's address; a connection to a pod of another
// pool keeps its pod address.
func TestKernelMasquerade(t *testing.T) {
	managertest.ForEachBackend(t, func(t *testing.T, b managertest.Backend) {
		managertest.ForEachFamily(t, func(t *testing.T, f ipfamily.Family) {
			kerneltest.RequireCommands(t, "conntrack", "ipset")
			topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{
				Hosts: 2, PodsPerHost: 1, Underlay: kerneltest.UnderlayVeth, Stack: managertest.Stack(f),
			})
			host1, host2 := topo.Hosts[0], topo.Hosts[1]
			pod, pod2 := host1.Pods[0], host2.Pods[0]
			podIP := managertest.Pick(f, pod.Addrs()...)
			host1IP := managertest.Pick(f, host1.UnderlayAddrs()...)
			host2IP := managertest.Pick(f, host2.UnderlayAddrs()...)
			pool1, pool2 := host1.PodCIDRv4, host2.PodCIDRv4
			if f == ipfamily.IPv6 {
				pool1, pool2 = host1.PodCIDRv6, host2.PodCIDRv6
			}

			server, _ := host2.NS.ListenTCP(t, netip.AddrPortFrom(host2IP, 0))
			toServer := kerneltest.TCPCheck(pod.NS, server)
			kerneltest.Require(t, kerneltest.Not(toServer)) // host2 has no route back to the pod

			k := managertest.Open(t, host1.NS)
			nat := b.NewTable(t, k, "nat", f, "npm-")
			sets := b.Sets(t, k, nat, f, fmt.Sprintf("npt%d-", f))
			m, err := masquerade.New(masquerade.Options{Family: f, Sets: sets, Table: nat, Chain: "npm-masq"})
			require.NoError(t, err)
			loop := managertest.StartLoop(t, dataplane.Options{}, []dataplane.Manager{m}, sets, nat)
			managertest.Send(t, loop,
				cluster.Pool{ID: "host1", CIDR: pool1, Masquerade: true},
				cluster.Pool{ID: "host2", CIDR: pool2, Masquerade: true},
			)
			managertest.InSync(loop)

			// A real flow from the pod to outside the pools is masqueraded.
			kerneltest.Eventually(t, managertest.Converge, toServer)
			rules := b.Dump(t, host1.NS, "nat", f)
			t.Logf("%s nat table on host1:\n%s", b.Name, rules)
			assert.Regexp(t, "random-fully|fully-random", rules)
			flows := managertest.Conntrack(t, host1.NS, f, "-p", "tcp", "--orig-src", podIP.String(), "--orig-dst", host2IP.String())
			require.NotEmpty(t, flows, "conntrack on host1 has the pod's flow to host2")
			for _, fl := range flows {
				t.Logf("host1 conntrack: %s", fl.Line)
				to, snat := fl.SNAT()
				assert.True(t, snat, "the flow is source-NATed: %s", fl.Line)
				assert.Equal(t, host1IP, to, "to host1's address on the interface it left by")
			}
			// host2 has no route to the pod's pool: the connection worked
			// because host2 answered host1's address.

			// To a pod of another pool, the source stays the pod's.
			require.NoError(t, topo.AddPodRoutesViaUnderlay())
			pod2IP := managertest.Pick(f, pod2.Addrs()...)
			podServer, _ := pod2.NS.ListenTCP(t, netip.AddrPortFrom(pod2IP, 0))
			kerneltest.Eventually(t, managertest.Converge, kerneltest.TCPCheck(pod.NS, podServer))
			flows = managertest.Conntrack(t, host1.NS, f, "-p", "tcp", "--orig-src", podIP.String(), "--orig-dst", pod2IP.String())
			require.NotEmpty(t, flows)
			for _, fl := range flows {
				t.Logf("host1 conntrack, pool to pool: %s", fl.Line)
				_, snat := fl.SNAT()
				assert.False(t, snat, "pool to pool is not masqueraded: %s", fl.Line)
			}
		})
	})
}

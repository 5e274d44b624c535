//go:build linux

package ipip_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipip"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/overlay"
	"github.com/nodeplane/nodeplane/overlay/overlaytest"
)

// TestKernelIPIP runs one IPIP manager per host of three hosts on a bridge
// (one pod each). It first detects whether this kernel has IPIP at all:
// where it has, every remote block goes through tunl0 (the tunnel's
// counters move) and pods reach each other; where it has not (this
// project's machines), the test says so and exercises what runs without
// the device: cross-subnet routing of same-subnet nodes (direct routes,
// real traffic), the blackholes, the node-address set, the device failing
// alone as a partial failure, and a restarted manager writing no route or
// set.
func TestKernelIPIP(t *testing.T) {
	kerneltest.RequireKernel(t)
	kerneltest.RequireCommands(t, "ping", "ipset", "ip")
	tp := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 3, PodsPerHost: 1, Stack: kerneltest.IPv4Only})
	ctx := context.Background()

	// Detect: add an ipip link in a scratch namespace.
	probe := kerneltest.NewNS(t)
	pk, err := kernel.Open(probe.Path())
	require.NoError(t, err)
	defer pk.Close()
	_, perr := pk.AddLink(ctx, kernel.Link{Name: "np-probe", Kind: kernel.KindIPIP, IPTunnel: &kernel.IPTunnel{}})
	supported := perr == nil
	if !supported {
		require.ErrorIs(t, perr, kernel.ErrNotSupported, "an ipip link failed for another reason")
		t.Logf("this kernel has no IPIP (%v): tunnel routes cannot carry traffic here; testing direct routing, blackholes, the set and the device's isolated failure", perr)
	}
	crossSubnet := !supported // every host shares the subnet: all direct
	msgs := []any{}
	for _, h := range tp.Hosts {
		a := h.PodCIDRv4.Addr().As4()
		a[3] = 250
		msgs = append(msgs, cluster.Node{Name: h.Name, UnderlayV4: h.UnderlayIPv4.Addr(), TunnelV4: netipFrom4(a)},
			cluster.Block{CIDR: h.PodCIDRv4, Node: h.Name})
	}
	stacks := make([]*stack, len(tp.Hosts))
	counts := make([]*overlaytest.Counting, len(tp.Hosts))
	for i, h := range tp.Hosts {
		k, err := kernel.Open(h.NS.Path())
		require.NoError(t, err)
		t.Cleanup(func() { k.Close() })
		counts[i] = overlaytest.Wrap(k)
		stacks[i] = newStack(t, counts[i], newClock(), func(o *overlay.Options) { o.NodeName = h.Name; o.CrossSubnet = crossSubnet })
		stacks[i].send(msgs...)
		err = stacks[i].converge()
		if supported {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, ipip.ErrDevice)
			require.ErrorIs(t, err, kernel.ErrNotSupported)
		}
	}
	h1, h2, h3 := tp.Hosts[0], tp.Hosts[1], tp.Hosts[2]
	out, err := h1.NS.Exec(ctx, "ip", "route", "show", "proto", "78")
	require.NoError(t, err)
	require.Contains(t, string(out), "blackhole "+h1.PodCIDRv4.String())
	for _, o := range []*kerneltest.Host{h2, h3} {
		if supported {
			require.Contains(t, string(out), fmt.Sprintf("%s via %s dev tunl0 onlink", o.PodCIDRv4, o.UnderlayIPv4.Addr()))
		} else {
			require.Contains(t, string(out), fmt.Sprintf("%s via %s dev eth0", o.PodCIDRv4, o.UnderlayIPv4.Addr()))
		}
	}
	set, err := h1.NS.Exec(ctx, "ipset", "list", "np4-"+overlay.DefaultSetName(overlay.IPIP{}))
	require.NoError(t, err)
	for _, h := range tp.Hosts {
		require.Contains(t, string(set), h.UnderlayIPv4.Addr().String())
	}
	var before uint64
	if supported {
		before = tunlTx(t, h1)
	}
	for _, h := range tp.Hosts {
		for _, o := range tp.Hosts {
			if o != h {
				kerneltest.Eventually(t, 10*time.Second, kerneltest.PingCheck(h.Pods[0].NS, o.Pods[0].IPv4))
			}
		}
	}
	if supported {
		require.Greater(t, tunlTx(t, h1), before, "traffic went through tunl0")
	}

	// A restarted manager writes no route and no set member (without the
	// module, only the device keeps being tried).
	counts[0].Reset()
	r := newStack(t, counts[0], newClock(), func(o *overlay.Options) { o.NodeName = h1.Name; o.CrossSubnet = crossSubnet })
	r.send(msgs...)
	err = r.converge()
	if supported {
		require.NoError(t, err)
		require.Zero(t, counts[0].Writes(), "%v", counts[0].Log())
	} else {
		var others []string
		for _, w := range counts[0].Log() {
			if !strings.HasPrefix(w, "add link tunl0") {
				others = append(others, w)
			}
		}
		require.Empty(t, others)
		require.True(t, errors.Is(err, kernel.ErrNotSupported))
	}
}

func tunlTx(t *testing.T, h *kerneltest.Host) uint64 {
	t.Helper()
	l, err := h.NS.Handle().LinkByName("tunl0")
	require.NoError(t, err)
	return l.Attrs().Statistics.TxPackets
}

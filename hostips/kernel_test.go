//go:build linux

package hostips_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/hostips"
	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel"
)

// members reads a set's members with `ipset save`.
func members(t *testing.T, ns *kerneltest.NS, set string) []string {
	t.Helper()
	out, err := ns.Exec(context.Background(), "ipset", "save", set)
	if err != nil {
		return nil // not created yet
	}
	var m []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "add" {
			m = append(m, f[2])
		}
	}
	slices.Sort(m)
	return m
}

// TestKernelHostIPsFollowAddresses wires the Manager as its documentation
// says — ifacemonitor's OnAddrs into the loop — for both families in one
// namespace, and changes the namespace's addresses: each set follows,
// without the excluded interface's addresses and without link-local ones.
func TestKernelHostIPsFollowAddresses(t *testing.T) {
	kerneltest.RequireCommands(t, "ipset")
	ns := kerneltest.NewNS(t)
	require.NoError(t, ns.SetSysctl("net.ipv6.conf.default.accept_dad", "0"))
	k := managertest.Open(t, ns)
	ctx := context.Background()

	var managers []dataplane.Manager
	var drivers []dataplane.Driver
	sets := map[ipfamily.Family]string{}
	for _, f := range ipfamily.All {
		s, err := ipsets.New(ipsets.Options{Family: f, Prefix: map[ipfamily.Family]string{ipfamily.IPv4: "nph4-", ipfamily.IPv6: "nph6-"}[f], Kernel: k})
		require.NoError(t, err)
		m, err := hostips.New(hostips.Options{Family: f, Sets: s, Exclude: []string{`^npx-`}})
		require.NoError(t, err)
		managers, drivers = append(managers, m), append(drivers, s)
		sets[f] = m.SetName()
	}
	loop := managertest.StartLoop(t, dataplane.Options{}, managers, drivers...)
	loop.DatastoreInSync()
	managertest.RunMonitor(t, ifacemonitor.Options{
		Kernel: k,
		OnAddrs: func(name string, addrs []netip.Prefix) {
			_ = loop.Send(ctx, hostips.InterfaceAddrs{Name: name, Addrs: addrs})
		},
		OnInSync: loop.InterfacesInSync,
	})

	expect := func(f ipfamily.Family, want ...string) {
		t.Helper()
		slices.Sort(want)
		deadline := time.Now().Add(managertest.Converge)
		for {
			got := members(t, ns, sets[f])
			if slices.Equal(got, want) {
				t.Logf("%s = %v", sets[f], got)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s = %v, want %v", sets[f], got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	expect(ipfamily.IPv4, "127.0.0.1")
	expect(ipfamily.IPv6, "::1")

	addLink := func(name string) kernel.Link {
		l, err := k.AddLink(ctx, kernel.Link{Name: name, Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: name + "p"}})
		require.NoError(t, err)
		require.NoError(t, k.SetLinkUp(ctx, l.Index, true))
		p, err := k.LinkByName(ctx, name+"p")
		require.NoError(t, err)
		require.NoError(t, k.SetLinkUp(ctx, p.Index, true)) // both ends up: a link-local address appears
		return l
	}
	addr := func(l kernel.Link, p string) kernel.Addr {
		a := kernel.Addr{LinkIndex: l.Index, Prefix: netip.MustParsePrefix(p)}
		require.NoError(t, k.AddAddr(ctx, a))
		return a
	}
	eth := addLink("nph-eth")
	a4 := addr(eth, "192.0.2.10/24")
	addr(eth, "2001:db8::10/64")
	skip := addLink("npx-skip")
	addr(skip, "192.0.2.99/24")
	addr(skip, "2001:db8::99/64")
	// Wait for the kernel's link-local address on the veth, so that its
	// absence from the set means something.
	deadline := time.Now().Add(managertest.Converge)
	for !hasLinkLocal(t, k, eth.Index) {
		require.True(t, time.Now().Before(deadline), "no link-local address on %s", eth.Name)
		time.Sleep(20 * time.Millisecond)
	}
	expect(ipfamily.IPv4, "127.0.0.1", "192.0.2.10")
	expect(ipfamily.IPv6, "::1", "2001:db8::10") // no fe80::, nothing of npx-skip

	// An address added, one removed.
	addr(eth, "198.51.100.7/24")
	require.NoError(t, k.DeleteAddr(ctx, a4))
	expect(ipfamily.IPv4, "127.0.0.1", "198.51.100.7")

	// The interface goes: its addresses leave both sets.
	require.NoError(t, k.DeleteLink(ctx, eth.Index))
	expect(ipfamily.IPv4, "127.0.0.1")
	expect(ipfamily.IPv6, "::1")
}

func hasLinkLocal(t *testing.T, k *kernel.Namespace, index int) bool {
	t.Helper()
	addrs, err := k.Addrs(context.Background(), ipfamily.IPv6)
	require.NoError(t, err)
	for _, a := range addrs {
		if a.LinkIndex == index && a.Prefix.Addr().IsLinkLocalUnicast() {
			return true
		}
	}
	return false
}

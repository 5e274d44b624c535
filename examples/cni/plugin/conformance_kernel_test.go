package plugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/examples/cni/plugin"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// network is the test network's name (host-local keeps its reservations
// under it).
const network = "nodeplane-test"

// The host's own addresses, which pods ping.
var (
	hostIPv4 = netip.MustParseAddr("198.18.0.1")
	hostIPv6 = netip.MustParseAddr("fd00:198:18::1")
)

// The test ranges: subnets and how many addresses host-local may give.
var (
	subnet4 = netip.MustParsePrefix("10.244.1.0/24")
	subnet6 = netip.MustParsePrefix("fd00:10:244:1::/64")
)

// node is a "host" namespace with a runtime in it: libcni with a result
// cache, the plugin and host-local in its CNI path, host-local's data in a
// directory of the test.
type node struct {
	t       *testing.T
	host    *kerneltest.NS
	cni     *libcni.CNIConfig
	list    *libcni.NetworkConfigList
	plugin  map[string]any // the list's one plugin entry
	version string
	dataDir string
}

// rangeOf is a host-local range of subnet giving n addresses from .10 on.
func rangeOf(subnet netip.Prefix, n int) []any {
	start := subnet.Addr().Next()
	for range 9 {
		start = start.Next()
	}
	end := start
	for range n - 1 {
		end = end.Next()
	}
	return []any{map[string]any{"subnet": subnet.String(), "rangeStart": start.String(), "rangeEnd": end.String()}}
}

// nth returns the i-th address (from 0) host-local gives in subnet's range.
func nth(subnet netip.Prefix, i int) netip.Addr {
	a := subnet.Addr()
	for range 10 + i {
		a = a.Next()
	}
	return a
}

// newNode makes the host namespace (its own addresses on lo; IPv6
// duplicate address detection on, as on a node: the plugin turns it off on
// the host sides it makes) and the network configuration: spec version,
// the plugin's own keys, and ranges.
func newNode(t *testing.T, version string, own map[string]any, ranges ...[]any) *node {
	t.Helper()
	host := kerneltest.NewNS(t)
	lo, err := host.Handle().LinkByName("lo")
	require.NoError(t, err)
	for _, a := range []netip.Addr{hostIPv4, hostIPv6} {
		require.NoError(t, host.Handle().AddrAdd(lo, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(a, a.BitLen()))}))
	}
	n := &node{t: t, host: host, version: version, dataDir: t.TempDir()}
	n.plugin = map[string]any{"type": plugin.Type,
		"ipam": map[string]any{"type": "host-local", "dataDir": n.dataDir, "ranges": ranges}}
	for k, v := range own {
		n.plugin[k] = v
	}
	list, err := json.Marshal(map[string]any{"cniVersion": version, "name": network, "plugins": []any{n.plugin}})
	require.NoError(t, err)
	n.list, err = libcni.NetworkConfFromBytes(list)
	require.NoError(t, err)
	n.cni = libcni.NewCNIConfigWithCacheDir([]string{binDir(t)}, t.TempDir(), nil)
	return n
}

// pod is a pod's namespace and what the runtime calls it by.
type pod struct {
	ns        *kerneltest.NS
	namespace string
	name      string
	id        string // the container ID
}

// newPod makes a pod namespace (IPv6 duplicate address detection off).
func (n *node) newPod(name, id string) *pod {
	ns := kerneltest.NewNS(n.t)
	for _, k := range []string{"net.ipv6.conf.all.accept_dad", "net.ipv6.conf.default.accept_dad"} {
		require.NoError(n.t, ns.SetSysctl(k, "0"))
	}
	return &pod{ns: ns, namespace: "demo", name: name, id: id}
}

// hostIf is the pod's host-side interface name by the agent's convention.
func (p *pod) hostIf() string { return datastore.PodInterface(p.namespace, p.name) }

// rt is the runtime configuration of p's attachment eth0, with the CNI_ARGS
// a Kubernetes runtime passes.
func (p *pod) rt() *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: p.id, NetNS: p.ns.Path(), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", p.namespace}, {"K8S_POD_NAME", p.name}, {"K8S_POD_UID", "u-" + p.id}}}
}

// inHost runs fn, which starts plugins, from a thread in the host namespace:
// the plugin runs where a runtime would run it.
func (n *node) inHost(fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return n.host.Do(func() error { return fn(ctx) })
}

// add is ADD as a runtime makes it (libcni, which caches the result).
func (n *node) add(rt *libcni.RuntimeConf) (*current.Result, error) {
	var r types.Result
	err := n.inHost(func(ctx context.Context) (err error) {
		r, err = n.cni.AddNetworkList(ctx, n.list, rt)
		return err
	})
	if err != nil {
		return nil, err
	}
	res, err := current.NewResultFromResult(r)
	require.NoError(n.t, err)
	require.Equal(n.t, n.version, r.Version(), "the result is in the configuration's version")
	return res, nil
}

// check is CHECK with the cached result as prevResult.
func (n *node) check(rt *libcni.RuntimeConf) error {
	return n.inHost(func(ctx context.Context) error { return n.cni.CheckNetworkList(ctx, n.list, rt) })
}

// del is DEL (with the cached result as prevResult, if any).
func (n *node) del(rt *libcni.RuntimeConf) error {
	return n.inHost(func(ctx context.Context) error { return n.cni.DelNetworkList(ctx, n.list, rt) })
}

// status is STATUS.
func (n *node) status() error {
	return n.inHost(func(ctx context.Context) error { return n.cni.GetStatusNetworkList(ctx, n.list) })
}

// raw runs the plugin directly (no libcni) in the host namespace.
func (n *node) raw(iv invocation, extra map[string]any) ([]byte, error) {
	var out []byte
	err := n.inHost(func(context.Context) (err error) {
		out, err = execPlugin(n.t, iv, pluginConf(n.t, n.version, network, n.plugin, extra))
		return err
	})
	return out, err
}

// reserved lists the addresses host-local holds for the network.
func (n *node) reserved() []netip.Addr {
	entries, err := os.ReadDir(filepath.Join(n.dataDir, network))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(n.t, err)
	var out []netip.Addr
	for _, e := range entries {
		if a, err := netip.ParseAddr(e.Name()); err == nil {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// ourLinks lists the host's links that bear the plugin's mark.
func (n *node) ourLinks() []string {
	links, err := n.host.Handle().LinkList()
	require.NoError(n.t, err)
	var out []string
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Alias, "nodeplane/") {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}

// ipNet returns p as a net.IPNet.
func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// requireAttached checks the kernel state of p's attachment: the host side
// (name, veth, MAC, mark, up, MTU), the pod side (peer, MTU, the addresses
// as host prefixes, the default routes and the gateways' permanent
// neighbour entries).
func (n *node) requireAttached(p *pod, addrs []netip.Addr, mtu int) {
	t := n.t
	t.Helper()
	host, err := n.host.Handle().LinkByName(p.hostIf())
	require.NoError(t, err)
	require.IsType(t, &netlink.Veth{}, host)
	ha := host.Attrs()
	require.Equal(t, plugin.HostMAC.String(), ha.HardwareAddr.String())
	require.Equal(t, fmt.Sprintf("nodeplane/%s/%s/eth0", network, p.id), ha.Alias)
	require.NotZero(t, ha.Flags&net.FlagUp, "host side up")
	require.Equal(t, mtu, ha.MTU)
	// The host side's link-local address, from which the node asks for
	// the pod's IPv6 address, is usable without duplicate address
	// detection: the kernel clears its tentative flag in a work item of
	// its own once the link is up (at once when detection is off, which a
	// busy machine may still delay), and never marks it failed.
	dad, err := n.host.Sysctl("net.ipv6.conf." + p.hostIf() + ".accept_dad")
	require.NoError(t, err)
	require.Equal(t, "0", dad, "duplicate address detection off on the host side")
	var flags int
	require.Eventually(t, func() bool {
		as, err := n.host.Handle().AddrList(host, netlink.FAMILY_V6)
		for i := range as {
			if err == nil && as[i].IP.IsLinkLocalUnicast() {
				flags = as[i].Flags
				return flags&unix.IFA_F_TENTATIVE == 0
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "the host side has a link-local address that is not tentative")
	require.Zero(t, flags&unix.IFA_F_DADFAILED, "no duplicate address detection failed")

	ph := p.ns.Handle()
	eth0, err := ph.LinkByName("eth0")
	require.NoError(t, err)
	require.IsType(t, &netlink.Veth{}, eth0)
	require.Equal(t, host.Attrs().Index, eth0.Attrs().ParentIndex, "eth0's peer is the host side")
	require.NotZero(t, eth0.Attrs().Flags&net.FlagUp, "pod side up")
	require.Equal(t, mtu, eth0.Attrs().MTU)

	got, err := ph.AddrList(eth0, netlink.FAMILY_ALL)
	require.NoError(t, err)
	var global []string
	for _, a := range got {
		if !a.IP.IsLinkLocalUnicast() {
			global = append(global, a.IPNet.String())
		}
	}
	var want []string
	for _, a := range addrs {
		want = append(want, netip.PrefixFrom(a, a.BitLen()).String())
	}
	require.ElementsMatch(t, want, global)

	for _, gw := range []netip.Addr{plugin.Gateway4, plugin.Gateway6} {
		fam := netlink.FAMILY_V4
		if gw.Is6() {
			fam = netlink.FAMILY_V6
		}
		has := slices.ContainsFunc(addrs, func(a netip.Addr) bool { return a.Is4() == gw.Is4() })
		routes, err := ph.RouteList(eth0, fam)
		require.NoError(t, err)
		var def []netlink.Route
		for _, r := range routes {
			if r.Dst == nil || r.Dst.IP.IsUnspecified() {
				def = append(def, r)
			}
		}
		neighs, err := ph.NeighList(eth0.Attrs().Index, fam)
		require.NoError(t, err)
		var gwNeigh []netlink.Neigh
		for _, nb := range neighs {
			if nb.IP.Equal(gw.AsSlice()) {
				gwNeigh = append(gwNeigh, nb)
			}
		}
		if !has {
			require.Empty(t, def, "no default route of a family without address")
			require.Empty(t, gwNeigh)
			continue
		}
		require.Len(t, def, 1, "one default route via %s", gw)
		require.True(t, def[0].Gw.Equal(gw.AsSlice()), "default route via %s, not %s", gw, def[0].Gw)
		if gw.Is4() {
			require.NotZero(t, def[0].Flags&int(netlink.FLAG_ONLINK), "IPv4 default route onlink")
		}
		require.Len(t, gwNeigh, 1)
		require.NotZero(t, gwNeigh[0].State&netlink.NUD_PERMANENT, "permanent neighbour %s", gw)
		require.Equal(t, plugin.HostMAC.String(), gwNeigh[0].HardwareAddr.String())
	}
}

// requireGone checks that p has no attachment left: no host side, no eth0.
func (n *node) requireGone(p *pod) {
	n.t.Helper()
	_, err := n.host.Handle().LinkByName(p.hostIf())
	require.ErrorAs(n.t, err, new(netlink.LinkNotFoundError), "host side %s is gone", p.hostIf())
	if _, err := os.Stat(p.ns.Path()); err == nil {
		_, err = p.ns.Handle().LinkByName("eth0")
		require.ErrorAs(n.t, err, new(netlink.LinkNotFoundError), "pod side eth0 is gone")
	}
}

// routeToPod routes the pod's addresses to its host side, as the agent does.
func (n *node) routeToPod(p *pod, addrs []netip.Addr) {
	l, err := n.host.Handle().LinkByName(p.hostIf())
	require.NoError(n.t, err)
	for _, a := range addrs {
		require.NoError(n.t, n.host.Handle().RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index,
			Dst: ipNet(netip.PrefixFrom(a, a.BitLen())), Scope: netlink.SCOPE_LINK}))
	}
}

// ADD, CHECK, DEL for both spec versions on a dual-stack pod, as a runtime
// makes them: the veth, addresses, routes and neighbours exist, traffic
// flows between pod and host both ways in both families, CHECK passes and
// fails once a route or neighbour is broken, DEL removes everything and a
// second DEL succeeds.
func TestKernelCNIAddCheckDel(t *testing.T) {
	for _, version := range []string{"1.0.0", "1.1.0"} {
		t.Run(version, func(t *testing.T) {
			n := newNode(t, version, map[string]any{"mtu": 1400}, rangeOf(subnet4, 2), rangeOf(subnet6, 2))
			p := n.newPod("web-0", "c-web-0")
			res, err := n.add(p.rt())
			require.NoError(t, err)
			v4, v6 := nth(subnet4, 0), nth(subnet6, 0)

			// The result: both ends, the addresses on the pod side with
			// their gateways, the default routes.
			require.Len(t, res.Interfaces, 2)
			require.Equal(t, p.hostIf(), res.Interfaces[0].Name)
			require.Empty(t, res.Interfaces[0].Sandbox)
			require.Equal(t, plugin.HostMAC.String(), res.Interfaces[0].Mac)
			require.Equal(t, "eth0", res.Interfaces[1].Name)
			require.Equal(t, p.ns.Path(), res.Interfaces[1].Sandbox)
			require.Len(t, res.IPs, 2)
			for _, ipc := range res.IPs {
				require.Equal(t, 1, *ipc.Interface)
			}
			require.Equal(t, v4.String()+"/32", res.IPs[0].Address.String())
			require.Equal(t, plugin.Gateway4.String(), res.IPs[0].Gateway.String())
			require.Equal(t, v6.String()+"/128", res.IPs[1].Address.String())
			require.Equal(t, plugin.Gateway6.String(), res.IPs[1].Gateway.String())
			require.Len(t, res.Routes, 2)
			require.Equal(t, "0.0.0.0/0", res.Routes[0].Dst.String())
			require.Equal(t, "::/0", res.Routes[1].Dst.String())

			n.requireAttached(p, []netip.Addr{v4, v6}, 1400)
			require.Equal(t, []netip.Addr{v4, v6}, n.reserved())

			n.routeToPod(p, []netip.Addr{v4, v6})
			for _, c := range []kerneltest.Check{
				kerneltest.PingCheck(p.ns, hostIPv4), kerneltest.PingCheck(p.ns, hostIPv6),
				kerneltest.PingCheck(n.host, v4), kerneltest.PingCheck(n.host, v6),
			} {
				kerneltest.Eventually(t, 15*time.Second, c)
			}
			srv, stop := n.host.ListenTCP(t, netip.AddrPortFrom(hostIPv4, 0))
			defer stop()
			kerneltest.Require(t, kerneltest.TCPCheck(p.ns, srv))

			require.NoError(t, n.check(p.rt()))
			if version == "1.1.0" {
				require.NoError(t, n.status())
			}

			// Break the pod's IPv6 default route, then its IPv4 gateway
			// neighbour: CHECK says so each time.
			eth0, err := p.ns.Handle().LinkByName("eth0")
			require.NoError(t, err)
			r6 := &netlink.Route{LinkIndex: eth0.Attrs().Index, Dst: ipNet(netip.MustParsePrefix("::/0")), Gw: plugin.Gateway6.AsSlice()}
			require.NoError(t, p.ns.Handle().RouteDel(r6))
			err = n.check(p.rt())
			require.ErrorContains(t, err, "route ::/0 via fe80::1 is missing")
			require.NoError(t, p.ns.Handle().RouteAdd(r6))
			require.NoError(t, n.check(p.rt()))
			require.NoError(t, p.ns.Handle().NeighDel(&netlink.Neigh{LinkIndex: eth0.Attrs().Index, Family: netlink.FAMILY_V4, IP: plugin.Gateway4.AsSlice()}))
			err = n.check(p.rt())
			require.ErrorContains(t, err, "no permanent neighbour entry 169.254.1.1")

			require.NoError(t, n.del(p.rt()))
			n.requireGone(p)
			require.Empty(t, n.reserved())
			require.Empty(t, n.ourLinks())
			require.NoError(t, n.del(p.rt()), "a second DEL succeeds")
		})
	}
}

// DEL after the pod's namespace is gone (a node reboot, a lost netns)
// succeeds and frees the addresses: the next ADD, of a new sandbox of the
// same pod, gets them again from ranges one address wide. DEL without the
// pod's name in CNI_ARGS finds the veth by its mark.
func TestKernelCNIDelAfterNetnsGone(t *testing.T) {
	n := newNode(t, "1.1.0", nil, rangeOf(subnet4, 1), rangeOf(subnet6, 1))
	addrs := []netip.Addr{nth(subnet4, 0), nth(subnet6, 0)}
	p := n.newPod("db-0", "c-db-0-a")
	_, err := n.add(p.rt())
	require.NoError(t, err)
	require.Equal(t, addrs, n.reserved())
	gone := p.rt()
	require.NoError(t, p.ns.Close())
	require.NoError(t, n.del(gone))
	require.Equal(t, []netip.Addr(nil), n.reserved())
	require.NoError(t, n.del(gone), "a second DEL succeeds")

	// The pod's next sandbox gets the same addresses.
	p2 := n.newPod("db-0", "c-db-0-b")
	_, err = n.add(p2.rt())
	require.NoError(t, err)
	n.requireAttached(p2, addrs, 1500)

	// DEL without CNI_ARGS: the veth is found by its mark.
	rt := p2.rt()
	rt.Args = nil
	require.NoError(t, n.del(rt))
	n.requireGone(p2)
	require.Empty(t, n.reserved())
}

// An ADD that fails leaves no veth and no reservation: the node's own
// namespace named as the pod's, a pod-side name taken (before anything is
// made), a host-side name held by a foreign
// interface (left alone, as is a foreign pod interface, also by the DEL a
// runtime sends after a failed ADD), and a failure in the middle (the pod
// refuses IPv6 addresses, after the veth exists). An ADD then gets the
// one address of each range.
func TestKernelCNIFailedAddLeavesNothing(t *testing.T) {
	n := newNode(t, "1.1.0", nil, rangeOf(subnet4, 1), rangeOf(subnet6, 1))
	requireClean := func(p *pod, err error, what string) {
		t.Helper()
		require.Error(t, err, what)
		t.Logf("%s: %v", what, err)
		require.Empty(t, n.reserved(), what)
		require.Empty(t, n.ourLinks(), what)
		require.NoError(t, n.del(p.rt()), "the runtime's DEL after a failed ADD")
		require.Empty(t, n.reserved(), what)
	}

	// The runtime names the node's own namespace: refused before anything.
	self := &pod{ns: n.host, namespace: "demo", name: "self", id: "c-0"}
	_, err := n.add(self.rt())
	require.Equal(t, types.ErrInvalidNetNS, cniCode(err), "%v", err)
	require.Empty(t, n.reserved())
	require.Empty(t, n.ourLinks())

	// The pod side's name is taken in the pod.
	p := n.newPod("web-0", "c-1")
	require.NoError(t, p.ns.Handle().LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}}))
	_, err = n.add(p.rt())
	requireClean(p, err, "pod side name taken")
	_, err = p.ns.Handle().LinkByName("eth0")
	require.NoError(t, err, "the pod's own eth0 is left alone")

	// The host side's name is held by an interface that is not ours.
	p = n.newPod("web-1", "c-2")
	require.NoError(t, n.host.Handle().LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: p.hostIf()}}))
	_, err = n.add(p.rt())
	require.ErrorContains(t, err, "is not this network's")
	requireClean(p, err, "host side name foreign")
	foreign, err := n.host.Handle().LinkByName(p.hostIf())
	require.NoError(t, err, "the foreign interface is left alone")
	require.NoError(t, n.host.Handle().LinkDel(foreign))

	// IPv6 is off in the pod: the IPv6 address fails after the veth and
	// the IPv4 address are made.
	p = n.newPod("web-2", "c-3")
	for _, k := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
		require.NoError(t, p.ns.SetSysctl(k, "1"))
	}
	_, err = n.add(p.rt())
	require.ErrorContains(t, err, "adding "+nth(subnet6, 0).String())
	requireClean(p, err, "IPv6 refused in the pod")
	n.requireGone(p)

	// Everything was released: an ADD gets the addresses.
	p = n.newPod("web-3", "c-4")
	_, err = n.add(p.rt())
	require.NoError(t, err)
	n.requireAttached(p, []netip.Addr{nth(subnet4, 0), nth(subnet6, 0)}, 1500)
}

// A new sandbox of a pod whose old sandbox was never deleted (its DEL comes
// late, or never) replaces the old veth; the old sandbox's late DEL then
// leaves the new veth alone and releases only the old addresses.
func TestKernelCNIStaleSandboxReplaced(t *testing.T) {
	n := newNode(t, "1.1.0", nil, rangeOf(subnet4, 2), rangeOf(subnet6, 2))
	old := n.newPod("web-0", "c-old")
	_, err := n.add(old.rt())
	require.NoError(t, err)
	cur := n.newPod("web-0", "c-new")
	_, err = n.add(cur.rt())
	require.NoError(t, err)
	n.requireAttached(cur, []netip.Addr{nth(subnet4, 1), nth(subnet6, 1)}, 1500)
	_, err = old.ns.Handle().LinkByName("eth0")
	require.ErrorAs(t, err, new(netlink.LinkNotFoundError), "the old sandbox lost its veth")
	require.Len(t, n.reserved(), 4, "the old sandbox's addresses stay reserved until its DEL")

	require.NoError(t, n.del(old.rt()))
	n.requireAttached(cur, []netip.Addr{nth(subnet4, 1), nth(subnet6, 1)}, 1500)
	require.Equal(t, []netip.Addr{nth(subnet4, 1), nth(subnet6, 1)}, n.reserved())
	require.NoError(t, n.check(cur.rt()))
}

// A container's attachment is never replaced by the same container: the
// same ADD again, or the network on a second interface of the pod (its
// host side would take the same name), fails before any address is
// reserved and leaves the first attachment working.
func TestKernelCNISameContainerRefused(t *testing.T) {
	n := newNode(t, "1.1.0", nil, rangeOf(subnet4, 3), rangeOf(subnet6, 3))
	p := n.newPod("web-0", "c-1")
	_, err := n.add(p.rt())
	require.NoError(t, err)
	want := []netip.Addr{nth(subnet4, 0), nth(subnet6, 0)}
	again := p.rt()
	second := p.rt()
	second.IfName = "net1"
	for what, rt := range map[string]*libcni.RuntimeConf{"the same ADD again": again, "a second interface": second} {
		_, err = n.add(rt)
		require.ErrorContains(t, err, "attached to this container already, as eth0", what)
		n.requireAttached(p, want, 1500)
		require.Equal(t, want, n.reserved(), what)
		require.NoError(t, n.check(p.rt()), what)
	}
	_, err = p.ns.Handle().LinkByName("net1")
	require.ErrorAs(t, err, new(netlink.LinkNotFoundError), "no second interface in the pod")
}

// GC deletes the veths and releases the addresses of the attachments not in
// cni.dev/valid-attachments and keeps the valid ones; interfaces marked for
// another network are not touched. IPv4 only: no IPv6 address, route or
// neighbour in the pods.
func TestKernelCNIGC(t *testing.T) {
	n := newNode(t, "1.1.0", nil, rangeOf(subnet4, 2))
	keep, drop := n.newPod("keep", "c-keep"), n.newPod("drop", "c-drop")
	for _, p := range []*pod{keep, drop} {
		_, err := n.add(p.rt())
		require.NoError(t, err)
	}
	n.requireAttached(keep, []netip.Addr{nth(subnet4, 0)}, 1500)
	n.requireAttached(drop, []netip.Addr{nth(subnet4, 1)}, 1500)
	other := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "npvother", Alias: "nodeplane/other-net/c-drop/eth0"}}
	require.NoError(t, n.host.Handle().LinkAdd(other))

	// The plugin's GC directly: libcni would DEL cached attachments itself
	// first, and the point is the plugin's own collection.
	_, err := n.raw(invocation{command: "GC"}, map[string]any{
		"cni.dev/valid-attachments": []types.GCAttachment{{ContainerID: keep.id, IfName: "eth0"}}})
	require.NoError(t, err)
	n.requireGone(drop)
	n.requireAttached(keep, []netip.Addr{nth(subnet4, 0)}, 1500)
	require.Equal(t, []netip.Addr{nth(subnet4, 0)}, n.reserved())
	_, err = n.host.Handle().LinkByName("npvother")
	require.NoError(t, err, "another network's interface is left alone")

	// And through libcni, with an empty list: everything goes.
	require.NoError(t, n.inHost(func(ctx context.Context) error {
		return n.cni.GCNetworkList(ctx, n.list, &libcni.GCArgs{})
	}))
	n.requireGone(keep)
	require.Empty(t, n.reserved())
}

// STATUS and the MTU file: with mtuFile and no mtu, STATUS says "not
// available" and ADD "try again later" (leaving nothing) until the agent
// has written the file; then both ends take its MTU. IPv6 only.
func TestKernelCNIStatusAndMTUFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mtu")
	n := newNode(t, "1.1.0", map[string]any{"mtuFile": file}, rangeOf(subnet6, 1))
	err := n.status()
	require.Equal(t, types.ErrPluginNotAvailable, cniCode(err), "%v", err)
	p := n.newPod("web-0", "c-1")
	_, err = n.add(p.rt())
	require.Equal(t, types.ErrTryAgainLater, cniCode(err), "%v", err)
	require.Empty(t, n.ourLinks())
	require.Empty(t, n.reserved())

	require.NoError(t, os.WriteFile(file, []byte("1380"), 0o644))
	require.NoError(t, n.status())
	_, err = n.add(p.rt())
	require.NoError(t, err)
	n.requireAttached(p, []netip.Addr{nth(subnet6, 0)}, 1380)
	n.routeToPod(p, []netip.Addr{nth(subnet6, 0)})
	kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(p.ns, hostIPv6))
	require.NoError(t, n.check(p.rt()))
	require.NoError(t, n.del(p.rt()))
	n.requireGone(p)
}

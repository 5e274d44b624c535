//go:build linux

package kernel

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// Addresses of the test interface v0 (a veth whose peer v1 is also up, so
// v0 has carrier), and gateways inside its subnets.
var (
	testAddr4 = netip.MustParsePrefix("10.255.0.1/24")
	testAddr6 = netip.MustParsePrefix("fd00:255::1/64")
	testGw4   = netip.MustParseAddr("10.255.0.2")
	testGw4b  = netip.MustParseAddr("10.255.0.3")
	testGw6   = netip.MustParseAddr("fd00:255::2")
	testGw6b  = netip.MustParseAddr("fd00:255::3")
)

// testLinks are the interfaces setupLinks creates.
type testLinks struct {
	v0, v1 int // interface indexes
}

// setupLinks creates the veth pair v0/v1 in ns with the netlink library
// (independently of the code under test), brings both up and gives v0 an
// IPv4 and an IPv6 address (no DAD), so gateways in their subnets resolve.
func setupLinks(ns *kerneltest.NS) (testLinks, error) {
	h := ns.Handle()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "v0"}, PeerName: "v1"}
	if err := h.LinkAdd(veth); err != nil {
		return testLinks{}, fmt.Errorf("add veth: %w", err)
	}
	var out testLinks
	for _, name := range []string{"v0", "v1"} {
		l, err := h.LinkByName(name)
		if err != nil {
			return testLinks{}, err
		}
		if err := h.LinkSetUp(l); err != nil {
			return testLinks{}, err
		}
		if name == "v1" {
			out.v1 = l.Attrs().Index
			continue
		}
		out.v0 = l.Attrs().Index
		for _, p := range []netip.Prefix{testAddr4, testAddr6} {
			a := &netlink.Addr{IPNet: ipNetOf(p)}
			if p.Addr().Is6() {
				a.Flags = unix.IFA_F_NODAD
			}
			if err := h.AddrAdd(l, a); err != nil {
				return testLinks{}, fmt.Errorf("add %s: %w", p, err)
			}
		}
	}
	return out, nil
}

// kernelEnv is a fresh namespace with the test links, and a Namespace
// opened on it by path.
type kernelEnv struct {
	kns   *kerneltest.NS
	links testLinks
	ns    *Namespace
}

func newKernelEnv(t *testing.T) *kernelEnv {
	t.Helper()
	kns := kerneltest.NewNS(t)
	links, err := setupLinks(kns)
	require.NoError(t, err)
	ns, err := Open(kns.Path())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, ns.Close()) })
	return &kernelEnv{kns: kns, links: links, ns: ns}
}

// conn returns the Namespace's route socket.
func (e *kernelEnv) conn(t *testing.T) *conn {
	t.Helper()
	c, err := e.ns.rtnl()
	require.NoError(t, err)
	return c
}

// apply applies ops and requires every one to succeed.
func (e *kernelEnv) apply(t *testing.T, ops []RouteOp) {
	t.Helper()
	for i, err := range e.ns.ApplyRoutes(context.Background(), ops) {
		require.NoError(t, err, "op %d: %+v", i, ops[i].Route)
	}
}

// ours dumps with DumpRoutes, sorted.
func (e *kernelEnv) ours(t *testing.T, family Family, table uint32) []Route {
	t.Helper()
	var out []Route
	err := e.ns.DumpRoutes(context.Background(), family, table, func(r *Route) error {
		out = append(out, *r)
		return nil
	}, func() { out = out[:0] })
	require.NoError(t, err)
	sortRoutes(out)
	return out
}

// oracle lists with the netlink library, sorted.
func (e *kernelEnv) oracle(t *testing.T, family Family, table uint32) []Route {
	t.Helper()
	nrs, err := e.kns.Handle().RouteListFiltered(family.AF(), &netlink.Route{Table: int(table)}, netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	out := make([]Route, 0, len(nrs))
	for _, nr := range nrs {
		r, ok := routeFromNetlink(&nr)
		require.True(t, ok)
		if r.Flags&unix.RTM_F_CLONED == 0 {
			out = append(out, r)
		}
	}
	sortRoutes(out)
	return out
}

// checkOracle requires our dump to equal the library's, field by field,
// and returns it.
func (e *kernelEnv) checkOracle(t *testing.T, family Family, table uint32) []Route {
	t.Helper()
	ours, oracle := e.ours(t, family, table), e.oracle(t, family, table)
	require.Equal(t, len(oracle), len(ours))
	for i := range ours {
		require.Equal(t, oracle[i], ours[i], "route %d", i)
	}
	return ours
}

func sortRoutes(rs []Route) {
	slices.SortFunc(rs, func(a, b Route) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), a.Dst.Addr().Compare(b.Dst.Addr()), cmp.Compare(a.Dst.Bits(), b.Dst.Bits()),
			cmp.Compare(a.TOS, b.TOS), cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.OIF, b.OIF), a.Gateway.Compare(b.Gateway))
	})
}

// netlinkRoute converts a route to the netlink library's form, for the
// peer benchmarks.
func netlinkRoute(r *Route) *netlink.Route {
	return &netlink.Route{
		LinkIndex: r.OIF,
		Dst:       ipNetOf(r.Dst),
		Table:     int(r.Table),
		Protocol:  netlink.RouteProtocol(r.Protocol),
		Scope:     netlink.Scope(r.Scope),
		Family:    r.Family.AF(),
		Type:      int(r.Type),
	}
}

// addVXLAN creates a VXLAN device (VNI 42, no learning, source address
// local) with the netlink library, up, and returns its index.
func addVXLAN(t testing.TB, h *netlink.Handle, name string, parent int, local netip.Addr) int {
	t.Helper()
	vx := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: name}, VxlanId: 42, Port: 4789, VtepDevIndex: parent, SrcAddr: ipOf(local)}
	require.NoError(t, h.LinkAdd(vx))
	l, err := h.LinkByName(name)
	require.NoError(t, err)
	require.NoError(t, h.LinkSetUp(l))
	return l.Attrs().Index
}

// hostHas reports whether the process's own namespace has a link called
// name (read only).
func hostHas(t *testing.T, name string) bool {
	t.Helper()
	_, err := net.InterfaceByName(name)
	return err == nil
}

// countingTransport counts the bytes a conn receives and the request
// messages it sends.
type countingTransport struct {
	transport
	received int
	sent     int
}

func (c *countingTransport) recv(b []byte) (int, error) {
	n, err := c.transport.recv(b)
	if err == nil {
		c.received += n
	}
	return n, err
}

func (c *countingTransport) send(b []byte) error {
	for buf := b; len(buf) > 0; c.sent++ {
		var ok bool
		if _, _, buf, ok = nextMessage(buf); !ok {
			break
		}
	}
	return c.transport.send(b)
}

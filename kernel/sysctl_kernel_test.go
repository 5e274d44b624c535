//go:build linux

package kernel

import (
	"context"
	"net/netip"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func TestKernelSysctls(t *testing.T) {
	e := newKernelEnv(t)
	ctx := context.Background()
	hostForward, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	require.NoError(t, err)

	for _, key := range []string{"net.ipv4.ip_forward", "net/ipv4/ip_forward"} {
		for _, v := range []string{"1", "0"} {
			require.NoError(t, e.ns.SetSysctl(ctx, key, v))
			got, err := e.ns.Sysctl(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, v, got, "%s, without its newline", key)
		}
	}
	require.NoError(t, e.ns.SetSysctl(ctx, "net.ipv4.ip_forward", "1"))
	after, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	require.NoError(t, err)
	assert.Equal(t, string(hostForward), string(after), "the host's value is untouched")
	inside, err := e.kns.Sysctl("net.ipv4.ip_forward")
	require.NoError(t, err)
	assert.Equal(t, "1", inside, "kerneltest reads the namespace's value too")

	// An interface name with a dot: only the slash form names it.
	require.NoError(t, e.kns.Handle().LinkAdd(bridge("br.100")))
	require.NoError(t, e.ns.SetSysctl(ctx, "net/ipv4/conf/br.100/rp_filter", "2"))
	got, err := e.ns.Sysctl(ctx, "net/ipv4/conf/br.100/rp_filter")
	require.NoError(t, err)
	assert.Equal(t, "2", got)
	_, err = e.ns.Sysctl(ctx, "net.ipv4.conf.br.100.rp_filter")
	assert.ErrorIs(t, err, ErrNotFound, "dots always separate components")

	_, err = e.ns.Sysctl(ctx, "net.ipv4.no_such_key")
	assert.ErrorIs(t, err, ErrNotFound)
	assert.ErrorIs(t, e.ns.SetSysctl(ctx, "net.ipv4.no_such_key", "1"), ErrNotFound)
	assert.ErrorIs(t, e.ns.SetSysctl(ctx, "net.ipv4.ip_forward", "yes"), ErrInvalid, "a value the kernel refuses")
	for _, key := range []string{"kernel.hostname", "/proc/sys/net/ipv4/ip_forward", "net/../kernel/hostname", "net"} {
		_, err := e.ns.Sysctl(ctx, key)
		assert.ErrorIs(t, err, ErrInvalid, key)
		assert.ErrorIs(t, e.ns.SetSysctl(ctx, key, "x"), ErrInvalid, key)
	}
}

func TestKernelConntrack(t *testing.T) {
	e := newKernelEnv(t)
	ctx := context.Background()
	h, err := e.ns.netlinkHandle(unix.NETLINK_NETFILTER)
	require.NoError(t, err)
	flow := func(f Family, src, dst, rsrc, rdst string, sport uint16) *netlink.ConntrackFlow {
		ip := func(s string) []byte { return netip.MustParseAddr(s).AsSlice() }
		return &netlink.ConntrackFlow{
			FamilyType: uint8(f.AF()),
			Forward:    netlink.IPTuple{SrcIP: ip(src), DstIP: ip(dst), Protocol: unix.IPPROTO_UDP, SrcPort: sport, DstPort: 53},
			Reverse:    netlink.IPTuple{SrcIP: ip(rsrc), DstIP: ip(rdst), Protocol: unix.IPPROTO_UDP, SrcPort: 53, DstPort: sport},
			TimeOut:    300,
		}
	}
	flows := []*netlink.ConntrackFlow{
		flow(IPv4, "10.0.0.1", "10.0.0.2", "10.0.0.2", "10.0.0.1", 1000),  // 10.0.0.1 as source
		flow(IPv4, "10.0.0.3", "10.0.0.1", "10.0.0.1", "10.0.0.3", 1001),  // 10.0.0.1 as destination
		flow(IPv4, "10.0.0.4", "10.96.0.1", "10.0.0.9", "10.0.0.4", 1002), // DNAT to 10.0.0.9: reply source
		flow(IPv4, "10.0.0.5", "10.0.0.6", "10.0.0.6", "10.0.0.5", 1003),  // untouched
		flow(IPv6, "fd00::1", "fd00::2", "fd00::2", "fd00::1", 1004),
		flow(IPv6, "fd00::3", "fd00::4", "fd00::4", "fd00::3", 1005),
	}
	for _, f := range flows {
		require.NoError(t, h.ConntrackCreate(netlink.ConntrackTable, netlink.InetFamily(f.FamilyType), f))
	}
	count := func(f Family) int {
		fs, err := h.ConntrackTableList(netlink.ConntrackTable, netlink.InetFamily(f.AF()))
		require.NoError(t, err)
		return len(fs)
	}
	require.Equal(t, 4, count(IPv4))
	require.Equal(t, 2, count(IPv6))

	n, err := e.ns.DeleteConntrack(ctx, IPv4, []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.9")})
	require.NoError(t, err)
	assert.Equal(t, 3, n, "source, destination, and the reply direction")
	assert.Equal(t, 1, count(IPv4))
	assert.Equal(t, 2, count(IPv6), "the other family is untouched")
	n, err = e.ns.DeleteConntrack(ctx, IPv6, []netip.Addr{netip.MustParseAddr("fd00::2")})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, 1, count(IPv6))
	n, err = e.ns.DeleteConntrack(ctx, IPv6, nil)
	require.NoError(t, err)
	assert.Zero(t, n)

	_, err = e.ns.DeleteConntrack(ctx, IPv6, []netip.Addr{netip.MustParseAddr("10.0.0.5")})
	assert.ErrorIs(t, err, ErrInvalid, "an address of the other family")
	_, err = e.ns.DeleteConntrack(ctx, 0, nil)
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Equal(t, 1, count(IPv4))
}

//go:build linux

package kernel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// DeleteConntrack deletes every connection-tracking entry of family in
// which one of addrs (each of family, else ErrInvalid) is the source or the
// destination of the original or the reply direction, and returns how many
// it deleted. The kernel has no such filter: the table is dumped and the
// matching entries deleted one by one; when the dump is interrupted by a
// concurrent change the pass runs again (at most DumpAttempts times).
func (ns *Namespace) DeleteConntrack(ctx context.Context, family Family, addrs []netip.Addr) (int, error) {
	if !family.Valid() {
		return 0, invalid("conntrack delete: %v is neither IPv4 nor IPv6", family)
	}
	match := make(conntrackAddrs, len(addrs))
	for _, a := range addrs {
		if err := family.Check(a); err != nil || a.Zone() != "" {
			return 0, invalid("conntrack delete: %s is not a plain %s address", a, family)
		}
		match[a] = struct{}{}
	}
	if len(match) == 0 {
		return 0, nil
	}
	ctx = orBackground(ctx)
	deleted := 0
	err := ns.withHandle(ctx, unix.NETLINK_NETFILTER, func(h *netlink.Handle) error {
		for attempt := 1; ; attempt++ {
			n, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, netlink.InetFamily(family.AF()), match)
			deleted += int(n)
			switch {
			case err == nil:
				return nil
			case !errors.Is(err, netlink.ErrDumpInterrupted):
				return classify(fmt.Errorf("kernel: delete %s conntrack entries: %w", family, err))
			case attempt >= DumpAttempts:
				return fmt.Errorf("kernel: %s conntrack dump interrupted %d times in a row: %w", family, attempt, ErrDumpInterrupted)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	})
	return deleted, err
}

// conntrackAddrs is a netlink conntrack filter that matches a flow with
// one of its addresses in either direction.
type conntrackAddrs map[netip.Addr]struct{}

// MatchConntrackFlow reports whether flow has one of the addresses.
func (m conntrackAddrs) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	for _, ip := range []net.IP{flow.Forward.SrcIP, flow.Forward.DstIP, flow.Reverse.SrcIP, flow.Reverse.DstIP} {
		a := addrOfIP(ip)
		if flow.FamilyType == unix.AF_INET6 && a.Is4() {
			a = netip.AddrFrom16(a.As16()) // a mapped address of an IPv6 flow stays IPv6
		}
		if _, ok := m[a]; ok && ipfamily.Of(a).AF() == int(flow.FamilyType) {
			return true
		}
	}
	return false
}

package overlay

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// CheckHost returns why a cannot be a node's underlay or tunnel address of
// family: it must be a valid unicast address of the family, not
// unspecified, loopback, multicast or link-local.
func CheckHost(family ipfamily.Family, a netip.Addr) error {
	if err := family.Check(a); err != nil {
		return err
	}
	if a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() {
		return fmt.Errorf("%s is not a unicast host address", a)
	}
	if a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return fmt.Errorf("%s is the broadcast address", a)
	}
	return nil
}

// CheckMAC returns why mac cannot be a tunnel endpoint's MAC: it must be
// 6 bytes, unicast and not all zeros.
func CheckMAC(mac net.HardwareAddr) error {
	switch {
	case len(mac) != 6:
		return fmt.Errorf("MAC %q is not 6 bytes", mac.String())
	case mac[0]&1 != 0:
		return fmt.Errorf("MAC %s is a multicast address", mac)
	case mac[0]|mac[1]|mac[2]|mac[3]|mac[4]|mac[5] == 0:
		return fmt.Errorf("MAC %s is all zeros", mac)
	}
	return nil
}

// CheckBlock returns why p cannot be a pod block of family: it must be a
// network prefix of the family without host bits.
func CheckBlock(family ipfamily.Family, p netip.Prefix) error {
	return family.CheckNet(p)
}

// CheckBlockUpdate returns why a message giving block to node is
// malformed: block is not a network prefix of family (see CheckBlock), or
// node is empty.
func CheckBlockUpdate(family ipfamily.Family, block netip.Prefix, node string) error {
	if err := CheckBlock(family, block); err != nil {
		return fmt.Errorf("block %s: %v", block, err)
	}
	if node == "" {
		return fmt.Errorf("block %s without a node", block)
	}
	return nil
}

// ValidMTU reports whether m can be a tunnel device's MTU option: 0 (none
// fixed) or 68 to 65535.
func ValidMTU(m int) bool { return m == 0 || (m >= 68 && m <= 65535) }

// CheckName returns why name cannot be a node name: it must not be empty.
func CheckName(name string) error {
	if name == "" {
		return fmt.Errorf("empty node name")
	}
	return nil
}

// CheckIfName returns why name cannot be an interface name, as the
// kernel's dev_valid_name checks it.
func CheckIfName(name string) error {
	if name == "" || len(name) > 15 || name == "." || name == ".." {
		return fmt.Errorf("invalid interface name %q", name)
	}
	for _, c := range name {
		if c == '/' || c == ':' || c == 0 || c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r' {
			return fmt.Errorf("invalid interface name %q", name)
		}
	}
	return nil
}

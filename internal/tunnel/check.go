package tunnel

import (
	"fmt"
	"net"

	"github.com/nodeplane/nodeplane/ipfamily"
)

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

// ValidMTU reports whether m can be the MTU option of a tunnel device
// that carries packets of family f: 0 (none fixed), or from the family's
// minimum — 68 for IPv4, 1280 for IPv6, below which the kernel turns IPv6
// off on the device and drops its addresses — to 65535.
func ValidMTU(m int, f ipfamily.Family) bool {
	least := 68
	if f == ipfamily.IPv6 {
		least = 1280
	}
	return m == 0 || (m >= least && m <= 65535)
}

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

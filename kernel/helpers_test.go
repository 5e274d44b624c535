//go:build linux

package kernel

import "net/netip"

// genDst returns the i-th /32 (IPv4, inside 10/8) or /128 (IPv6, inside
// fd01::/16) destination.
func genDst(v4 bool, i int) netip.Prefix {
	if v4 {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
	}
	return netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0x01, 12: byte(i >> 24), 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}), 128)
}

// genRoutes returns n device routes via oif in table, protocol 80.
func genRoutes(v4 bool, n int, table uint32, oif int) []RouteOp {
	fam := IPv6
	if v4 {
		fam = IPv4
	}
	ops := make([]RouteOp, n)
	for i := range ops {
		ops[i] = RouteOp{Kind: OpReplace, Route: Route{
			Family: fam, Table: table, Dst: genDst(v4, i), Type: RTNUnicast,
			Protocol: 80, Scope: ScopeLink, OIF: oif,
		}}
	}
	return ops
}

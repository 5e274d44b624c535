package nftables

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// The buffer of an element transaction is allocated once: elemsSize bounds
// what elemMsgs writes, closely for a set of addresses.
func TestElemsSizeBoundsTheElementRequests(t *testing.T) {
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }
	v6 := func(i int) netip.Addr {
		return netip.AddrFrom16([16]byte{0xfd, 15: byte(i), 14: byte(i >> 8), 13: byte(i >> 16)})
	}
	cases := []struct {
		name   string
		family ipfamily.Family
		set    Set
		elem   func(i int) Element
		// slack is how much larger than written the bound may be.
		slack float64
	}{
		{"addresses", ipfamily.IPv4, Set{Key: []KeyType{TypeAddr}},
			func(i int) Element { return Elem(Addr(v4(i))) }, 1.02},
		{"ipv6 addresses", ipfamily.IPv6, Set{Key: []KeyType{TypeAddr}},
			func(i int) Element { return Elem(Addr(v6(i))) }, 1.02},
		{"prefixes", ipfamily.IPv4, Set{Key: []KeyType{TypeAddr}, Interval: true},
			func(i int) Element { return Elem(Prefix(netip.PrefixFrom(v4(i*4), 30))) }, 1.3},
		{"service map", ipfamily.IPv4, Set{Key: []KeyType{TypeAddr, TypeProto, TypePort}, Verdict: true},
			func(i int) Element {
				return Element{Key: []Value{Addr(v4(i)), Proto(netfilter.ProtoTCP), Port(80)}, Verdict: netfilter.Goto(fmt.Sprintf("svc-%05d", i))}
			}, 1.1},
		{"ranges of address and port", ipfamily.IPv4, Set{Key: []KeyType{TypeAddr, TypePort}, Interval: true},
			func(i int) Element {
				return Elem(Prefix(netip.PrefixFrom(v4(i*256), 24)), PortRange(netfilter.PortRange{First: 80, Last: 90}))
			}, 1.1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tbl, err := New(Options{Name: "np", Family: c.family, Role: Filter})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{1, 7, 5000} {
				for _, probes := range []int{0, 3} {
					c.set.Name, c.set.Elements = "s", nil
					for i := range n {
						c.set.Elements = append(c.set.Elements, c.elem(i))
					}
					sp, err := newSpec(&c.set, c.family)
					if err != nil {
						t.Fatal(err)
					}
					var es []elemAdd
					for i, e := range c.set.Elements {
						k, d, _, err := tbl.encodeElement(&sp, "s", e, false, nil)
						if err != nil {
							t.Fatal(err)
						}
						es = append(es, elemAdd{set: "s", spec: &sp, key: k, data: d, probe: i < probes})
					}
					p := &planner{t: tbl}
					bound := p.elemsSize(es)
					x := p.elemTxn(es)
					written := x.w.Len() - frameLen
					if written > bound {
						t.Errorf("%d elements (%d probed): %d bytes written, bound %d", n, probes, written, bound)
					}
					if n == 5000 && probes == 0 && float64(bound) > c.slack*float64(written) {
						t.Errorf("%d elements: bound %d for %d bytes written", n, bound, written)
					}
					if len(x.msgs) == 0 || len(x.msgs[0].elems) != len(x.msgs[0].offs) {
						t.Errorf("requests without their elements' offsets")
					}
				}
			}
		})
	}
}

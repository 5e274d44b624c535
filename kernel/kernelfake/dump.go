package kernelfake

import (
	"fmt"
	"strings"

	"github.com/nodeplane/nodeplane/kernel"
)

// Dump returns the whole state in a compact, stable text form for
// debugging and test failure messages: links with their addresses, the
// routes of every table, the rules, neighbours, FDB entries and
// conntrack entries.
func (ns *Namespace) Dump() string {
	defer ns.lock()()
	s := ns.s
	var b strings.Builder
	fmt.Fprintf(&b, "namespace %s\n", s.name)
	for _, l := range s.sortedLinks() {
		state := "down"
		if l.AdminUp {
			state = "up"
		}
		if l.Running {
			state += ",running"
		}
		fmt.Fprintf(&b, "link %d %s %s mtu %d %s", l.Index, l.Name, l.Kind, l.MTU, state)
		if l.MAC != nil {
			fmt.Fprintf(&b, " mac %v", l.MAC)
		}
		if l.peer != nil {
			fmt.Fprintf(&b, " peer %s/%s", l.peer.ns.name, l.peer.Name)
		}
		b.WriteByte('\n')
		for _, fam := range []kernel.Family{kernel.IPv4, kernel.IPv6} {
			for _, a := range l.ordered(fam) {
				fmt.Fprintf(&b, "  addr %v", a.prefix)
				if a.tentative {
					b.WriteString(" tentative")
				}
				b.WriteByte('\n')
			}
		}
	}
	for _, fam := range []kernel.Family{kernel.IPv4, kernel.IPv6} {
		for _, r := range s.sorted(fam, 0) {
			fmt.Fprintf(&b, "route %s\n", s.routeString(r))
		}
	}
	for _, fam := range []kernel.Family{kernel.IPv4, kernel.IPv6} {
		for _, r := range s.rules[fam] {
			fmt.Fprintf(&b, "rule %v %d action %d table %d", fam, r.Priority, r.Action, r.Table)
			if r.Src.IsValid() || r.Dst.IsValid() {
				fmt.Fprintf(&b, " from %v to %v", r.Src, r.Dst)
			}
			if r.Mark != 0 || r.Mask != 0 {
				fmt.Fprintf(&b, " fwmark %#x/%#x", r.Mark, r.Mask)
			}
			b.WriteByte('\n')
		}
	}
	for _, n := range s.neighs {
		fmt.Fprintf(&b, "neigh %v dev %s lladdr %v nud %#x", n.IP, s.linkName(n.LinkIndex), n.MAC, n.State)
		if n.Protocol != 0 {
			fmt.Fprintf(&b, " proto %d", n.Protocol)
		}
		b.WriteString("\n")
	}
	for _, e := range s.fdb {
		fmt.Fprintf(&b, "fdb %v dev %s dst %v permanent %v\n", e.MAC, s.linkName(e.LinkIndex), e.Dst, e.Permanent)
	}
	for _, f := range s.flows {
		fmt.Fprintf(&b, "flow %v %v -> %v\n", f.Family, f.Src, f.Dst)
	}
	return b.String()
}

// linkName returns the name of the link with index, or its number.
func (s *state) linkName(index int) string {
	if l := s.links[index]; l != nil {
		return l.Name
	}
	return fmt.Sprintf("#%d", index)
}

// routeString formats r in the manner of `ip route`.
func (s *state) routeString(r *kernel.Route) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %v table %d proto %d scope %d metric %d", typeName(r.Type), r.Dst, r.Table, r.Protocol, r.Scope, r.Priority)
	hop := func(oif int, gw kernel.NextHop) {
		if gw.Gateway.IsValid() {
			fmt.Fprintf(&b, " via %v", gw.Gateway)
		}
		if oif != 0 {
			fmt.Fprintf(&b, " dev %s", s.linkName(oif))
		}
		writeFlags(&b, gw.Flags)
	}
	hop(r.OIF, kernel.NextHop{Gateway: r.Gateway, Flags: r.Flags})
	for _, h := range r.NextHops {
		b.WriteString(" nexthop")
		hop(h.OIF, h)
	}
	if r.PrefSrc.IsValid() {
		fmt.Fprintf(&b, " src %v", r.PrefSrc)
	}
	if r.MTU != 0 {
		fmt.Fprintf(&b, " mtu %d", r.MTU)
	}
	return b.String()
}

func writeFlags(b *strings.Builder, f uint32) {
	for _, n := range []struct {
		flag uint32
		name string
	}{{kernel.FlagOnlink, "onlink"}, {kernel.FlagDead, "dead"}, {kernel.FlagLinkdown, "linkdown"}} {
		if f&n.flag != 0 {
			b.WriteString(" " + n.name)
		}
	}
}

func typeName(t uint8) string {
	switch t {
	case kernel.RTNUnicast:
		return "unicast"
	case kernel.RTNLocal:
		return "local"
	case kernel.RTNBroadcast:
		return "broadcast"
	case kernel.RTNMulticast:
		return "multicast"
	case kernel.RTNBlackhole:
		return "blackhole"
	case kernel.RTNUnreachable:
		return "unreachable"
	case kernel.RTNProhibit:
		return "prohibit"
	case kernel.RTNThrow:
		return "throw"
	}
	return fmt.Sprintf("type%d", t)
}

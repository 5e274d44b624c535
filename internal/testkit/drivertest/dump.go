package drivertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/kernel"
)

// The helpers below are for Subjects: they render kernel objects as Dump
// and Check compare them, one line per object with every attribute the
// kernel reports, and run what an administrator would. Each fails t on an
// error of the namespace.

// Routes returns the routes of family in the namespace, in dump order,
// rendered by FormatRoute: those of tables (every table but local when
// none is given, since local holds routes for addresses that differ from
// namespace to namespace, such as link-local ones).
func Routes(t testing.TB, k kernel.Kernel, family kernel.Family, tables ...uint32) []string {
	t.Helper()
	names := linkNames(t, k)
	var out []string
	err := k.DumpRoutes(context.Background(), family, 0, func(r *kernel.Route) error {
		if (len(tables) == 0 && r.Table != kernel.TableLocal) || slices.Contains(tables, r.Table) {
			out = append(out, FormatRoute(r, names))
		}
		return nil
	}, func() { out = nil })
	if err != nil {
		t.Fatalf("drivertest: dumping routes: %v", err)
	}
	return out
}

var routeTypes = map[uint8]string{kernel.RTNUnicast: "unicast", kernel.RTNLocal: "local", kernel.RTNBroadcast: "broadcast",
	kernel.RTNAnycast: "anycast", kernel.RTNMulticast: "multicast", kernel.RTNBlackhole: "blackhole",
	kernel.RTNUnreachable: "unreachable", kernel.RTNProhibit: "prohibit", kernel.RTNThrow: "throw"}

// FormatRoute renders a route as "table T DST metric M TYPE [tos X] [via
// GW] [dev NAME] [src S] [mtu N] [onlink] [linkdown] [dead] [nexthop via
// GW dev NAME weight W [onlink]…] proto P scope S", naming interfaces by
// names (index to name). The device of a route of another type than
// unicast and local (an IPv6 blackhole sits on lo) is left out, and next
// hops are sorted by gateway.
func FormatRoute(r *kernel.Route, names map[int]string) string {
	var b strings.Builder
	typ, ok := routeTypes[r.Type]
	if !ok {
		typ = fmt.Sprintf("type%d", r.Type)
	}
	fmt.Fprintf(&b, "table %d %v metric %d %s", r.Table, r.Dst, r.Priority, typ)
	if r.TOS != 0 {
		fmt.Fprintf(&b, " tos %#x", r.TOS)
	}
	if r.Gateway.IsValid() {
		b.WriteString(" via " + r.Gateway.String())
	}
	if r.OIF != 0 && (r.Type == kernel.RTNUnicast || r.Type == kernel.RTNLocal) {
		b.WriteString(" dev " + name(names, r.OIF))
	}
	if r.PrefSrc.IsValid() {
		b.WriteString(" src " + r.PrefSrc.String())
	}
	if r.MTU != 0 {
		fmt.Fprintf(&b, " mtu %d", r.MTU)
	}
	flags(&b, r.Flags)
	hops := slices.Clone(r.NextHops)
	slices.SortFunc(hops, func(a, b kernel.NextHop) int { return a.Gateway.Compare(b.Gateway) })
	for _, h := range hops {
		fmt.Fprintf(&b, " nexthop via %v dev %s weight %d", h.Gateway, name(names, h.OIF), int(h.Weight)+1)
		flags(&b, h.Flags)
	}
	fmt.Fprintf(&b, " proto %d scope %d", r.Protocol, r.Scope)
	return b.String()
}

func flags(b *strings.Builder, f uint32) {
	for _, fl := range []struct {
		bit  uint32
		name string
	}{{kernel.FlagOnlink, "onlink"}, {kernel.FlagLinkdown, "linkdown"}, {kernel.FlagDead, "dead"}} {
		if f&fl.bit != 0 {
			b.WriteString(" " + fl.name)
		}
	}
}

// Rules returns the routing policy rules of family, in the kernel's
// order, rendered by FormatRule.
func Rules(t testing.TB, k kernel.Kernel, family kernel.Family) []string {
	t.Helper()
	rules, err := k.Rules(context.Background(), family)
	if err != nil {
		t.Fatalf("drivertest: listing rules: %v", err)
	}
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = FormatRule(r)
	}
	return out
}

// FormatRule renders a rule as "PRIORITY: [not] [from SRC] [to DST]
// [fwmark M/MASK] [iif I] [oif O] ACTION", then every other attribute that
// is set, then "proto P".
func FormatRule(r kernel.Rule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d:", r.Priority)
	if r.Invert {
		b.WriteString(" not")
	}
	if r.Src.IsValid() {
		fmt.Fprintf(&b, " from %v", r.Src)
	}
	if r.Dst.IsValid() {
		fmt.Fprintf(&b, " to %v", r.Dst)
	}
	if r.Mark != 0 || r.Mask != 0 {
		fmt.Fprintf(&b, " fwmark %#x/%#x", r.Mark, r.Mask)
	}
	if r.IIF != "" {
		fmt.Fprintf(&b, " iif %s", r.IIF)
	}
	if r.OIF != "" {
		fmt.Fprintf(&b, " oif %s", r.OIF)
	}
	switch r.Action {
	case kernel.RuleLookup:
		fmt.Fprintf(&b, " lookup %d", r.Table)
	case kernel.RuleGoto:
		fmt.Fprintf(&b, " goto %d", r.Goto)
	default:
		fmt.Fprintf(&b, " action %d", r.Action)
	}
	extra := []struct {
		set  bool
		text string
	}{
		{r.TOS != 0, fmt.Sprintf("tos %#x", r.TOS)},
		{r.IPProto != 0, fmt.Sprintf("ipproto %d", r.IPProto)},
		{r.SrcPorts != (kernel.PortRange{}), fmt.Sprintf("sport %d-%d", r.SrcPorts.Start, r.SrcPorts.End)},
		{r.DstPorts != (kernel.PortRange{}), fmt.Sprintf("dport %d-%d", r.DstPorts.Start, r.DstPorts.End)},
		{r.UID.Set, fmt.Sprintf("uidrange %d-%d", r.UID.Start, r.UID.End)},
		{r.SuppressPrefixLen.Set, fmt.Sprintf("suppress_prefixlength %d", r.SuppressPrefixLen.Value)},
		{r.SuppressIfGroup.Set, fmt.Sprintf("suppress_ifgroup %d", r.SuppressIfGroup.Value)},
		{r.Realm != 0, fmt.Sprintf("realm %d", r.Realm)},
		{r.TunID != 0, fmt.Sprintf("tun_id %d", r.TunID)},
	}
	for _, e := range extra {
		if e.set {
			b.WriteString(" " + e.text)
		}
	}
	fmt.Fprintf(&b, " proto %d", r.Protocol)
	return b.String()
}

// PermanentNeighbors returns the permanent neighbour entries of family
// (the ones an agent writes; the others come and go with traffic) as
// "neigh IP dev NAME lladdr MAC", by interface and address as the kernel
// lists them.
func PermanentNeighbors(t testing.TB, k kernel.Kernel, family kernel.Family) []string {
	t.Helper()
	names := linkNames(t, k)
	ns, err := k.Neighbors(context.Background(), family, 0)
	if err != nil {
		t.Fatalf("drivertest: listing neighbours: %v", err)
	}
	var out []string
	for _, n := range ns {
		if n.State&kernel.NUDPermanent != 0 {
			out = append(out, fmt.Sprintf("neigh %v dev %s lladdr %v", n.IP, name(names, n.LinkIndex), n.MAC))
		}
	}
	return out
}

// Exec runs a binary in the namespace (through its Runner, as another
// agent would) and returns its standard output.
func Exec(t testing.TB, k kernel.Kernel, name string, args ...string) string {
	t.Helper()
	out, err := k.Runner().Run(context.Background(), nil, name, args...)
	if err != nil {
		t.Fatalf("drivertest: %s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out)
}

// SameLines fails t unless got and want hold the same lines, in any
// order, and says which differ.
func SameLines(t testing.TB, what string, got, want []string) {
	t.Helper()
	extra, missing := minus(got, want), minus(want, got)
	if len(extra)+len(missing) > 0 {
		t.Errorf("%s differ:\nunexpected:\n\t%s\nmissing:\n\t%s", what, strings.Join(extra, "\n\t"), strings.Join(missing, "\n\t"))
	}
}

// WaitFor waits until cond holds, for what the kernel does asynchronously
// (a veth's carrier, an address leaving the tentative state), and fails t
// if it never does. The bound is generous and no timing assertion: the
// wait ends as soon as cond holds.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("drivertest: waiting for %s: gave up", what)
		}
	}
}

func linkNames(t testing.TB, k kernel.Kernel) map[int]string {
	t.Helper()
	links, err := k.Links(context.Background())
	if err != nil {
		t.Fatalf("drivertest: listing links: %v", err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Index] = l.Name
	}
	return names
}

func name(names map[int]string, index int) string {
	if n, ok := names[index]; ok {
		return n
	}
	return fmt.Sprintf("if%d", index)
}

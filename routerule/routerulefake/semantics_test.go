package routerulefake_test

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
)

// kernelAPI is what both the fake and a *netlink.Handle serve.
type kernelAPI interface {
	RuleList(family int) ([]netlink.Rule, error)
	RuleAdd(rule *netlink.Rule) error
	RuleDel(rule *netlink.Rule) error
}

// step is one netlink call and the errno the kernel answers it with (0 for
// success).
type step struct {
	name string
	add  bool // RuleAdd, else RuleDel
	rule func() *netlink.Rule
	want syscall.Errno
}

// mk builds a rule: family, priority, table, then modifiers.
func mk(fam, prio, table int, mods ...func(*netlink.Rule)) func() *netlink.Rule {
	return func() *netlink.Rule {
		r := netlink.NewRule()
		r.Family, r.Priority, r.Table = fam, prio, table
		for _, m := range mods {
			m(r)
		}
		return r
	}
}

func src(cidr string) func(*netlink.Rule) {
	return func(r *netlink.Rule) { _, r.Src, _ = net.ParseCIDR(cidr) }
}
func dst(cidr string) func(*netlink.Rule) {
	return func(r *netlink.Rule) { _, r.Dst, _ = net.ParseCIDR(cidr) }
}
func mark(m uint32, mask ...uint32) func(*netlink.Rule) {
	return func(r *netlink.Rule) {
		r.Mark = m
		if len(mask) > 0 {
			r.Mask = &mask[0]
		}
	}
}
func typ(t uint8) func(*netlink.Rule)   { return func(r *netlink.Rule) { r.Type = t } }
func goTo(p int) func(*netlink.Rule)    { return func(r *netlink.Rule) { r.Goto = p } }
func iif(n string) func(*netlink.Rule)  { return func(r *netlink.Rule) { r.IifName = n } }
func proto(p uint8) func(*netlink.Rule) { return func(r *netlink.Rule) { r.Protocol = p } }
func invert() func(*netlink.Rule)       { return func(r *netlink.Rule) { r.Invert = true } }
func noPriority() func(*netlink.Rule)   { return func(r *netlink.Rule) { r.Priority = -1 } }
func ipproto(p int) func(*netlink.Rule) { return func(r *netlink.Rule) { r.IPProto = p } }
func dport(a, b uint16) func(*netlink.Rule) {
	return func(r *netlink.Rule) { r.Dport = netlink.NewRulePortRange(a, b) }
}

const (
	v4 = netlink.FAMILY_V4
	v6 = netlink.FAMILY_V6
)

// steps exercise the kernel behaviours the fake reproduces. The expected
// errnos were observed on kernel 6.18; TestKernelFakeMatchesKernel checks
// them (and every intermediate dump) against the running kernel.
var steps = []step{
	{"lookup", true, mk(v4, 100, 100), 0},
	{"exact duplicate", true, mk(v4, 100, 100), syscall.EEXIST},
	{"narrower after catch-all", true, mk(v4, 100, 100, src("10.0.0.0/8")), 0},
	{"narrower first", true, mk(v4, 200, 100, src("10.0.0.0/8")), 0},
	{"catch-all after narrower is a duplicate", true, mk(v4, 200, 100), syscall.EEXIST},
	{"destination does not block a source", true, mk(v4, 200, 100, dst("10.0.0.0/8")), 0},
	{"inverted mark", true, mk(v4, 100, 100, mark(1, 1), invert()), 0},
	{"invert is not compared", true, mk(v4, 100, 100, mark(1, 1)), syscall.EEXIST},
	{"goto", true, mk(v4, 100, 0, goTo(300)), 0},
	{"goto target is not compared", true, mk(v4, 100, 0, goTo(400)), syscall.EEXIST},
	{"backward goto", true, mk(v4, 100, 0, goTo(50)), syscall.EINVAL},
	{"blackhole", true, mk(v4, 100, 0, typ(6)), 0},
	{"prohibit beside blackhole", true, mk(v4, 100, 0, typ(8)), 0},
	{"unreachable", true, mk(v4, 100, 0, typ(7)), 0},
	{"mark 0 with mask", true, mk(v4, 70, 100, mark(0, 4)), 0},
	{"mark with the same mask", true, mk(v4, 70, 100, mark(4, 4)), 0},
	{"default mask equals full mask", true, mk(v4, 70, 100, mark(4)), 0},
	{"explicit full mask is a duplicate", true, mk(v4, 70, 100, mark(4, 0xffffffff)), syscall.EEXIST},
	{"iif", true, mk(v4, 60, 100, iif("lo")), 0},
	{"no iif after iif", true, mk(v4, 60, 100), 0},
	{"protocol is compared", true, mk(v4, 60, 100, proto(99)), 0},
	{"ports and ip proto", true, mk(v4, 80, 100, ipproto(6), dport(80, 80)), 0},
	{"default priority", true, mk(v4, 0, 555, noPriority()), 0},

	{"delete hits the first match: iif lo", false, mk(v4, 60, 100), 0},
	{"delete with protocol", false, mk(v4, 60, 100, proto(99)), 0},
	{"delete the blackhole only", false, mk(v4, 100, 0, typ(6)), 0},
	{"delete goto by another target", false, mk(v4, 100, 0, goTo(999)), 0},
	{"delete without invert hits the inverted rule", false, mk(v4, 100, 100, mark(1, 1)), 0},
	{"delete mark 0/4 wildcards the mark", false, mk(v4, 70, 100, mark(0, 4)), 0},
	{"delete catch-all template hits the narrower rule first", false, mk(v4, 200, 100), 0},
	{"delete missing", false, mk(v4, 777, 5), syscall.ENOENT},
	{"delete wrong action", false, mk(v4, 100, 0, typ(6)), syscall.ENOENT},
	{"delete by ports", false, mk(v4, 80, 100, dport(80, 80)), 0},

	{"v6 lookup", true, mk(v6, 100, 100, src("fd00::/64")), 0},
	{"v6 catch-all after narrower", true, mk(v6, 100, 100), syscall.EEXIST},
	{"v6 destination", true, mk(v6, 100, 100, dst("fd00:1::/64")), 0},
	{"v6 blackhole", true, mk(v6, 101, 0, typ(6), mark(2)), 0},
	{"v6 delete", false, mk(v6, 100, 100, dst("fd00:1::/64")), 0},
	{"v6 delete blackhole as prohibit", false, mk(v6, 101, 0, typ(8)), syscall.ENOENT},
}

// format prints every field netlink reports, so dumps can be compared.
func format(rules []netlink.Rule) []string {
	var out []string
	for _, r := range rules {
		var b strings.Builder
		fmt.Fprintf(&b, "fam=%d prio=%d table=%d goto=%d type=%d inv=%v src=%v dst=%v mark=%#x",
			r.Family, r.Priority, r.Table, r.Goto, r.Type, r.Invert, r.Src, r.Dst, r.Mark)
		if r.Mask != nil {
			fmt.Fprintf(&b, "/%#x", *r.Mask)
		}
		fmt.Fprintf(&b, " iif=%q oif=%q tos=%d flow=%d tun=%d proto=%d ipproto=%d supp=%d/%d",
			r.IifName, r.OifName, r.Tos, r.Flow, r.TunID, r.Protocol, r.IPProto, r.SuppressPrefixlen, r.SuppressIfgroup)
		if r.Dport != nil {
			fmt.Fprintf(&b, " dport=%d-%d", r.Dport.Start, r.Dport.End)
		}
		if r.Sport != nil {
			fmt.Fprintf(&b, " sport=%d-%d", r.Sport.Start, r.Sport.End)
		}
		out = append(out, b.String())
	}
	return out
}

func errno(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// runSteps runs steps against k and returns, after each, the errno and the
// dump of both families.
func runSteps(t *testing.T, k kernelAPI) (errs []syscall.Errno, dumps [][]string) {
	t.Helper()
	for _, s := range steps {
		var err error
		if s.add {
			err = k.RuleAdd(s.rule())
		} else {
			err = k.RuleDel(s.rule())
		}
		if err != nil {
			require.NotZero(t, errno(err), "%s: %v is not an errno", s.name, err)
		}
		errs = append(errs, errno(err))
		var dump []string
		for _, fam := range []int{v4, v6} {
			rules, lerr := k.RuleList(fam)
			require.NoError(t, lerr)
			dump = append(dump, format(rules)...)
		}
		dumps = append(dumps, dump)
	}
	return errs, dumps
}

package kernelfake

import (
	"net/netip"
	"slices"
	"syscall"

	"github.com/nodeplane/nodeplane/internal/fib"
	"github.com/nodeplane/nodeplane/kernel"
)

// This file holds how the kernel walks the policy rules for a gateway
// check's lookup (ruleLookup), the one part of the rule semantics only the
// fake needs. How rules are stored, ordered, compared on add and matched on
// delete is internal/fib, shared with the routerule driver; the names below
// are its functions under the names the rest of the package uses. A lookup
// walks the rules in order: a rule whose selectors match the flow acts —
// lookup (a result is suppressed by suppress_prefixlength or
// suppress_ifgroup, and the walk goes on), goto (to the rule with exactly
// the target priority; a goto without one is skipped), nop, or blackhole,
// unreachable and prohibit, which end the lookup with EINVAL, ENETUNREACH
// and EACCES. Checked against kernel 6.18.

var (
	storedRule          = fib.Stored
	ruleExists          = fib.Exists
	ruleDeleteMatches   = fib.DeleteMatches
	insertRule          = fib.Insert
	defaultRulePriority = fib.DefaultPriority
)

// defaultRules returns the rules of a fresh namespace (fib.Defaults).
func defaultRules() map[kernel.Family][]kernel.Rule {
	return map[kernel.Family][]kernel.Rule{kernel.IPv4: fib.Defaults(kernel.IPv4), kernel.IPv6: fib.Defaults(kernel.IPv6)}
}

// ruleLookup walks the rules of family for the flow of a gateway check
// (destination dst, no source, no mark, input lo for IPv4, output oif)
// and returns the route the first lookup rule finds with lookup (a table
// lookup), or the errno the walk ends with: ENETUNREACH when nothing
// matched, or the drop action's error.
func (s *state) ruleLookup(family kernel.Family, dst netip.Addr, oif int, lookup func(table uint32) *kernel.Route) (*kernel.Route, syscall.Errno) {
	rules := s.rules[family]
	for i := 0; i < len(rules); i++ {
		r := &rules[i]
		if s.ruleMatches(r, dst, oif) == r.Invert {
			continue
		}
		switch r.Action {
		case kernel.RuleLookup:
			if res := lookup(r.Table); res != nil && !suppressed(r, res) {
				return res, 0
			}
		case kernel.RuleGoto:
			if j := slices.IndexFunc(rules, func(x kernel.Rule) bool { return x.Priority == r.Goto }); j > i {
				i = j - 1
			}
		case kernel.RuleBlackhole:
			return nil, syscall.EINVAL
		case kernel.RuleUnreachable:
			return nil, syscall.ENETUNREACH
		case kernel.RuleProhibit:
			return nil, syscall.EACCES
		}
	}
	return nil, syscall.ENETUNREACH
}

// ruleMatches reports whether r's selectors (before inversion) match the
// flow of a gateway check.
func (s *state) ruleMatches(r *kernel.Rule, dst netip.Addr, oif int) bool {
	iif := ""
	if r.Family == kernel.IPv4 {
		iif = "lo" // the kernel looks a gateway up as if from lo
	}
	oifName := ""
	if l := s.links[oif]; l != nil {
		oifName = l.Name
	}
	unspecified := netip.IPv4Unspecified()
	if r.Family == kernel.IPv6 {
		unspecified = netip.IPv6Unspecified()
	}
	return (!r.Src.IsValid() || r.Src.Contains(unspecified)) &&
		(!r.Dst.IsValid() || r.Dst.Contains(dst)) &&
		(r.IIF == "" || r.IIF == iif) &&
		(r.OIF == "" || r.OIF == oifName) &&
		r.Mark&r.Mask == 0 && r.TOS == 0 && r.IPProto == 0 && r.TunID == 0 &&
		r.SrcPorts == (kernel.PortRange{}) && r.DstPorts == (kernel.PortRange{}) &&
		(!r.UID.Set || r.UID.Start == 0)
}

// suppressed reports whether rule r suppresses the lookup result res: its
// prefix is no longer than suppress_prefixlength, or its interface is in
// suppress_ifgroup (every interface here is in group 0).
func suppressed(r *kernel.Rule, res *kernel.Route) bool {
	return (r.SuppressPrefixLen.Set && res.Dst.Bits() <= r.SuppressPrefixLen.Value) ||
		(r.SuppressIfGroup.Set && r.SuppressIfGroup.Value == 0)
}

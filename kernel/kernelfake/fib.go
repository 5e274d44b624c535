package kernelfake

import (
	"net/netip"
	"slices"
	"syscall"

	"github.com/nodeplane/nodeplane/kernel"
)

// This file models how the kernel stores, compares and deletes routing
// policy rules (fib rules), for Rules, AddRule and DeleteRule. It is kept
// apart so that it can give way to the shared model of the routerule
// driver (routerule/internal/fib) once that moves where every package can
// use it. The facts, checked against kernel 6.18:
//
//   - the rules of a family form one list ordered by priority; a new rule
//     goes after every rule of its priority;
//   - an add (NLM_F_EXCL) fails with EEXIST when a rule has every
//     attribute equal to the request's, except that the invert flag and
//     the goto target are not compared and that a source, destination,
//     TOS or realm the request leaves out matches any;
//   - a delete removes the first rule, in list order, that matches every
//     attribute the request sets; unset (zero, or -1 for the suppressors)
//     attributes match anything, and the invert flag and the goto target
//     are never compared;
//   - a mark without a mask is stored with the mask 0xffffffff;
//   - a lookup (ruleLookup) walks the rules in order: a rule whose
//     selectors match the flow acts — lookup (a result is suppressed by
//     suppress_prefixlength or suppress_ifgroup, and the walk goes on),
//     goto (to the rule with exactly the target priority; a goto without
//     one is skipped), nop, or blackhole, unreachable and prohibit, which
//     end the lookup with EINVAL, ENETUNREACH and EACCES.

// defaultRules returns the rules of a fresh namespace: for IPv4 "0: lookup
// local", "32766: lookup main" and "32767: lookup default"; for IPv6
// "0: lookup local" and "32766: lookup main", all with protocol kernel.
func defaultRules() map[kernel.Family][]kernel.Rule {
	rule := func(fam kernel.Family, prio, table uint32) kernel.Rule {
		return kernel.Rule{Family: fam, Priority: prio, Action: kernel.RuleLookup, Table: table,
			Protocol: kernel.ProtoKernel}
	}
	return map[kernel.Family][]kernel.Rule{
		kernel.IPv4: {rule(kernel.IPv4, 0, kernel.TableLocal), rule(kernel.IPv4, 32766, kernel.TableMain), rule(kernel.IPv4, 32767, kernel.TableDefault)},
		kernel.IPv6: {rule(kernel.IPv6, 0, kernel.TableLocal), rule(kernel.IPv6, 32766, kernel.TableMain)},
	}
}

// defaultRulePriority is the priority the kernel gives a rule added
// without one (Priority 0): one less than the second rule's, or 0.
func defaultRulePriority(list []kernel.Rule) uint32 {
	if len(list) >= 2 && list[1].Priority > 0 {
		return list[1].Priority - 1
	}
	return 0
}

// storedRule returns r as the kernel stores it (and reads a request).
func storedRule(r kernel.Rule) kernel.Rule {
	if r.Mark != 0 && r.Mask == 0 {
		r.Mask = 0xffffffff
	}
	if r.Action != kernel.RuleGoto {
		r.Goto = 0
	}
	return r
}

// ruleSelectorsMatch is the kernel's address compare: the request's
// source, destination, TOS and realm match anything when unset.
func ruleSelectorsMatch(req, r *kernel.Rule) bool {
	return (!req.Src.IsValid() || req.Src == r.Src) &&
		(!req.Dst.IsValid() || req.Dst == r.Dst) &&
		(req.TOS == 0 || req.TOS == r.TOS) &&
		(req.Realm == 0 || req.Realm == r.Realm)
}

// ruleExists reports whether the kernel refuses to add req because of r.
func ruleExists(req, r *kernel.Rule) bool {
	return req.Action == r.Action && req.Table == r.Table && req.Priority == r.Priority &&
		req.IIF == r.IIF && req.OIF == r.OIF && req.Mark == r.Mark && req.Mask == r.Mask &&
		req.SuppressIfGroup == r.SuppressIfGroup && req.SuppressPrefixLen == r.SuppressPrefixLen &&
		req.TunID == r.TunID && req.UID == r.UID && req.IPProto == r.IPProto && req.Protocol == r.Protocol &&
		req.SrcPorts == r.SrcPorts && req.DstPorts == r.DstPorts && ruleSelectorsMatch(req, r)
}

// ruleDeleteMatches reports whether a delete request req matches r.
func ruleDeleteMatches(req, r *kernel.Rule) bool {
	return (req.Action == 0 || req.Action == r.Action) &&
		(req.Table == 0 || req.Table == r.Table) &&
		(req.Priority == 0 || req.Priority == r.Priority) &&
		(req.IIF == "" || req.IIF == r.IIF) &&
		(req.OIF == "" || req.OIF == r.OIF) &&
		(req.Mark == 0 || req.Mark == r.Mark) &&
		(req.Mask == 0 || req.Mask == r.Mask) &&
		(!req.SuppressIfGroup.Set || req.SuppressIfGroup == r.SuppressIfGroup) &&
		(!req.SuppressPrefixLen.Set || req.SuppressPrefixLen == r.SuppressPrefixLen) &&
		(req.TunID == 0 || req.TunID == r.TunID) &&
		(!req.UID.Set || req.UID == r.UID) &&
		(req.IPProto == 0 || req.IPProto == r.IPProto) &&
		(req.Protocol == 0 || req.Protocol == r.Protocol) &&
		(req.SrcPorts == kernel.PortRange{} || req.SrcPorts == r.SrcPorts) &&
		(req.DstPorts == kernel.PortRange{} || req.DstPorts == r.DstPorts) &&
		ruleSelectorsMatch(req, r)
}

// insertRule returns list with r after every rule of r's priority.
func insertRule(list []kernel.Rule, r kernel.Rule) []kernel.Rule {
	at := slices.IndexFunc(list, func(x kernel.Rule) bool { return x.Priority > r.Priority })
	if at < 0 {
		at = len(list)
	}
	return slices.Insert(list, at, r)
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

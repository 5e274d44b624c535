package fib

import (
	"slices"

	"github.com/nodeplane/nodeplane/kernel"
)

// fullMask is the mask the kernel gives a mark written without one.
const fullMask = 0xffffffff

// Defaults returns the rules of a fresh network namespace, in the kernel's
// order: for IPv4 "0: lookup local", "32766: lookup main" and "32767:
// lookup default"; for IPv6 "0: lookup local" and "32766: lookup main"; all
// with protocol kernel.
func Defaults(family kernel.Family) []kernel.Rule {
	rule := func(prio, table uint32) kernel.Rule {
		return kernel.Rule{Family: family, Priority: prio, Action: kernel.RuleLookup, Table: table,
			Protocol: kernel.ProtoKernel}
	}
	out := []kernel.Rule{rule(0, kernel.TableLocal), rule(32766, kernel.TableMain)}
	if family == kernel.IPv4 {
		out = append(out, rule(32767, kernel.TableDefault))
	}
	return out
}

// DefaultPriority is the priority the kernel gives a rule added without
// one (Priority 0) to the list of its family: one less than the second
// rule's, or 0.
func DefaultPriority(list []kernel.Rule) uint32 {
	if len(list) >= 2 && list[1].Priority > 0 {
		return list[1].Priority - 1
	}
	return 0
}

// Stored returns r as the kernel reads a request for it, add or delete, and
// as it stores an added rule: a mark without a mask gets the full mask, and
// a rule whose action is not goto has no goto target.
func Stored(r kernel.Rule) kernel.Rule {
	if r.Mark != 0 && r.Mask == 0 {
		r.Mask = fullMask
	}
	if r.Action != kernel.RuleGoto {
		r.Goto = 0
	}
	return r
}

// selectorsMatch is the kernel's per-family compare: the request's source,
// destination, TOS and realm match anything when unset.
func selectorsMatch(req, r *kernel.Rule) bool {
	return (!req.Src.IsValid() || req.Src == r.Src) &&
		(!req.Dst.IsValid() || req.Dst == r.Dst) &&
		(req.TOS == 0 || req.TOS == r.TOS) &&
		(req.Realm == 0 || req.Realm == r.Realm)
}

// Exists reports whether the kernel refuses to add req (NLM_F_EXCL, with
// EEXIST) because of the stored rule r. Both are in Stored form, and req
// has its priority (DefaultPriority when it was sent without one).
func Exists(req, r *kernel.Rule) bool {
	return req.Family == r.Family && req.Action == r.Action && req.Table == r.Table &&
		req.Priority == r.Priority && req.IIF == r.IIF && req.OIF == r.OIF &&
		req.Mark == r.Mark && req.Mask == r.Mask &&
		req.SuppressIfGroup == r.SuppressIfGroup && req.SuppressPrefixLen == r.SuppressPrefixLen &&
		req.TunID == r.TunID && req.UID == r.UID && req.IPProto == r.IPProto && req.Protocol == r.Protocol &&
		req.SrcPorts == r.SrcPorts && req.DstPorts == r.DstPorts && selectorsMatch(req, r)
}

// DeleteMatches reports whether a delete request req (in Stored form)
// matches the stored rule r: every attribute req sets equals r's. The
// kernel deletes the first rule in list order that matches.
func DeleteMatches(req, r *kernel.Rule) bool {
	return req.Family == r.Family &&
		(req.Action == 0 || req.Action == r.Action) &&
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
		selectorsMatch(req, r)
}

// Insert returns list with r placed where the kernel puts a new rule:
// after every rule of r's priority (and before the first of a higher one).
func Insert(list []kernel.Rule, r kernel.Rule) []kernel.Rule {
	at := slices.IndexFunc(list, func(x kernel.Rule) bool { return x.Priority > r.Priority })
	if at < 0 {
		at = len(list)
	}
	return slices.Insert(list, at, r)
}

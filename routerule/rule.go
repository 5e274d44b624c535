package routerule

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/ifname"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
)

// Family is the address family of a Rules instance and its rules: one
// instance per family. It is ipfamily.Family, shared by every nodeplane
// package.
type Family = ipfamily.Family

// The address families.
const (
	// IPv4 is the inet family (`ip -4 rule`).
	IPv4 = ipfamily.IPv4
	// IPv6 is the inet6 family (`ip -6 rule`).
	IPv6 = ipfamily.IPv6
)

// Action is what a rule does with the packets it matches: one of
// ActionLookup, ActionGoto and ActionBlackhole (or a pointer to one).
type Action interface {
	// String returns the action as `ip rule` prints it.
	String() string
	kind() actionKind
}

type actionKind uint8

const (
	kindNone actionKind = iota
	kindLookup
	kindGoto
	kindBlackhole
)

// ActionLookup looks the packet up in route table Table; when that table has
// no route for it, the kernel goes on with the next rule.
type ActionLookup struct {
	// Table is the route table, 1 to 2^32-1 (kernel.TableMain,
	// kernel.TableLocal and kernel.TableDefault included). 0 is not a
	// table.
	Table uint32
}

// String returns "lookup N" ("lookup main" for the well-known tables).
func (a ActionLookup) String() string {
	switch a.Table {
	case kernel.TableMain:
		return "lookup main"
	case kernel.TableLocal:
		return "lookup local"
	case kernel.TableDefault:
		return "lookup default"
	}
	return "lookup " + strconv.FormatUint(uint64(a.Table), 10)
}

func (ActionLookup) kind() actionKind { return kindLookup }

// ActionGoto jumps to the first rule with priority Priority, skipping the
// rules in between. The kernel supports forward jumps only: Priority must be
// greater than the rule's own. While no rule has priority Priority the
// kernel ignores the goto rule (it is "unresolved") and goes on with the
// next rule.
type ActionGoto struct {
	// Priority is the priority to continue at.
	Priority uint32
}

// String returns "goto N".
func (a ActionGoto) String() string { return "goto " + strconv.FormatUint(uint64(a.Priority), 10) }

func (ActionGoto) kind() actionKind { return kindGoto }

// ActionBlackhole drops the packet silently.
type ActionBlackhole struct{}

// String returns "blackhole".
func (ActionBlackhole) String() string { return "blackhole" }

func (ActionBlackhole) kind() actionKind { return kindBlackhole }

// Rule is one routing policy rule, as in `ip rule add`. Zero match fields
// match everything; a packet matches the rule when it matches every set
// field (or, with Invert, when it does not).
type Rule struct {
	// Priority orders the rules: the kernel tries them from the lowest
	// priority up. It must be one of the instance's owned priorities.
	Priority uint32
	// Src matches the source address; the zero Prefix (or a /0) matches
	// any. A prefix with host bits set (10.1.2.3/8 for 10.0.0.0/8) is
	// refused, as `ip route` refuses it for a route.
	Src netip.Prefix
	// Dst matches the destination address, like Src.
	Dst netip.Prefix
	// Mark and Mask match the packet's firewall mark: (mark & Mask) ==
	// Mark. A non-zero Mark with a zero Mask means the full mask
	// 0xffffffff; a zero Mark with a non-zero Mask matches packets whose
	// masked bits are all clear ("fwmark 0/0x4"). Mark may not have bits
	// outside Mask.
	Mark, Mask uint32
	// Invert negates the whole match (`ip rule add not …`): the action
	// applies to packets that do not match. It needs at least one match
	// field.
	Invert bool
	// IIF matches the input interface by name ("lo" for locally generated
	// packets); empty matches any. The interface need not exist.
	IIF string
	// OIF matches the output interface by name, for sockets bound to a
	// device; empty matches any.
	OIF string
	// Action is what the rule does: ActionLookup, ActionGoto or
	// ActionBlackhole. It is required.
	Action Action
}

// String returns the rule in `ip rule` syntax, such as
// "100: from 10.0.0.0/8 fwmark 0x10/0xff iif eth0 lookup 100". An invalid
// interface name is quoted. It never panics, whatever the rule holds.
func (r Rule) String() string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(uint64(r.Priority), 10))
	b.WriteString(": ")
	if r.Invert {
		b.WriteString("not ")
	}
	b.WriteString("from ")
	if r.Src.IsValid() && r.Src.Bits() > 0 {
		b.WriteString(r.Src.String())
	} else {
		b.WriteString("all")
	}
	if r.Dst.IsValid() && r.Dst.Bits() > 0 {
		b.WriteString(" to ")
		b.WriteString(r.Dst.String())
	}
	switch {
	case r.Mark == 0 && r.Mask != 0:
		fmt.Fprintf(&b, " fwmark 0/%#x", r.Mask)
	case r.Mark != 0 && (r.Mask == 0 || r.Mask == math.MaxUint32):
		fmt.Fprintf(&b, " fwmark %#x", r.Mark)
	case r.Mark != 0:
		fmt.Fprintf(&b, " fwmark %#x/%#x", r.Mark, r.Mask)
	}
	for _, i := range []struct{ kw, name string }{{"iif", r.IIF}, {"oif", r.OIF}} {
		switch {
		case i.name == "":
		case checkIfName(i.name) == nil:
			b.WriteString(" " + i.kw + " " + i.name)
		default:
			fmt.Fprintf(&b, " %s %q", i.kw, i.name)
		}
	}
	b.WriteByte(' ')
	b.WriteString(actionString(r.Action))
	return b.String()
}

// actionString formats an action, including nil and nil pointers.
func actionString(a Action) string {
	switch a := a.(type) {
	case nil:
		return "<no action>"
	case *ActionLookup:
		if a == nil {
			return "<nil lookup>"
		}
		return a.String()
	case *ActionGoto:
		if a == nil {
			return "<nil goto>"
		}
		return a.String()
	case *ActionBlackhole:
		if a == nil {
			return "<nil blackhole>"
		}
		return a.String()
	}
	return a.String()
}

// Validate checks what can be checked without an instance: the action, the
// addresses (same family on both sides, no IPv4-mapped IPv6), the mark and
// mask, the interface names and Invert. Rules.SetRule also checks the
// family and ownership.
func (r Rule) Validate() error {
	_, err := r.canonical(0)
	return err
}

// ruleError wraps ErrInvalidRule, and the extra sentinels without
// repeating their text, with the rule and a reason.
func ruleError(r Rule, reason string, extra ...error) error {
	return errs.Also(fmt.Errorf("%w: %s: %s", ErrInvalidRule, r, reason), extra...)
}

// canonical validates r and returns its canonical form: value actions, /0
// as unset, the default mask filled in. fam 0 accepts either family.
func (r Rule) canonical(fam Family) (Rule, error) {
	c := r
	switch a := r.Action.(type) {
	case nil:
		return Rule{}, ruleError(r, "no action")
	case ActionLookup:
		c.Action = a
	case *ActionLookup:
		if a == nil {
			return Rule{}, ruleError(r, "nil *ActionLookup")
		}
		c.Action = *a
	case ActionGoto:
		c.Action = a
	case *ActionGoto:
		if a == nil {
			return Rule{}, ruleError(r, "nil *ActionGoto")
		}
		c.Action = *a
	case ActionBlackhole:
		c.Action = a
	case *ActionBlackhole:
		if a == nil {
			return Rule{}, ruleError(r, "nil *ActionBlackhole")
		}
		c.Action = *a
	default:
		return Rule{}, ruleError(r, fmt.Sprintf("unsupported action type %T", a))
	}
	switch a := c.Action.(type) {
	case ActionLookup:
		if a.Table == 0 {
			return Rule{}, ruleError(r, "table 0 is not a route table")
		}
	case ActionGoto:
		if a.Priority <= r.Priority {
			return Rule{}, ruleError(r, "goto target must be greater than the rule's priority (the kernel only jumps forward)")
		}
	}
	if r.Priority == 0 {
		return Rule{}, ruleError(r, "priority 0 cannot be written (the kernel would choose a priority)")
	}

	var famSeen Family
	for _, side := range []struct {
		name string
		p    *netip.Prefix
	}{{"source", &c.Src}, {"destination", &c.Dst}} {
		p := *side.p
		if p == (netip.Prefix{}) {
			continue
		}
		if !p.IsValid() {
			return Rule{}, ruleError(r, "invalid "+side.name+" prefix")
		}
		if p.Addr().Is4In6() {
			return Rule{}, ruleError(r, side.name+" is an IPv4-mapped IPv6 prefix: write IPv4 prefixes in their own form")
		}
		pf := IPv4
		if p.Addr().Is6() {
			pf = IPv6
		}
		if famSeen != 0 && famSeen != pf {
			return Rule{}, ruleError(r, "source and destination are of different families")
		}
		famSeen = pf
		if fam != 0 && pf != fam {
			return Rule{}, ruleError(r, fmt.Sprintf("%s %s is not %s", side.name, p, fam))
		}
		if err := pf.CheckNet(p); err != nil {
			return Rule{}, ruleError(r, fmt.Sprintf("%s %s has host bits set (the network is %s)", side.name, p, p.Masked()), err)
		}
		if p.Bits() == 0 {
			*side.p = netip.Prefix{}
		}
	}

	if c.Mark != 0 && c.Mask == 0 {
		c.Mask = math.MaxUint32
	}
	if c.Mark&^c.Mask != 0 {
		return Rule{}, ruleError(r, fmt.Sprintf("fwmark %#x has bits outside mask %#x, so it never matches", c.Mark, c.Mask))
	}
	for _, side := range []struct{ name, v string }{{"iif", c.IIF}, {"oif", c.OIF}} {
		if err := checkIfName(side.v); err != nil {
			return Rule{}, ruleError(r, side.name+": "+err.Error())
		}
	}
	if c.Invert && !c.Src.IsValid() && !c.Dst.IsValid() && c.Mask == 0 && c.IIF == "" && c.OIF == "" {
		return Rule{}, ruleError(r, "Invert without any match field selects no packet")
	}
	return c, nil
}

// checkIfName applies the kernel's rules for interface names
// (ifname.Valid); empty is fine (no match).
func checkIfName(name string) error {
	if name == "" {
		return nil
	}
	return ifname.Valid(name)
}

// ruleKey is the kernel's identity of a rule: what it compares to refuse a
// duplicate. Two rules with the same key and a different Invert or goto
// target cannot be in the kernel together.
type ruleKey struct {
	priority   uint32
	src, dst   netip.Prefix
	mark, mask uint32
	iif, oif   string
	kind       actionKind
	table      uint32
}

// key returns the key of a canonical rule.
func (r Rule) key() ruleKey {
	k := ruleKey{
		priority: r.Priority, src: r.Src, dst: r.Dst, mark: r.Mark, mask: r.Mask,
		iif: r.IIF, oif: r.OIF, kind: r.Action.kind(),
	}
	if l, ok := r.Action.(ActionLookup); ok {
		k.table = l.Table
	}
	return k
}

// addrSpecificity counts the address fields a canonical rule sets. Within a
// priority, a rule must be added before any rule of the same target that
// sets more of them, or the kernel refuses it as a duplicate.
func (r Rule) addrSpecificity() int {
	n := 0
	if r.Src.IsValid() {
		n++
	}
	if r.Dst.IsValid() {
		n++
	}
	return n
}

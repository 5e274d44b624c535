//go:build linux

package kernel

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Rules are written and dumped with this package's own codec (a struct
// fib_rule_hdr and FRA_* attributes), through the same batch writer and
// dump as routes: the netlink library's rule dump drops the action (a
// blackhole rule and a nop rule look the same), and its writes send the
// suppressors only with tables below 256 and derive the family from the
// addresses, where Rule says exactly what is meant.

// ruleOp is one rule write: AddRule and DeleteRule are batches of one.
type ruleOp struct {
	kind OpKind
	rule *Rule
}

// ruleCodec is how applyOps writes rules.
var ruleCodec = &opCodec[ruleOp]{
	check:  func(op *ruleOp) error { return op.rule.check(op.kind) },
	encode: func(b []byte, seq uint32, op *ruleOp) []byte { return appendRuleMsg(b, op.kind, seq, op.rule) },
	describe: func(op *ruleOp) (string, string) {
		return op.kind.String() + " rule", ruleObject(op.rule)
	},
}

// ruleObject names a rule in an OpError.
func ruleObject(r *Rule) string {
	if r == nil {
		return "<nil>"
	}
	s := fmt.Sprintf("%v priority %d", r.Family, r.Priority)
	if r.Src.IsValid() {
		s += " from " + r.Src.String()
	}
	if r.Dst.IsValid() {
		s += " to " + r.Dst.String()
	}
	if r.Mark != 0 || r.Mask != 0 {
		s += fmt.Sprintf(" fwmark 0x%x/0x%x", r.Mark, r.Mask)
	}
	if r.Table != 0 {
		s += fmt.Sprintf(" table %d", r.Table)
	}
	return s
}

// appendRuleMsg appends one RTM_NEWRULE (OpAdd) or RTM_DELRULE (OpDelete)
// request for r. Zero fields are left out, so that a delete matches any
// value there; Priority 0 is left out too (an add then lets the kernel
// choose a priority), SuppressPrefixLen and SuppressIfGroup are sent when
// set, and the mark mask only when not 0 (a mark without a mask gets
// the kernel's full mask).
func appendRuleMsg(b []byte, kind OpKind, seq uint32, r *Rule) []byte {
	start := len(b)
	b = appendWriteHeader(b, kind, unix.RTM_NEWRULE, unix.RTM_DELRULE, writeFlags(kind), seq)
	table := uint8(unix.RT_TABLE_UNSPEC)
	if r.Table < 256 {
		table = uint8(r.Table)
	}
	var flags uint32
	if r.Invert {
		flags |= unix.FIB_RULE_INVERT
	}
	b = append(b, uint8(r.Family.AF()), uint8(prefixLen(r.Dst)), uint8(prefixLen(r.Src)), r.TOS, table, 0, 0, r.Action)
	b = ne.AppendUint32(b, flags)
	if r.Table != 0 {
		b = appendAttrU32(b, unix.FRA_TABLE, r.Table)
	}
	if r.Priority != 0 {
		b = appendAttrU32(b, unix.FRA_PRIORITY, r.Priority)
	}
	if prefixLen(r.Src) > 0 {
		b = appendAttrAddr(b, unix.FRA_SRC, r.Src.Addr())
	}
	if prefixLen(r.Dst) > 0 {
		b = appendAttrAddr(b, unix.FRA_DST, r.Dst.Addr())
	}
	if r.IIF != "" {
		b = appendAttrString(b, unix.FRA_IIFNAME, r.IIF)
	}
	if r.OIF != "" {
		b = appendAttrString(b, unix.FRA_OIFNAME, r.OIF)
	}
	if r.Mark != 0 {
		b = appendAttrU32(b, unix.FRA_FWMARK, r.Mark)
	}
	if r.Mask != 0 {
		b = appendAttrU32(b, unix.FRA_FWMASK, r.Mask)
	}
	if r.Action == RuleGoto && r.Goto != 0 {
		b = appendAttrU32(b, unix.FRA_GOTO, r.Goto)
	}
	if r.SuppressPrefixLen.Set {
		b = appendAttrU32(b, unix.FRA_SUPPRESS_PREFIXLEN, uint32(r.SuppressPrefixLen.Value))
	}
	if r.SuppressIfGroup.Set {
		b = appendAttrU32(b, unix.FRA_SUPPRESS_IFGROUP, uint32(r.SuppressIfGroup.Value))
	}
	if r.Realm != 0 {
		b = appendAttrU32(b, unix.FRA_FLOW, r.Realm)
	}
	if r.TunID != 0 {
		b = appendAttrHeader(b, unix.FRA_TUN_ID, 8)
		b = binary.BigEndian.AppendUint64(b, r.TunID) // __be64
	}
	if r.Protocol != 0 {
		b = appendAttrU8(b, unix.FRA_PROTOCOL, r.Protocol)
	}
	if r.IPProto != 0 {
		b = appendAttrU8(b, unix.FRA_IP_PROTO, r.IPProto)
	}
	if r.SrcPorts != (PortRange{}) {
		b = appendPortRange(b, unix.FRA_SPORT_RANGE, r.SrcPorts)
	}
	if r.DstPorts != (PortRange{}) {
		b = appendPortRange(b, unix.FRA_DPORT_RANGE, r.DstPorts)
	}
	if r.UID.Set {
		b = appendAttrHeader(b, unix.FRA_UID_RANGE, 8)
		b = ne.AppendUint32(ne.AppendUint32(b, r.UID.Start), r.UID.End)
	}
	return finishMsg(b, start)
}

// prefixLen is the length of a rule's address selector, 0 when unset.
func prefixLen(p netip.Prefix) int {
	if !p.IsValid() {
		return 0
	}
	return p.Bits()
}

func appendPortRange(b []byte, typ uint16, p PortRange) []byte {
	b = appendAttrHeader(b, typ, 4)
	return ne.AppendUint16(ne.AppendUint16(b, p.Start), p.End)
}

// appendRuleDumpRequest appends an RTM_GETRULE dump request of family: a
// bare fib_rule_hdr, which is all strict checking accepts.
func appendRuleDumpRequest(b []byte, seq uint32, af uint8) []byte {
	start := len(b)
	b = appendHeader(b, unix.RTM_GETRULE, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, seq)
	b = append(b, af, 0, 0, 0, 0, 0, 0, 0)
	b = ne.AppendUint32(b, 0)
	return finishMsg(b, start)
}

// decodeRule parses an RTM_NEWRULE payload (fib_rule_hdr and attributes)
// into r, overwriting every field. ok is false, with a nil error, for a
// family other than IPv4 and IPv6.
func decodeRule(payload []byte, r *Rule) (ok bool, err error) {
	f, ok, err := headerFamily(payload, fibRuleLen, "rule")
	if !ok {
		return false, err
	}
	*r = Rule{
		Family: f,
		TOS:    payload[3],
		Table:  uint32(payload[4]),
		Action: payload[7],
		Invert: ne.Uint32(payload[8:])&unix.FIB_RULE_INVERT != 0,
	}
	dstLen, srcLen := int(payload[1]), int(payload[2])
	if dstLen > f.Bits() || srcLen > f.Bits() {
		return false, errMalformed("prefix lengths %d and %d", dstLen, srcLen)
	}
	u32 := func(name string, v []byte) uint32 {
		x, e := attrU32(name, v)
		if err == nil {
			err = e
		}
		return x
	}
	for attrs := payload[fibRuleLen:]; len(attrs) > 0 && err == nil; {
		t, v, rest, ok := nextAttr(attrs)
		if !ok {
			return false, errMalformed("attribute %d in %d bytes", t, len(attrs))
		}
		attrs = rest
		switch t {
		case unix.FRA_TABLE:
			r.Table = u32("FRA_TABLE", v)
		case unix.FRA_PRIORITY:
			r.Priority = u32("FRA_PRIORITY", v)
		case unix.FRA_SRC, unix.FRA_DST:
			a, ok := addrOf(f, v)
			if !ok {
				return false, errMalformed("rule address of %d bytes", len(v))
			}
			if t == unix.FRA_SRC {
				r.Src = netip.PrefixFrom(a, srcLen)
			} else {
				r.Dst = netip.PrefixFrom(a, dstLen)
			}
		case unix.FRA_IIFNAME:
			r.IIF = cString(v)
		case unix.FRA_OIFNAME:
			r.OIF = cString(v)
		case unix.FRA_FWMARK:
			r.Mark = u32("FRA_FWMARK", v)
		case unix.FRA_FWMASK:
			r.Mask = u32("FRA_FWMASK", v)
		case unix.FRA_GOTO:
			r.Goto = u32("FRA_GOTO", v)
		case unix.FRA_SUPPRESS_PREFIXLEN:
			r.SuppressPrefixLen = suppressor(int32(u32("FRA_SUPPRESS_PREFIXLEN", v)))
		case unix.FRA_SUPPRESS_IFGROUP:
			r.SuppressIfGroup = suppressor(int32(u32("FRA_SUPPRESS_IFGROUP", v)))
		case unix.FRA_FLOW:
			r.Realm = u32("FRA_FLOW", v)
		case unix.FRA_TUN_ID:
			if len(v) < 8 {
				return false, errMalformed("FRA_TUN_ID of %d bytes", len(v))
			}
			r.TunID = binary.BigEndian.Uint64(v)
		case unix.FRA_PROTOCOL, unix.FRA_IP_PROTO:
			if len(v) < 1 {
				return false, errMalformed("one-byte rule attribute %d of %d bytes", t, len(v))
			}
			if t == unix.FRA_PROTOCOL {
				r.Protocol = v[0]
			} else {
				r.IPProto = v[0]
			}
		case unix.FRA_SPORT_RANGE, unix.FRA_DPORT_RANGE:
			if len(v) < 4 {
				return false, errMalformed("port range of %d bytes", len(v))
			}
			p := PortRange{Start: ne.Uint16(v), End: ne.Uint16(v[2:])}
			if t == unix.FRA_SPORT_RANGE {
				r.SrcPorts = p
			} else {
				r.DstPorts = p
			}
		case unix.FRA_UID_RANGE:
			if len(v) < 8 {
				return false, errMalformed("FRA_UID_RANGE of %d bytes", len(v))
			}
			r.UID = UIDRange{Start: ne.Uint32(v), End: ne.Uint32(v[4:]), Set: true}
		}
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// suppressor decodes a dumped suppressor: the kernel reports -1 (or any
// negative value) for none.
func suppressor(v int32) Suppressor {
	if v < 0 {
		return Suppressor{}
	}
	return Suppressor{Value: int(v), Set: true}
}

// cString returns the string of a NUL-terminated attribute.
func cString(v []byte) string {
	for i, c := range v {
		if c == 0 {
			return string(v[:i])
		}
	}
	return string(v)
}

// rules implements Rules on c.
func (c *conn) rules(ctx context.Context, f Family) ([]Rule, error) {
	if !f.Valid() {
		return nil, invalid("rule dump: %v is neither IPv4 nor IPv6", f)
	}
	af := uint8(f.AF())
	var out []Rule
	var r Rule
	err := c.dump(ctx, &dumpRequest{
		what:   fmt.Sprintf("%s rule dump", f),
		reply:  unix.RTM_NEWRULE,
		encode: func(b []byte, seq uint32, _ bool) []byte { return appendRuleDumpRequest(b, seq, af) },
	}, func(payload []byte) error {
		ok, err := decodeRule(payload, &r)
		if ok && r.Family == f {
			out = append(out, r)
		}
		return err
	}, func() { out = out[:0] })
	return out, err
}

// writeRule implements AddRule (OpAdd) and DeleteRule (OpDelete) on c.
func (c *conn) writeRule(ctx context.Context, kind OpKind, r *Rule) error {
	return applyOps(c, ctx, []ruleOp{{kind: kind, rule: r}}, ruleCodec)[0]
}

//go:build linux

package kernel

import (
	"context"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// rule returns a lookup rule of family f with no selector.
func rule(f Family, prio, table uint32) Rule {
	return Rule{Family: f, Priority: prio, Action: RuleLookup, Table: table}
}

func ruleCases() map[string]Rule {
	with := func(r Rule, f func(*Rule)) Rule { f(&r); return r }
	return map[string]Rule{
		"v4 lookup":       rule(IPv4, 100, 200),
		"v6 lookup":       rule(IPv6, 100, 200),
		"table above 255": rule(IPv4, 101, 100_000),
		"v4 from to": with(rule(IPv4, 102, 7), func(r *Rule) {
			r.Src, r.Dst = netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.0/24")
		}),
		"v6 from, host bits kept": with(rule(IPv6, 103, 7), func(r *Rule) { r.Src = netip.MustParsePrefix("fd00::1/64") }),
		"mark and mask":           with(rule(IPv4, 104, 7), func(r *Rule) { r.Mark, r.Mask = 0x10, 0xf0 }),
		"mask without mark":       with(rule(IPv4, 104, 7), func(r *Rule) { r.Mask = 0xff }),
		"interfaces":              with(rule(IPv6, 105, 7), func(r *Rule) { r.IIF, r.OIF = "eth0.100", "wg0" }),
		"invert tos proto":        with(rule(IPv4, 106, 7), func(r *Rule) { r.Invert, r.TOS, r.IPProto, r.Protocol = true, 0x10, 6, 80 }),
		"ports":                   with(rule(IPv4, 107, 7), func(r *Rule) { r.SrcPorts, r.DstPorts = PortRange{1000, 2000}, PortRange{53, 53} }),
		"uid":                     with(rule(IPv6, 108, 7), func(r *Rule) { r.UID = UIDRange{Start: 1000, End: 1999, Set: true} }),
		"suppress": with(rule(IPv4, 109, 254), func(r *Rule) {
			r.SuppressPrefixLen, r.SuppressIfGroup = Suppressor{Set: true}, Suppressor{Value: 3, Set: true}
		}),
		"realm tunid": with(rule(IPv4, 110, 7), func(r *Rule) { r.Realm, r.TunID = 0x10002, 0x0102030405060708 }),
		"goto":        {Family: IPv4, Priority: 111, Action: RuleGoto, Goto: 200},
		"blackhole":   {Family: IPv6, Priority: 112, Action: RuleBlackhole},
		"nop":         {Family: IPv4, Priority: 113, Action: RuleNop},
		"prohibit":    {Family: IPv4, Priority: 114, Action: RuleProhibit},
		"unreachable": {Family: IPv6, Priority: 115, Action: RuleUnreachable},
	}
}

func TestRuleCodecRoundTrip(t *testing.T) {
	for name, r := range ruleCases() {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, r.Validate())
			for _, kind := range []OpKind{OpAdd, OpDelete} {
				msg := appendRuleMsg(nil, kind, 9, &r)
				h, payload, rest, ok := nextMessage(msg)
				require.True(t, ok)
				assert.Nil(t, rest)
				wantType, wantFlags := uint16(unix.RTM_NEWRULE), uint16(unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
				if kind == OpDelete {
					wantType, wantFlags = unix.RTM_DELRULE, unix.NLM_F_REQUEST|unix.NLM_F_ACK
				}
				assert.Equal(t, wantType, h.typ)
				assert.Equal(t, wantFlags, h.flags)
				var got Rule
				ok, err := decodeRule(payload, &got)
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, r, got)
				checkRuleWithNL(t, payload, &r)
			}
		})
	}
}

// checkRuleWithNL reads our encoding with the netlink library's parsers (a
// fib_rule_hdr has the layout of an rtmsg, with the action as the type).
func checkRuleWithNL(t *testing.T, payload []byte, r *Rule) {
	t.Helper()
	msg := nl.DeserializeRtMsg(payload)
	assert.Equal(t, uint8(r.Family.AF()), msg.Family)
	assert.Equal(t, uint8(prefixLen(r.Dst)), msg.Dst_len)
	assert.Equal(t, uint8(prefixLen(r.Src)), msg.Src_len)
	assert.Equal(t, r.TOS, msg.Tos)
	assert.Equal(t, r.Action, msg.Type, "the action")
	assert.Equal(t, r.Invert, msg.Flags&unix.FIB_RULE_INVERT != 0)
	attrs, err := nl.ParseRouteAttrAsMap(payload[fibRuleLen:])
	require.NoError(t, err)
	native := nl.NativeEndian()
	u32 := func(typ uint16, want uint32, set bool) {
		t.Helper()
		if !set {
			assert.NotContains(t, attrs, typ, "attribute %d", typ)
			return
		}
		if assert.Contains(t, attrs, typ, "attribute %d", typ) {
			assert.Equal(t, want, native.Uint32(attrs[typ].Value), "attribute %d", typ)
		}
	}
	u32(unix.FRA_TABLE, r.Table, r.Table != 0)
	u32(unix.FRA_PRIORITY, r.Priority, r.Priority != 0)
	u32(unix.FRA_FWMARK, r.Mark, r.Mark != 0)
	u32(unix.FRA_FWMASK, r.Mask, r.Mask != 0)
	u32(unix.FRA_GOTO, r.Goto, r.Action == RuleGoto)
	u32(unix.FRA_SUPPRESS_PREFIXLEN, uint32(r.SuppressPrefixLen.Value), r.SuppressPrefixLen.Set)
	u32(unix.FRA_SUPPRESS_IFGROUP, uint32(r.SuppressIfGroup.Value), r.SuppressIfGroup.Set)
	u32(unix.FRA_FLOW, r.Realm, r.Realm != 0)
	if r.Src.IsValid() {
		assert.Equal(t, r.Src.Addr().AsSlice(), attrs[unix.FRA_SRC].Value)
	}
	if r.IIF != "" {
		assert.Equal(t, append([]byte(r.IIF), 0), attrs[unix.FRA_IIFNAME].Value)
	}
	if r.TunID != 0 {
		assert.Equal(t, r.TunID, binary.BigEndian.Uint64(attrs[unix.FRA_TUN_ID].Value))
	}
	if r.UID.Set {
		v := attrs[unix.FRA_UID_RANGE].Value
		assert.Equal(t, [2]uint32{r.UID.Start, r.UID.End}, [2]uint32{native.Uint32(v), native.Uint32(v[4:])})
	}
	if r.DstPorts != (PortRange{}) {
		v := attrs[unix.FRA_DPORT_RANGE].Value
		assert.Equal(t, r.DstPorts, PortRange{native.Uint16(v), native.Uint16(v[2:])})
	}
}

func TestDecodeRuleDefaultsAndMalformed(t *testing.T) {
	// A kernel dump of an unset suppressor says 0xffffffff.
	r := rule(IPv4, 5, 9)
	payload := appendRuleMsg(nil, OpAdd, 1, &r)[hdrLen:]
	payload = appendAttrU32(payload, unix.FRA_SUPPRESS_PREFIXLEN, 0xffffffff)
	var got Rule
	ok, err := decodeRule(payload, &got)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, r, got)

	other := append([]byte(nil), payload...)
	other[0] = unix.AF_MPLS
	ok, err = decodeRule(other, &got)
	assert.False(t, ok)
	assert.NoError(t, err)

	for name, p := range map[string][]byte{
		"short header":       payload[:fibRuleLen-1],
		"src length 33":      func() []byte { b := append([]byte(nil), payload...); b[2] = 33; return b }(),
		"2-byte table":       append(append([]byte(nil), payload[:fibRuleLen]...), 6, 0, unix.FRA_TABLE, 0, 1, 0, 0, 0),
		"3-byte source":      append(append([]byte(nil), payload[:fibRuleLen]...), 7, 0, unix.FRA_SRC, 0, 1, 2, 3, 0),
		"short tunnel id":    appendAttrU32(append([]byte(nil), payload[:fibRuleLen]...), unix.FRA_TUN_ID, 1),
		"short port range":   append(append([]byte(nil), payload[:fibRuleLen]...), 6, 0, unix.FRA_SPORT_RANGE, 0, 1, 0, 0, 0),
		"attribute past end": append(append([]byte(nil), payload...), 40, 0, 1, 0),
		"empty protocol":     append(append([]byte(nil), payload[:fibRuleLen]...), 4, 0, unix.FRA_PROTOCOL, 0),
		"short uid range":    appendAttrU32(append([]byte(nil), payload[:fibRuleLen]...), unix.FRA_UID_RANGE, 1),
	} {
		ok, err := decodeRule(p, &got)
		assert.False(t, ok, name)
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
}

// ruleStore answers rule dumps with the rules given, and acknowledges
// writes, recording them.
type ruleStore struct {
	rules  []Rule
	writes []Rule
}

func (s *ruleStore) handle(h header, payload []byte) [][]byte {
	if h.typ != unix.RTM_GETRULE {
		var r Rule
		if ok, err := decodeRule(payload, &r); !ok || err != nil {
			return [][]byte{ackMsg(h.seq, -int32(unix.EINVAL), "")}
		}
		s.writes = append(s.writes, r)
		if h.typ == unix.RTM_DELRULE {
			return [][]byte{ackMsg(h.seq, -int32(unix.ENOENT), "")}
		}
		return [][]byte{ackMsg(h.seq, -int32(unix.EEXIST), "")}
	}
	var d []byte
	for _, r := range s.rules {
		m := appendRuleMsg(nil, OpAdd, h.seq, &r)
		ne.PutUint16(m[4:], unix.RTM_NEWRULE)
		ne.PutUint16(m[6:], unix.NLM_F_MULTI)
		d = append(d, m...)
	}
	return [][]byte{append(d, doneMsg(h.seq, 0, 0, "")...)}
}

func TestRulesDumpAndWrites(t *testing.T) {
	s := &ruleStore{rules: []Rule{rule(IPv4, 1, 2), rule(IPv6, 3, 4), rule(IPv4, 5, 6)}}
	k := &fakeKernel{onRequest: s.handle}
	c := fakeConn(k)
	got, err := c.rules(context.Background(), IPv4)
	require.NoError(t, err)
	assert.Equal(t, []Rule{rule(IPv4, 1, 2), rule(IPv4, 5, 6)}, got)
	_, payload, _, _ := nextMessage(k.sends[0])
	assert.Len(t, payload, fibRuleLen, "a bare header: strict checking refuses more")

	_, err = c.rules(context.Background(), 0)
	assert.ErrorIs(t, err, ErrInvalid)

	r := rule(IPv4, 7, 8)
	err = c.writeRule(context.Background(), OpAdd, &r)
	assert.ErrorIs(t, err, ErrExists)
	assert.EqualError(t, err, "kernel: add rule IPv4 priority 7 table 8: file exists")
	err = c.writeRule(context.Background(), OpDelete, &Rule{Family: IPv6, Priority: 9})
	assert.ErrorIs(t, err, ErrNotFound)
	bad := rule(IPv4, 7, 0)
	assert.ErrorIs(t, c.writeRule(context.Background(), OpAdd, &bad), ErrInvalid)
	assert.Len(t, s.writes, 2, "the invalid rule was not sent")
}

// FuzzDecodeRule feeds arbitrary bytes to the rule decoder: no panic, and
// an accepted rule encodes without panicking and has prefixes of its
// family.
func FuzzDecodeRule(f *testing.F) {
	for _, r := range ruleCases() {
		f.Add(appendRuleMsg(nil, OpAdd, 1, &r)[hdrLen:])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, payload []byte) {
		var r Rule
		ok, err := decodeRule(payload, &r)
		if err != nil || !ok {
			return
		}
		for _, p := range []netip.Prefix{r.Src, r.Dst} {
			if p.IsValid() && !r.Family.ContainsPrefix(p) {
				t.Fatalf("prefix %v in an %v rule", p, r.Family)
			}
		}
		_ = appendRuleMsg(nil, OpDelete, 1, &r)
	})
}

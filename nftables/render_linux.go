//go:build linux

package nftables

import (
	"time"

	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables/expr"

	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Rule expressions are github.com/google/nftables/expr values encoded by
// its Marshal (but for lookups and masquerade, encoded here); that package
// builds on Linux only.

// exprs appends google/nftables expressions, each as a list element.
func (rd *renderer) add(es ...expr.Any) {
	for _, e := range es {
		if rd.err != nil {
			return
		}
		data, err := expr.Marshal(nfproto(rd.f), e)
		if err != nil {
			rd.err = fmt.Errorf("nftables: encoding %T: %w", e, err)
			return
		}
		n := rd.b.Open(nfnl.ListElem)
		rd.b.Raw(data)
		rd.b.Close(n)
	}
}

// raw appends a hand-encoded expression named name.
func (rd *renderer) raw(name string, data func(w *nfnl.Writer)) {
	n := rd.b.Open(nfnl.ListElem)
	rd.b.Str(nfnl.ExprName, name)
	d := rd.b.Open(nfnl.ExprData)
	data(&rd.b)
	rd.b.Close(d)
	rd.b.Close(n)
}

// render renders r (valid for the family) at rd.at; salt tells identical
// rules of one chain apart. The result's slices are fresh.
func (rd *renderer) render(r netfilter.Rule, hashPrefix string, salt int) (rendered, error) {
	if err := r.Validate(rd.f); err != nil {
		return rendered{}, quoted(err)
	}
	rd.b.Reset()
	rd.err = nil
	rd.r = rendered{}
	var proto *netfilter.MatchProto
	for _, m := range r.Matches {
		if p, ok := m.(netfilter.MatchProto); ok {
			proto = &p
		}
	}
	for i, m := range r.Matches {
		if err := rd.match(m, proto); err != nil {
			return rendered{}, fmt.Errorf("%w (criterion %d)", err, i)
		}
	}
	if rd.counters {
		rd.add(&expr.Counter{})
	}
	if err := rd.action(r.Action, proto); err != nil {
		return rendered{}, err
	}
	if rd.err != nil {
		return rendered{}, rd.err
	}
	comment := hashPrefix + strings.Repeat("0", HashLength)
	for _, c := range r.Comments {
		comment += " " + c
	}
	if len(comment) > MaxCommentLength {
		return rendered{}, errRulef("comment with the hash is %d bytes, longer than %d", len(comment), MaxCommentLength)
	}
	out := rd.r
	out.exprs = slices.Clone(rd.b.B)
	out.hash = ruleHash(out.exprs, out.anon, r.Comments, salt)
	comment = hashPrefix + out.hash + comment[len(hashPrefix)+HashLength:]
	out.udata = appendComment(nil, comment)
	return out, nil
}

// allowed checks what against where the rule stands: the kernel takes it
// only in role (any when "") and only at hooks (any when none), or in the
// chains those reach.
func (rd *renderer) allowed(what string, role Role, hooks ...netfilter.Hook) error {
	if role != "" && rd.at.role != role {
		return errRulef("%s is allowed only in a %s table, not in %s", what, role, rd.at.role)
	}
	if len(hooks) > 0 && rd.at.hook != "" && !slices.Contains(hooks, rd.at.hook) {
		hs := make([]string, len(hooks))
		for i, h := range hooks {
			hs[i] = string(h)
		}
		return errRulef("%s is not allowed at %s (only at %s)", what, rd.at.hook, strings.Join(hs, ", "))
	}
	return nil
}

func cmpOp(negate bool) expr.CmpOp {
	if negate {
		return expr.CmpOpNeq
	}
	return expr.CmpOpEq
}

// addrOffset is where the source or destination address lies in the
// network header, and its length.
func (rd *renderer) addrOffset(d netfilter.Direction) (off, n uint32) {
	if rd.f == ipfamily.IPv6 {
		if d == netfilter.Src {
			return 8, 16
		}
		return 24, 16
	}
	if d == netfilter.Src {
		return 12, 4
	}
	return 16, 4
}

// match renders one criterion of a valid rule.
func (rd *renderer) match(m netfilter.Match, proto *netfilter.MatchProto) error {
	switch c := m.(type) {
	case netfilter.MatchNet:
		bits := c.Prefix.Bits()
		if bits == 0 {
			return nil // matches every packet (a negated /0 is invalid)
		}
		// As nft encodes a prefix, so that nft shows it as one: the bytes
		// of a byte-aligned prefix, else the whole address under a mask.
		off, n := rd.addrOffset(c.Dir)
		if bits%8 == 0 {
			n = uint32(bits / 8)
		}
		rd.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n})
		want := c.Prefix.Addr().AsSlice()[:n]
		if bits%8 != 0 {
			mask := make([]byte, n)
			for i := 0; i < bits; i++ {
				mask[i/8] |= 0x80 >> (i % 8)
			}
			rd.add(&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: n, Mask: mask, Xor: make([]byte, n)})
		}
		rd.add(&expr.Cmp{Op: cmpOp(c.Negate), Register: reg1, Data: want})
		return nil
	case netfilter.MatchProto:
		rd.add(&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			&expr.Cmp{Op: cmpOp(c.Negate), Register: reg1, Data: []byte{byte(c.Proto)}})
		return nil
	case netfilter.MatchPorts:
		return rd.ports(c)
	case netfilter.MatchIface:
		return rd.iface(c)
	case netfilter.MatchMark:
		rd.add(&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1})
		if c.Mask != ^uint32(0) {
			rd.add(&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: ne32(c.Mask), Xor: ne32(0)})
		}
		rd.add(&expr.Cmp{Op: cmpOp(c.Negate), Register: reg1, Data: ne32(c.Mark)})
		return nil
	case netfilter.MatchSet:
		sp := rd.sets(c.Name)
		if sp == nil || sp.verdict {
			return fmt.Errorf("%w %q: the table declares no such set (declare it with SetSets before the rules using it)", ErrUnknownSet, c.Name)
		}
		if err := rd.lookup(c.Name, sp, c.Dims, proto, "set"); err != nil {
			return err
		}
		rd.r.sets = append(rd.r.sets, c.Name)
		rd.namedLookup(c.Name, reg32_00, c.Negate, false)
		return nil
	case netfilter.MatchConntrack:
		return rd.conntrack(c)
	case netfilter.MatchAddrType:
		return rd.addrType(c)
	case netfilter.MatchICMP:
		return rd.icmp(c, proto)
	case netfilter.MatchLimit:
		rd.add(&expr.Limit{Type: expr.LimitTypePkts, Rate: uint64(c.Rate), Unit: expr.LimitTime(c.Per.Duration() / time.Second), Burst: c.EffectiveBurst()})
		return nil
	}
	return errUnsupportedf("criterion %T is not supported", m)
}

// ne32 is x in host byte order, as meta mark and ct state load it.
func ne32(x uint32) []byte { return binary.NativeEndian.AppendUint32(nil, x) }

func be16(x uint16) []byte { return binary.BigEndian.AppendUint16(nil, x) }

func (rd *renderer) ports(m netfilter.MatchPorts) error {
	off := uint32(0)
	if m.Dir == netfilter.Dst {
		off = 2
	}
	rd.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: off, Len: 2})
	if len(m.Ranges) == 1 {
		r := m.Ranges[0]
		if r.First == r.Last {
			rd.add(&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: be16(r.First)})
			return nil
		}
		rd.add(&expr.Range{Op: cmpOp(m.Negate), Register: reg1, FromData: be16(r.First), ToData: be16(r.Last)})
		return nil
	}
	elems := map[string]string{}
	interval := false
	for _, r := range m.Ranges {
		interval = interval || r.First != r.Last
	}
	for _, r := range m.Ranges {
		k := string(be16(r.First))
		if interval {
			k += string(be16(r.Last))
		}
		elems[k] = ""
	}
	rd.anonSet(nfnl.DataTypePort, 2, interval, elems)
	rd.anonLookup(reg1, m.Negate)
	return nil
}

// anonLookup looks the register up in the rule's last anonymous set.
func (rd *renderer) anonLookup(sreg uint32, negate bool) {
	id := uint32(len(rd.r.anon))
	rd.raw("lookup", func(w *nfnl.Writer) {
		w.Str(nfnl.LookupSet, "__set%d")
		w.U32(nfnl.LookupSreg, sreg)
		rd.r.idAt = append(rd.r.idAt, w.Len()+4)
		w.U32(nfnl.LookupSetID, id)
		if negate {
			w.U32(nfnl.LookupFlags, 1) // NFT_LOOKUP_F_INV
		}
	})
}

// namedLookup looks the registers from sreg on up in the named set (into
// the verdict register for a verdict map).
func (rd *renderer) namedLookup(name string, sreg uint32, negate, verdict bool) {
	rd.raw("lookup", func(w *nfnl.Writer) {
		w.Str(nfnl.LookupSet, name)
		w.U32(nfnl.LookupSreg, sreg)
		if verdict {
			w.U32(nfnl.LookupDreg, nfnl.RegVerdict)
		}
		if negate {
			w.U32(nfnl.LookupFlags, 1)
		}
	})
}

// lookup loads a set's key from the packet into the registers from
// NFT_REG32_00 on, each field from the side dims gives.
func (rd *renderer) lookup(name string, sp *setSpec, dims []netfilter.Direction, proto *netfilter.MatchProto, what string) error {
	sided := 0
	hasProto := false
	for _, t := range sp.fields {
		if t.sided() {
			sided++
		}
		hasProto = hasProto || t == TypeProto
	}
	full := len(dims) == len(sp.fields)
	if len(dims) != sided && !full {
		return errRulef("%s %q has %d fields, %d of them with a side, but the rule gives %d dimensions", what, name, len(sp.fields), sided, len(dims))
	}
	portOK := hasProto || proto != nil && !proto.Negate &&
		(proto.Proto == netfilter.ProtoTCP || proto.Proto == netfilter.ProtoUDP || proto.Proto == netfilter.ProtoSCTP)
	reg := uint32(reg32_00)
	d := 0
	for i, t := range sp.fields {
		dir := netfilter.Src
		switch {
		case full:
			dir = dims[i]
		case t.sided():
			dir = dims[d]
			d++
		}
		n := uint32(sp.flens[i])
		dst := reg
		if !sp.concat() {
			dst = reg1
		}
		switch t {
		case TypeAddr:
			off, _ := rd.addrOffset(dir)
			rd.add(&expr.Payload{DestRegister: dst, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n})
		case TypeProto:
			rd.add(&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: dst})
		case TypePort:
			if !portOK {
				// (iptables matches a bitmap:port set on any protocol's
				// port field: not nftables.)
				return errUnsupportedf("%s %q has a port field but neither a protocol field nor the rule a tcp, udp or sctp protocol criterion", what, name)
			}
			off := uint32(0)
			if dir == netfilter.Dst {
				off = 2
			}
			rd.add(&expr.Payload{DestRegister: dst, Base: expr.PayloadBaseTransportHeader, Offset: off, Len: n})
		case TypeMark:
			rd.add(&expr.Meta{Key: expr.MetaKeyMARK, Register: dst})
		case TypeIface:
			key := expr.MetaKeyIIFNAME
			if dir == netfilter.Dst {
				key = expr.MetaKeyOIFNAME
				if err := rd.allowed("an output interface field", "", netfilter.HookForward, netfilter.HookOutput, netfilter.HookPostrouting); err != nil {
					return err
				}
			} else if err := rd.allowed("an input interface field", "", netfilter.HookPrerouting, netfilter.HookInput, netfilter.HookForward); err != nil {
				return err
			}
			rd.add(&expr.Meta{Key: key, Register: dst})
		}
		reg += uint32(padded(int(n)) / nfnl.RegSize)
	}
	return nil
}

func (rd *renderer) iface(m netfilter.MatchIface) error {
	key := expr.MetaKeyIIFNAME
	err := rd.allowed("an input interface criterion", "", netfilter.HookPrerouting, netfilter.HookInput, netfilter.HookForward)
	if m.Out {
		key = expr.MetaKeyOIFNAME
		err = rd.allowed("an output interface criterion", "", netfilter.HookForward, netfilter.HookOutput, netfilter.HookPostrouting)
	}
	if err != nil {
		return err
	}
	name := m.Name
	if name == "+" {
		if !m.Negate {
			return nil // every interface
		}
		// No interface at all: matches nothing, as in iptables, also in a
		// chain a hook without that interface reaches (where the name is
		// empty): no packet is 0 bytes long.
		rd.add(&expr.Meta{Key: expr.MetaKeyLEN, Register: reg1}, &expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: ne32(0)})
		return nil
	}
	var data []byte
	if wild, ok := strings.CutSuffix(name, "+"); ok {
		data = []byte(wild)
	} else {
		data = make([]byte, 16)
		copy(data, name)
	}
	rd.add(&expr.Meta{Key: key, Register: reg1}, &expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: data})
	return nil
}

// Conntrack state bits (NF_CT_STATE_*_BIT) and status bits (IPS_*).
const (
	ctInvalid     = 1
	ctEstablished = 2
	ctRelated     = 4
	ctNew         = 8
	ctUntracked   = 64
	ipsSrcNAT     = 1 << 4
	ipsDstNAT     = 1 << 5
)

func (rd *renderer) conntrack(m netfilter.MatchConntrack) error {
	var state, status uint32
	for bit, v := range map[netfilter.CTState]uint32{
		netfilter.CTStateInvalid: ctInvalid, netfilter.CTStateNew: ctNew, netfilter.CTStateRelated: ctRelated,
		netfilter.CTStateEstablished: ctEstablished, netfilter.CTStateUntracked: ctUntracked,
	} {
		if m.States&bit != 0 {
			state |= v
		}
	}
	if m.States&netfilter.CTStateSNAT != 0 {
		status |= ipsSrcNAT
	}
	if m.States&netfilter.CTStateDNAT != 0 {
		status |= ipsDstNAT
	}
	if status != 0 && (state != 0 || m.Negate) {
		// iptables matches "any of the states or translated"; nftables
		// reads states and NAT status apart and cannot "or" them in one
		// rule, and a negated status also matches untracked packets in
		// iptables but not in nftables.
		return errUnsupportedf("conntrack states %v: SNAT and DNAT only alone and not negated", m.States)
	}
	key, bits := expr.CtKeySTATE, state
	if status != 0 {
		key, bits = expr.CtKeySTATUS, status
	}
	op := expr.CmpOpNeq // some bit set
	if m.Negate {
		op = expr.CmpOpEq
	}
	rd.add(&expr.Ct{Register: reg1, Key: key},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: ne32(bits), Xor: ne32(0)},
		&expr.Cmp{Op: op, Register: reg1, Data: ne32(0)})
	return nil
}

func (rd *renderer) addrType(m netfilter.MatchAddrType) error {
	fib := &expr.Fib{Register: reg1, ResultADDRTYPE: true, FlagSADDR: m.Dir == netfilter.Src, FlagDADDR: m.Dir == netfilter.Dst}
	switch {
	case m.LimitIfaceIn:
		if err := rd.allowed("an address type limited to the input interface", "", netfilter.HookPrerouting, netfilter.HookInput, netfilter.HookForward); err != nil {
			return err
		}
		fib.FlagIIF = true
	case m.LimitIfaceOut:
		if err := rd.allowed("an address type limited to the output interface", "", netfilter.HookForward, netfilter.HookOutput, netfilter.HookPostrouting); err != nil {
			return err
		}
		fib.FlagOIF = true
	}
	rd.add(fib)
	var types []uint32
	for i := 0; i < 16; i++ {
		if m.Types&(1<<i) != 0 {
			types = append(types, uint32(i))
		}
	}
	if len(types) == 1 {
		rd.add(&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: ne32(types[0])})
		return nil
	}
	elems := map[string]string{}
	for _, t := range types {
		elems[string(ne32(t))] = ""
	}
	rd.anonSet(4 /* integer */, 4, false, elems)
	rd.anonLookup(reg1, m.Negate)
	return nil
}

func (rd *renderer) icmp(m netfilter.MatchICMP, proto *netfilter.MatchProto) error {
	p := netfilter.ProtoICMP
	if m.Family == ipfamily.IPv6 {
		p = netfilter.ProtoICMPv6
	}
	if proto == nil {
		rd.add(&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1}, &expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{byte(p)}})
	}
	switch {
	case m.Family == ipfamily.IPv4 && m.Type == 255:
		if m.Negate {
			// "not any type": matches nothing.
			rd.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
				&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 1, Mask: []byte{0}, Xor: []byte{0}},
				&expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: []byte{0}})
		}
	case m.HasCode:
		rd.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
			&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: []byte{m.Type, m.Code}})
	default:
		rd.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
			&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: []byte{m.Type}})
	}
	return nil
}

// ICMP and ICMPv6 codes of the reject replies, per family.
var rejectCodes = [...][2]int16{
	netfilter.RejectPortUnreachable:  {3, 4},
	netfilter.RejectTCPReset:         {-1, -1},
	netfilter.RejectAdminProhibited:  {13, 1},
	netfilter.RejectNetUnreachable:   {0, -2},
	netfilter.RejectHostUnreachable:  {1, -2},
	netfilter.RejectProtoUnreachable: {2, -2},
	netfilter.RejectNetProhibited:    {9, -2},
	netfilter.RejectHostProhibited:   {10, -2},
	netfilter.RejectNoRoute:          {-2, 0},
	netfilter.RejectAddrUnreachable:  {-2, 3},
	netfilter.RejectPolicyFail:       {-2, 5},
	netfilter.RejectRejectRoute:      {-2, 6},
}

// NFT_REJECT_* types and NF_NAT_RANGE_* flags.
const (
	rejectICMP        = 0
	rejectTCPReset    = 1
	natRandomFully    = 0x10
	natProtoSpecified = 0x2
	masqFlags         = 1
	masqRegProtoMin   = 2
	masqRegProtoMax   = 3
	natFamily         = 0
	natTypeSNAT       = 0
	natTypeDNAT       = 1
	logLevelAttrFlags = 1<<2 | 1<<5 // NFTA_LOG_PREFIX, NFTA_LOG_LEVEL
)

// action renders the action of a valid rule.
func (rd *renderer) action(a netfilter.Action, proto *netfilter.MatchProto) error {
	switch a := a.(type) {
	case netfilter.ActionAccept:
		rd.add(&expr.Verdict{Kind: expr.VerdictAccept})
	case netfilter.ActionDrop:
		if rd.at.role == NAT {
			return errRulef("DROP is not allowed in a nat table, which is not for filtering")
		}
		rd.add(&expr.Verdict{Kind: expr.VerdictDrop})
	case netfilter.ActionReturn:
		rd.add(&expr.Verdict{Kind: expr.VerdictReturn})
	case netfilter.ActionJump:
		rd.r.target = a.Chain
		rd.add(&expr.Verdict{Kind: expr.VerdictJump, Chain: a.Chain})
	case netfilter.ActionGoto:
		rd.r.target = a.Chain
		rd.add(&expr.Verdict{Kind: expr.VerdictGoto, Chain: a.Chain})
	case netfilter.ActionReject:
		if err := rd.allowed("REJECT", Filter, netfilter.HookInput, netfilter.HookForward, netfilter.HookOutput); err != nil {
			return err
		}
		if int(a.With) >= len(rejectCodes) {
			return errUnsupportedf("reject with %v is not supported", a.With)
		}
		code := rejectCodes[a.With][0]
		if rd.f == ipfamily.IPv6 {
			code = rejectCodes[a.With][1]
		}
		switch {
		case code == -1:
			rd.add(&expr.Reject{Type: rejectTCPReset})
		case code < 0:
			return errUnsupportedf("reject with %v is not supported in %v", a.With, rd.f)
		default:
			rd.add(&expr.Reject{Type: rejectICMP, Code: uint8(code)})
		}
	case netfilter.ActionSetMark:
		if a.Mask == ^uint32(0) {
			rd.add(&expr.Immediate{Register: reg1, Data: ne32(a.Mark)})
		} else {
			rd.add(&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1},
				&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: ne32(^a.Mask), Xor: ne32(a.Mark)})
		}
		rd.add(&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg1})
	case netfilter.ActionMasquerade:
		if err := rd.allowed("MASQUERADE", NAT, netfilter.HookPostrouting); err != nil {
			return err
		}
		ports := a.ToPorts != (netfilter.PortRange{})
		if ports {
			rd.add(&expr.Immediate{Register: reg1, Data: be16(a.ToPorts.First)}, &expr.Immediate{Register: reg2, Data: be16(a.ToPorts.Last)})
		}
		rd.raw("masq", func(w *nfnl.Writer) {
			var flags uint32
			if a.RandomFully {
				flags |= natRandomFully
			}
			if ports {
				flags |= natProtoSpecified // the kernel uses the ports only with it
			}
			if flags != 0 {
				w.U32(masqFlags, flags)
			}
			if ports {
				w.U32(masqRegProtoMin, reg1)
				w.U32(masqRegProtoMax, reg2)
			}
		})
	case netfilter.ActionSNAT:
		if err := rd.allowed("SNAT", NAT, netfilter.HookPostrouting, netfilter.HookInput); err != nil {
			return err
		}
		rd.nat(expr.NATTypeSourceNAT, a.To, a.Ports, a.RandomFully)
	case netfilter.ActionDNAT:
		if err := rd.allowed("DNAT", NAT, netfilter.HookPrerouting, netfilter.HookOutput); err != nil {
			return err
		}
		rd.nat(expr.NATTypeDestNAT, a.To, a.Ports, false)
	case netfilter.ActionLog:
		if len(a.Prefix) > MaxLogPrefixLength {
			return errRulef("log prefix is %d bytes, longer than %d", len(a.Prefix), MaxLogPrefixLength)
		}
		rd.add(&expr.Log{Key: logLevelAttrFlags, Level: expr.LogLevel(a.Level.Syslog()), Data: []byte(a.Prefix)})
	case netfilter.ActionNoTrack:
		if err := rd.allowed("NoTrack", Raw); err != nil {
			return err
		}
		rd.add(&expr.Notrack{})
	case netfilter.ActionNFLOG:
		if len(a.Prefix) > MaxLogPrefixLength {
			return errRulef("NFLOG prefix is %d bytes, longer than %d", len(a.Prefix), MaxLogPrefixLength)
		}
		l := &expr.Log{Key: 1 << 1 /* NFTA_LOG_GROUP */, Group: a.Group}
		if a.Prefix != "" {
			l.Key |= 1 << 2
			l.Data = []byte(a.Prefix)
		}
		if a.Size != 0 {
			l.Key |= 1 << 3 // NFTA_LOG_SNAPLEN
			l.Snaplen = a.Size
		}
		rd.add(l)
	case netfilter.ActionVerdictMap:
		sp := rd.sets(a.Map)
		if sp == nil || !sp.verdict {
			return fmt.Errorf("%w %q: the table declares no such verdict map (declare it with SetSets before the rules using it)", ErrUnknownSet, a.Map)
		}
		if err := rd.lookup(a.Map, sp, a.Dims, proto, "verdict map"); err != nil {
			return err
		}
		rd.r.vmap = a.Map
		sreg := uint32(reg32_00)
		if !sp.concat() {
			sreg = reg1
		}
		rd.namedLookup(a.Map, sreg, false, true)
	default:
		return errUnsupportedf("action %T is not supported", a)
	}
	return nil
}

// nat renders SNAT or DNAT to addr and ports.
func (rd *renderer) nat(t expr.NATType, to netip.Addr, ports netfilter.PortRange, randomFully bool) {
	rd.add(&expr.Immediate{Register: reg1, Data: to.AsSlice()})
	n := &expr.NAT{Type: t, Family: uint32(nfproto(rd.f)), RegAddrMin: reg1, FullyRandom: randomFully}
	if ports != (netfilter.PortRange{}) {
		rd.add(&expr.Immediate{Register: reg2, Data: be16(ports.First)}, &expr.Immediate{Register: reg3, Data: be16(ports.Last)})
		n.RegProtoMin, n.RegProtoMax = reg2, reg3
	}
	rd.add(n)
}

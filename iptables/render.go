package iptables

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Limits of iptables beyond those of the rule model (package netfilter):
// a rule past one of them is refused when it is rendered.
const (
	// MaxCommentLength is the longest comment iptables keeps; the kernel
	// would cut a longer one silently.
	MaxCommentLength = 255
	// MaxLogPrefixLength is the longest LOG prefix; the kernel would cut a
	// longer one silently.
	MaxLogPrefixLength = 29
	// MaxNFLOGPrefixLength is the longest NFLOG prefix; iptables-legacy
	// would cut a longer one silently.
	MaxNFLOGPrefixLength = 63
	// MaxMultiPorts is the most ports one port criterion can hold when it
	// has several ranges (the multiport match); a range of more than one
	// port counts as two.
	MaxMultiPorts = 15
)

// RuleArgs renders r as iptables arguments for family f, without the
// chain (-A CHAIN) part: header criteria (-s, -d, -i, -o, -p), the other
// criteria in order, then comments, then the action. The result is the
// form iptables-save prints back (so `-D CHAIN <args>` finds the rule),
// but for a /0 source or destination, which iptables-save leaves out, and
// a protocol without a name in Proto.String, which it prints by its
// /etc/protocols name. Equal rules give equal arguments. An invalid rule
// (netfilter.Rule.Validate, and the limits of iptables such as
// MaxCommentLength) is an error matching netfilter.ErrInvalidRule, with no
// arguments. Where the rule stands is not checked: a Table does that when
// the rule is declared.
func RuleArgs(r netfilter.Rule, f ipfamily.Family) ([]string, error) {
	sc := getScratch()
	defer putScratch(sc)
	b, _, err := appendRestore(sc.buf[:0], r, f, placement{}, &sc.st)
	if err != nil {
		return nil, err
	}
	sc.buf = b
	return splitTokens(string(b)), nil
}

// ruleRender collects the rendering of one rule for one IP family. It is
// reused from rule to rule (reset), so rendering a chain allocates little.
type ruleRender struct {
	v ipfamily.Family
	// at is where the rule is declared, for the criteria and actions the
	// kernel allows in some tables and chains only; zero for a rule
	// rendered alone (RuleArgs).
	at placement
	// Header criteria, rendered first in this order (iptables-save's).
	src, dst netArg
	in, out  ifaceArg
	proto    protoArg
	// mods holds the other criteria's tokens, in order (start -1: each
	// token preceded by a space).
	mods tokWriter

	// protoNum is the protocol of the rule's MatchProto, when
	// protoCriterion; sport and dport are the single-range port criteria,
	// which share one protocol match inserted into mods at byte offset
	// portAt.
	protoNum       netfilter.Proto
	protoCriterion bool
	sport, dport   portArg
	portAt         int

	// w is where appendRestore writes the rule (a field, so that passing
	// it to an action does not move it to the heap).
	w tokWriter
}

// netArg is a rendered -s or -d criterion.
type netArg struct {
	set, neg bool
	p        netip.Prefix
}

// ifaceArg is a rendered -i or -o criterion.
type ifaceArg struct {
	set, neg bool
	name     string
}

// protoArg is a rendered -p criterion.
type protoArg struct {
	set, neg bool
	p        netfilter.Proto
}

// portArg is a rendered --sport or --dport option.
type portArg struct {
	set, neg bool
	r        netfilter.PortRange
}

// placement is where a rule is declared: its table, and the built-in chain
// it is in ("" for an owned chain, which the kernel checks against the
// built-in chains that reach it only when the rule is written).
type placement struct {
	table, chain string
}

// reset prepares st for a rule of family v declared at at, keeping its
// buffers.
func (st *ruleRender) reset(v ipfamily.Family, at placement) {
	*st = ruleRender{v: v, at: at, mods: tokWriter{b: st.mods.b[:0], start: -1}}
}

// errRulef returns an error of the package matching
// netfilter.ErrInvalidRule.
func errRulef(format string, a ...any) error {
	return errs.Also(fmt.Errorf("iptables: invalid rule: "+format, a...), netfilter.ErrInvalidRule)
}

// quoted returns an error of package netfilter under the package's own
// prefix, matching everything it matches.
func quoted(err error) error {
	return errs.Also(errors.New("iptables: "+strings.TrimPrefix(err.Error(), "netfilter: ")), err)
}

// allowed checks what (a target or an option) against where the rule is
// declared: the kernel accepts it only in table (any when "") and only in
// the built-in chains chains (any when none), or in the chains they call.
func (st *ruleRender) allowed(what, table string, chains ...string) error {
	if table != "" && st.at.table != "" && st.at.table != table {
		return errRulef("%s is allowed only in the %s table, not in %s", what, table, st.at.table)
	}
	if len(chains) > 0 && st.at.chain != "" && !slices.Contains(chains, st.at.chain) {
		return errRulef("%s is not allowed in %s (only in %s)", what, st.at.chain, strings.Join(chains, ", "))
	}
	return nil
}

// appendRestore appends the arguments of r for family v to dst in
// iptables-restore form (tokens separated by one space, quoted where
// needed): header criteria (-s, -d, -i, -o, -p), the other criteria in
// order, the comments, then the action. It returns the grown dst and the
// length of the header criteria's text (where the Table puts its hash
// comment). Declared at a table and chain (at), it also checks the
// targets and options the kernel allows only in some of them. st is
// working space. On error dst is returned unchanged.
func appendRestore(dst []byte, r netfilter.Rule, v ipfamily.Family, at placement, st *ruleRender) ([]byte, int, error) {
	if err := r.Validate(v); err != nil {
		return dst, 0, quoted(err)
	}
	st.reset(v, at)
	for _, m := range r.Matches {
		if p, ok := m.(netfilter.MatchProto); ok {
			st.protoCriterion, st.protoNum = true, p.Proto
			st.proto = protoArg{set: true, neg: p.Negate, p: p.Proto}
		}
	}
	for i, m := range r.Matches {
		if err := st.match(m); err != nil {
			return dst, 0, fmt.Errorf("%w (criterion %d)", err, i)
		}
	}
	for i, c := range r.Comments {
		if len(c) > MaxCommentLength {
			return dst, 0, errRulef("comment is %d bytes, longer than %d (comment %d)", len(c), MaxCommentLength, i)
		}
	}
	st.w = tokWriter{b: dst, start: len(dst)}
	w := &st.w
	cut := st.appendMatch(w)
	for _, c := range r.Comments {
		w.lit("-m")
		w.lit("comment")
		w.lit("--comment")
		w.tok(c)
	}
	err := st.action(r.Action, w)
	b := w.b
	st.w = tokWriter{}
	if err != nil {
		return dst, 0, err
	}
	return b, cut, nil
}

// match renders one criterion of a valid rule into st, and checks what
// iptables alone refuses.
func (st *ruleRender) match(m netfilter.Match) error {
	switch c := m.(type) {
	case netfilter.MatchNet:
		slot := &st.src
		if c.Dir == netfilter.Dst {
			slot = &st.dst
		}
		*slot = netArg{set: true, neg: c.Negate, p: c.Prefix}
		return nil
	case netfilter.MatchProto:
		return nil // rendered in the header, see appendRestore
	case netfilter.MatchPorts:
		return st.ports(c)
	case netfilter.MatchIface:
		return st.iface(c)
	case netfilter.MatchMark:
		st.module("mark", c.Negate, "--mark")
		writeMark(&st.mods, c.Mark, c.Mask, c.Mask != ^uint32(0))
		return nil
	case netfilter.MatchSet:
		st.module("set", c.Negate, "--match-set")
		w := &st.mods
		w.tok(c.Name)
		n := w.begin()
		for i, d := range c.Dims {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, d.String()...)
		}
		w.end(n)
		return nil
	case netfilter.MatchConntrack:
		st.module("conntrack", c.Negate, "--ctstate")
		n := st.mods.begin()
		st.mods.b, _ = c.States.AppendText(st.mods.b)
		st.mods.end(n)
		return nil
	case netfilter.MatchAddrType:
		return st.addrType(c)
	case netfilter.MatchICMP:
		return st.icmp(c)
	case netfilter.MatchLimit:
		st.module("limit", false, "--limit")
		w := &st.mods
		n := w.begin()
		w.b = strconv.AppendUint(w.b, uint64(c.Rate), 10)
		w.b = append(w.b, '/')
		w.b = append(w.b, c.Per.String()...)
		w.end(n)
		w.lit("--limit-burst")
		n = w.begin()
		w.b = strconv.AppendUint(w.b, uint64(c.EffectiveBurst()), 10)
		w.end(n)
		return nil
	}
	return errs.Also(fmt.Errorf("iptables: criterion %T is not supported", m), netfilter.ErrUnsupported)
}

func (st *ruleRender) ports(m netfilter.MatchPorts) error {
	if len(m.Ranges) > 1 {
		n := 0
		for _, r := range m.Ranges {
			n += slots(r)
		}
		if n > MaxMultiPorts {
			return errRulef("%s port match needs %d multiport entries, over the limit of %d (a range counts as 2)", m.Dir, n, MaxMultiPorts)
		}
		opt := "--sports"
		if m.Dir == netfilter.Dst {
			opt = "--dports"
		}
		st.module("multiport", m.Negate, opt)
		w := &st.mods
		n = w.begin()
		for i, r := range m.Ranges {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = appendPorts(w.b, r, ':')
		}
		w.end(n)
		return nil
	}
	r, negate := m.Ranges[0], m.Negate
	if negate && r.First == 0 && r.Last > 0 {
		// As iptables-nft prints it: ! 0:1023 is 1024:65535.
		r, negate = netfilter.Ports(r.Last+1, 65535), false
	}
	if !st.sport.set && !st.dport.set {
		st.portAt = len(st.mods.b)
	}
	if m.Dir == netfilter.Src {
		st.sport = portArg{set: true, neg: negate, r: r}
	} else {
		st.dport = portArg{set: true, neg: negate, r: r}
	}
	return nil
}

// slots is how many multiport entries r takes.
func slots(r netfilter.PortRange) int {
	if r.First == r.Last {
		return 1
	}
	return 2
}

// appendPorts appends r to b with sep between the two ends of a range.
func appendPorts(b []byte, r netfilter.PortRange, sep byte) []byte {
	b = strconv.AppendUint(b, uint64(r.First), 10)
	if r.First == r.Last {
		return b
	}
	b = append(b, sep)
	return strconv.AppendUint(b, uint64(r.Last), 10)
}

func (st *ruleRender) iface(m netfilter.MatchIface) error {
	name := m.Name
	if name[0] == '-' || name[0] == '!' {
		return errRulef("interface name %q starts with %q, which iptables reads as an option", name, name[0])
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c <= ' ' || c > '~':
			return errRulef("interface name %q contains byte %#x, outside printable ASCII", name, c)
		case c == '"' || c == '\'' || c == '\\':
			return errRulef("interface name %q contains %q, which iptables-save does not print back", name, c)
		}
	}
	slot := &st.in
	err := st.allowed("an input interface criterion (-i)", "", "PREROUTING", "INPUT", "FORWARD")
	if m.Out {
		slot = &st.out
		err = st.allowed("an output interface criterion (-o)", "", "FORWARD", "OUTPUT", "POSTROUTING")
	}
	if err != nil {
		return err
	}
	*slot = ifaceArg{set: true, neg: m.Negate, name: name}
	return nil
}

func (st *ruleRender) addrType(m netfilter.MatchAddrType) error {
	opt := "--src-type"
	if m.Dir == netfilter.Dst {
		opt = "--dst-type"
	}
	st.module("addrtype", m.Negate, opt)
	n := st.mods.begin()
	st.mods.b, _ = m.Types.AppendText(st.mods.b)
	st.mods.end(n)
	switch {
	case m.LimitIfaceIn:
		st.mods.lit("--limit-iface-in")
		return st.allowed("--limit-iface-in", "", "PREROUTING", "INPUT", "FORWARD")
	case m.LimitIfaceOut:
		st.mods.lit("--limit-iface-out")
		return st.allowed("--limit-iface-out", "", "FORWARD", "OUTPUT", "POSTROUTING")
	}
	return nil
}

func (st *ruleRender) icmp(m netfilter.MatchICMP) error {
	proto, module, opt := netfilter.ProtoICMP, "icmp", "--icmp-type"
	if m.Family == ipfamily.IPv6 {
		proto, module, opt = netfilter.ProtoICMPv6, "icmp6", "--icmpv6-type"
	}
	if !st.proto.set {
		// The criterion brings its protocol: -p icmp, as iptables-save
		// prints it.
		st.proto = protoArg{set: true, p: proto}
	}
	st.module(module, m.Negate, opt)
	w := &st.mods
	switch {
	case m.Family == ipfamily.IPv4 && m.Type == 255:
		w.lit("any")
	case m.HasCode:
		w.sep()
		w.b = strconv.AppendUint(w.b, uint64(m.Type), 10)
		w.b = append(w.b, '/')
		w.b = strconv.AppendUint(w.b, uint64(m.Code), 10)
	default:
		w.uint(uint64(m.Type))
	}
	return nil
}

// writeMark writes a mark as one token, 0xMARK, or 0xMARK/0xMASK when
// withMask is set.
func writeMark(w *tokWriter, mark, mask uint32, withMask bool) {
	w.sep()
	w.b = appendHex32(w.b, mark)
	if withMask {
		w.b = append(w.b, '/')
		w.b = appendHex32(w.b, mask)
	}
}

// appendHex32 appends x as 0x%x.
func appendHex32(b []byte, x uint32) []byte {
	return strconv.AppendUint(append(b, '0', 'x'), uint64(x), 16)
}

// rejectNames are the --reject-with names per family.
var rejectNames = [...][2]string{
	netfilter.RejectPortUnreachable:  {"icmp-port-unreachable", "icmp6-port-unreachable"},
	netfilter.RejectTCPReset:         {"tcp-reset", "tcp-reset"},
	netfilter.RejectAdminProhibited:  {"icmp-admin-prohibited", "icmp6-adm-prohibited"},
	netfilter.RejectNetUnreachable:   {"icmp-net-unreachable", ""},
	netfilter.RejectHostUnreachable:  {"icmp-host-unreachable", ""},
	netfilter.RejectProtoUnreachable: {"icmp-proto-unreachable", ""},
	netfilter.RejectNetProhibited:    {"icmp-net-prohibited", ""},
	netfilter.RejectHostProhibited:   {"icmp-host-prohibited", ""},
	netfilter.RejectNoRoute:          {"", "icmp6-no-route"},
	netfilter.RejectAddrUnreachable:  {"", "icmp6-addr-unreachable"},
	netfilter.RejectPolicyFail:       {"", "icmp6-policy-fail"},
	netfilter.RejectRejectRoute:      {"", "icmp6-reject-route"},
}

// action renders the action of a valid rule to w (the -j/-g part), and
// checks what iptables alone refuses.
func (st *ruleRender) action(a netfilter.Action, w *tokWriter) error {
	switch a := a.(type) {
	case netfilter.ActionAccept:
		target(w, "-j", "ACCEPT")
	case netfilter.ActionDrop:
		if st.at.table == "nat" {
			return errRulef("DROP is not allowed in the nat table, which is not for filtering")
		}
		target(w, "-j", "DROP")
	case netfilter.ActionReturn:
		target(w, "-j", "RETURN")
	case netfilter.ActionReject:
		if err := st.allowed("REJECT", "filter", "INPUT", "FORWARD", "OUTPUT"); err != nil {
			return err
		}
		var name string
		if int(a.With) < len(rejectNames) {
			name = rejectNames[a.With][0]
			if st.v == ipfamily.IPv6 {
				name = rejectNames[a.With][1]
			}
		}
		if name == "" {
			return errs.Also(fmt.Errorf("iptables: reject with %v is not supported", a.With), netfilter.ErrUnsupported)
		}
		target(w, "-j", "REJECT")
		w.lit("--reject-with")
		w.tok(name)
	case netfilter.ActionJump:
		target(w, "-j", a.Chain)
	case netfilter.ActionGoto:
		target(w, "-g", a.Chain)
	case netfilter.ActionSetMark:
		target(w, "-j", "MARK")
		w.lit("--set-xmark")
		writeMark(w, a.Mark, a.Mask, true)
	case netfilter.ActionMasquerade:
		if err := st.allowed("MASQUERADE", "nat", "POSTROUTING"); err != nil {
			return err
		}
		target(w, "-j", "MASQUERADE")
		if a.ToPorts != (netfilter.PortRange{}) {
			w.lit("--to-ports")
			w.sep()
			w.b = appendPorts(w.b, a.ToPorts, '-')
		}
		if a.RandomFully {
			w.lit("--random-fully")
		}
	case netfilter.ActionSNAT:
		if err := st.allowed("SNAT", "nat", "POSTROUTING", "INPUT"); err != nil {
			return err
		}
		target(w, "-j", "SNAT")
		w.lit("--to-source")
		writeNATTarget(w, a.To, a.Ports)
		if a.RandomFully {
			w.lit("--random-fully")
		}
	case netfilter.ActionDNAT:
		if err := st.allowed("DNAT", "nat", "PREROUTING", "OUTPUT"); err != nil {
			return err
		}
		target(w, "-j", "DNAT")
		w.lit("--to-destination")
		writeNATTarget(w, a.To, a.Ports)
	case netfilter.ActionLog:
		if len(a.Prefix) > MaxLogPrefixLength {
			return errRulef("log prefix is %d bytes, longer than %d", len(a.Prefix), MaxLogPrefixLength)
		}
		target(w, "-j", "LOG")
		if a.Prefix != "" {
			w.lit("--log-prefix")
			w.tok(a.Prefix)
		}
		if l := a.Level.Syslog(); l != netfilter.LogLevelDefault.Syslog() {
			w.lit("--log-level")
			w.uint(uint64(l))
		}
	case netfilter.ActionNoTrack:
		if err := st.allowed("CT --notrack", "raw"); err != nil {
			return err
		}
		target(w, "-j", "CT")
		w.lit("--notrack")
	case netfilter.ActionNFLOG:
		if len(a.Prefix) > MaxNFLOGPrefixLength {
			return errRulef("NFLOG prefix is %d bytes, longer than %d", len(a.Prefix), MaxNFLOGPrefixLength)
		}
		target(w, "-j", "NFLOG")
		if a.Prefix != "" {
			w.lit("--nflog-prefix")
			w.tok(a.Prefix)
		}
		if a.Group != 0 {
			w.lit("--nflog-group")
			w.uint(uint64(a.Group))
		}
		if a.Size != 0 {
			w.lit("--nflog-size")
			w.uint(uint64(a.Size))
		}
	default:
		return errs.Also(fmt.Errorf("iptables: action %T is not supported", a), netfilter.ErrUnsupported)
	}
	return nil
}

// target writes the "-j TARGET" (or "-g CHAIN") of an action.
func target(w *tokWriter, opt, name string) {
	w.lit(opt)
	w.tok(name)
}

// writeNATTarget writes a NAT address and port range as --to-source and
// --to-destination take them: ADDR, ADDR:A-B, or [ADDR]:A-B for IPv6; the
// zero range is no range.
func writeNATTarget(w *tokWriter, to netip.Addr, r netfilter.PortRange) {
	n := w.begin()
	switch {
	case r == (netfilter.PortRange{}):
		w.b = to.AppendTo(w.b)
	case to.Is6():
		w.b = append(w.b, '[')
		w.b = to.AppendTo(w.b)
		w.b = append(w.b, ']', ':')
		w.b = appendPorts(w.b, r, '-')
	default:
		w.b = to.AppendTo(w.b)
		w.b = append(w.b, ':')
		w.b = appendPorts(w.b, r, '-')
	}
	w.end(n)
}

// appendMatch writes the rendered criteria to w: the header criteria,
// then the others with the shared port match at its place. It returns the
// length of the header criteria's text.
func (st *ruleRender) appendMatch(w *tokWriter) int {
	st.src.write(w, "-s")
	st.dst.write(w, "-d")
	st.in.write(w, "-i")
	st.out.write(w, "-o")
	if st.proto.set {
		w.neg(st.proto.neg)
		w.lit("-p")
		writeProto(w, st.proto.p)
	}
	cut := len(w.b) - w.start
	mods := st.mods.b
	if !st.sport.set && !st.dport.set {
		w.splice(mods)
		return cut
	}
	w.splice(mods[:st.portAt])
	w.lit("-m")
	writeProto(w, st.protoNum)
	st.sport.write(w, "--sport")
	st.dport.write(w, "--dport")
	w.splice(mods[st.portAt:])
	return cut
}

func (a *netArg) write(w *tokWriter, opt string) {
	if !a.set {
		return
	}
	w.neg(a.neg)
	w.lit(opt)
	n := w.begin()
	w.b = a.p.AppendTo(w.b)
	w.end(n)
}

func (a *ifaceArg) write(w *tokWriter, opt string) {
	if !a.set {
		return
	}
	w.neg(a.neg)
	w.lit(opt)
	w.tok(a.name)
}

func (a *portArg) write(w *tokWriter, opt string) {
	if !a.set {
		return
	}
	w.neg(a.neg)
	w.lit(opt)
	w.sep()
	w.b = appendPorts(w.b, a.r, ':')
}

// module writes "-m name [!] opt" to the criteria.
func (st *ruleRender) module(name string, negate bool, opt string) {
	st.mods.lit("-m")
	st.mods.lit(name)
	st.mods.neg(negate)
	st.mods.lit(opt)
}

// writeProto writes a protocol as iptables names it: by the name
// netfilter.Proto.String gives, which never needs quoting.
func writeProto(w *tokWriter, p netfilter.Proto) {
	w.sep()
	switch p {
	case netfilter.ProtoICMP, netfilter.ProtoTCP, netfilter.ProtoUDP, netfilter.ProtoESP, netfilter.ProtoAH,
		netfilter.ProtoICMPv6, netfilter.ProtoSCTP, netfilter.ProtoUDPLite:
		w.b = append(w.b, p.String()...)
	default:
		w.b = strconv.AppendUint(w.b, uint64(p), 10)
	}
}

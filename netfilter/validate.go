package netfilter

import (
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/ifname"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// MaxChainNameLength is the longest chain name: the limit of iptables,
// which nftables accepts too.
const MaxChainNameLength = 28

// Validate reports whether the rule is well formed for a table of family
// f, whatever the backend: every criterion and the action are the
// package's own values, addresses and protocols are of f, prefixes are
// networks, ports come with a protocol that has them, names and texts are
// valid, and the criteria do not contradict each other (two source
// prefixes, two protocols). The error matches ErrInvalidRule (and
// ErrWrongFamily, ErrInvalidChainName or ipfamily.ErrHostBits where that
// is the cause) and names the criterion or comment at fault. A backend
// checks more when the rule is declared: where the rule stands (which
// chain, which table) and its own limits.
//
// Validate does not allocate unless it fails.
func (r Rule) Validate(f ipfamily.Family) error {
	if !f.Valid() {
		return errRulef("unknown IP family %v", f)
	}
	if r.Action == nil {
		return errRulef("no action")
	}
	v := validator{f: f}
	for i, m := range r.Matches {
		switch c := m.(type) {
		case nil:
			return errRulef("no criterion (criterion %d)", i)
		case MatchProto:
			if v.protoCriterion {
				return errRulef("more than one protocol criterion (criterion %d)", i)
			}
			v.protoCriterion, v.proto, v.protoNeg = true, c.Proto, c.Negate
		case MatchLimit:
			if v.limit {
				return errRulef("more than one limit criterion (criterion %d)", i)
			}
			v.limit = true
		case MatchNet, MatchPorts, MatchIface, MatchMark, MatchSet, MatchConntrack, MatchAddrType, MatchICMP:
		default:
			return errRulef("criterion %d is a %T, not one of the Match values of package netfilter", i, m)
		}
	}
	for i, m := range r.Matches {
		if err := v.match(m); err != nil {
			return fmt.Errorf("%w (criterion %d)", err, i)
		}
	}
	for i, c := range r.Comments {
		if err := validateComment(c); err != nil {
			return fmt.Errorf("%w (comment %d)", err, i)
		}
	}
	return v.action(r.Action)
}

// validator holds what checking one rule has seen so far.
type validator struct {
	f ipfamily.Family
	// proto is the protocol of the rule's MatchProto, when protoCriterion;
	// protoNeg says it is negated.
	proto          Proto
	protoNeg       bool
	protoCriterion bool
	// The criteria a rule holds at most one of, per direction or side.
	src, dst, in, out, srcPorts, dstPorts, limit bool
}

// match checks one criterion against the rule.
func (v *validator) match(m Match) error {
	switch c := m.(type) {
	case MatchNet:
		return v.net(c)
	case MatchProto:
		switch {
		case c.Proto == 0:
			return errRulef("protocol 0 means any protocol: leave the protocol criterion out")
		case c.Proto == ProtoICMP && v.f == ipfamily.IPv6:
			return errFamilyf("protocol icmp in an IPv6 rule (use ProtoICMPv6)")
		case c.Proto == ProtoICMPv6 && v.f == ipfamily.IPv4:
			return errFamilyf("protocol ipv6-icmp in an IPv4 rule (use ProtoICMP)")
		}
		return nil
	case MatchPorts:
		return v.ports(c)
	case MatchIface:
		return v.iface(c)
	case MatchMark:
		return checkMark("mark match", c.Mark, c.Mask)
	case MatchSet:
		return checkSet(c)
	case MatchConntrack:
		switch {
		case c.States == 0:
			return errRulef("conntrack match without states")
		case c.States&^ctStateAll != 0:
			return errRulef("conntrack match with unknown states %v", c.States)
		}
		return nil
	case MatchAddrType:
		switch {
		case !c.Dir.valid():
			return errRulef("address type match with %v", c.Dir)
		case c.Types == 0:
			return errRulef("%s address type match without types", c.Dir)
		case c.Types&^addrTypeAll != 0:
			return errRulef("%s address type match with unknown types %v", c.Dir, c.Types)
		case c.LimitIfaceIn && c.LimitIfaceOut:
			return errRulef("address type match limited to both the input and the output interface")
		case v.f == ipfamily.IPv6 && c.Types&addrTypeIPv4Only != 0:
			return errFamilyf("address types %v do not exist for IPv6", c.Types&addrTypeIPv4Only)
		case v.f == ipfamily.IPv6 && c.Types&addrTypeIPv6Class != 0:
			// ip6tables tests these by the address's class (a local
			// address is unicast), nftables by its route (it is local):
			// the backends would give one packet two verdicts.
			return errs.Also(errRulef("address types %v of IPv6 mean the address's class to ip6tables and its route to nftables: match the address instead", c.Types&addrTypeIPv6Class), ErrUnsupported)
		}
		return nil
	case MatchICMP:
		return v.icmp(c)
	case MatchLimit:
		return c.validate()
	}
	return errRulef("criterion %T is not one of the Match values of package netfilter", m)
}

func (v *validator) net(m MatchNet) error {
	if !m.Dir.valid() {
		return errRulef("address match with %v", m.Dir)
	}
	if !m.Prefix.IsValid() {
		return errRulef("%s address match: invalid or zero prefix", m.Dir)
	}
	if !v.f.Contains(m.Prefix.Addr()) {
		return errFamilyf("%s prefix %s in an %v rule", m.Dir, m.Prefix, v.f)
	}
	if err := v.f.CheckNet(m.Prefix); err != nil {
		return fmt.Errorf("%w: %s prefix: %w", ErrInvalidRule, m.Dir, err)
	}
	if m.Negate && m.Prefix.Bits() == 0 {
		return errRulef("negated %s prefix %v matches no packet", m.Dir, m.Prefix)
	}
	seen := &v.src
	if m.Dir == Dst {
		seen = &v.dst
	}
	if *seen {
		return errRulef("more than one %s address criterion (match several prefixes with an IP set)", m.Dir)
	}
	*seen = true
	return nil
}

// portProto reports whether the rule has a protocol with ports: tcp, udp
// or sctp from a non-negated MatchProto.
func (v *validator) portProto() bool {
	return v.protoCriterion && !v.protoNeg && v.proto.hasPorts()
}

func (v *validator) ports(m MatchPorts) error {
	if !m.Dir.valid() {
		return errRulef("port match with %v", m.Dir)
	}
	if len(m.Ranges) == 0 {
		return errRulef("%s port match without ports", m.Dir)
	}
	if !v.portProto() {
		return errRulef("port match without tcp/udp/sctp protocol")
	}
	seen := &v.srcPorts
	if m.Dir == Dst {
		seen = &v.dstPorts
	}
	if *seen {
		return errRulef("more than one %s port criterion (put all the ports in one)", m.Dir)
	}
	*seen = true
	for _, r := range m.Ranges {
		if r.First > r.Last {
			return errRulef("port range %d:%d ends below its start", r.First, r.Last)
		}
	}
	if len(m.Ranges) == 1 && m.Ranges[0] == (PortRange{0, 65535}) {
		return errRulef("%s port range 0:65535 matches every port: leave the criterion out", m.Dir)
	}
	return nil
}

func (v *validator) iface(m MatchIface) error {
	if err := checkIfaceName(m.Name); err != nil {
		return err
	}
	seen, what := &v.in, "input"
	if m.Out {
		seen, what = &v.out, "output"
	}
	if *seen {
		return errRulef("more than one %s interface criterion", what)
	}
	*seen = true
	return nil
}

// checkIfaceName checks an interface name or "+"-wildcard pattern.
func checkIfaceName(name string) error {
	if name == "" || len(name) > MaxInterfaceNameLength {
		return errRulef("interface name %q must be 1 to %d characters", name, MaxInterfaceNameLength)
	}
	base := strings.TrimSuffix(name, "+")
	if strings.IndexByte(base, '+') >= 0 {
		return errRulef("interface name %q has a \"+\" before its end (only a trailing \"+\" wildcard is allowed)", name)
	}
	if base == "" {
		return nil // "+": any interface
	}
	if err := ifname.Valid(base); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRule, err)
	}
	return nil
}

// checkMark checks a mark and its mask.
func checkMark(what string, mark, mask uint32) error {
	if mask == 0 {
		return errRulef("%s with a zero mask", what)
	}
	if mark&^mask != 0 {
		return errRulef("%s: mark %#x has bits outside mask %#x", what, mark, mask)
	}
	return nil
}

func checkSet(m MatchSet) error { return checkSetRef("IP set", "IP set match", m.Name, m.Dims) }

// checkSetRef checks the name and dimensions of the IP set of a MatchSet,
// or of the verdict map of an ActionVerdictMap (what, used as ref).
func checkSetRef(what, ref, name string, dims []Direction) error {
	if name == "" || len(name) > MaxIPSetNameLength {
		return errRulef("%s name %q must be 1 to %d characters", what, name, MaxIPSetNameLength)
	}
	if name[0] == '-' || name[0] == '!' {
		return errRulef("%s name %q starts with %q", what, name, name[0])
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' || c == '"' || c == '\'' || c == '\\' {
			return errRulef("%s name %q contains %q", what, name, c)
		}
	}
	if len(dims) == 0 || len(dims) > MaxIPSetDimensions {
		return errRulef("%s %q has %d dimensions, want 1 to %d", ref, name, len(dims), MaxIPSetDimensions)
	}
	for i, d := range dims {
		if !d.valid() {
			return errRulef("%s %q: dimension %d has %v", ref, name, i+1, d)
		}
	}
	return nil
}

func (v *validator) icmp(m MatchICMP) error {
	if !m.Family.Valid() {
		return errRulef("ICMP type match of unknown IP family %v", m.Family)
	}
	proto := ProtoICMP
	if m.Family == ipfamily.IPv6 {
		proto = ProtoICMPv6
	}
	if m.Family != v.f {
		return errFamilyf("%s type match in an %v rule", proto, v.f)
	}
	if m.Family == ipfamily.IPv4 && m.Type == 255 && m.HasCode {
		return errRulef("ICMP type 255 means any type and takes no code")
	}
	if v.protoCriterion && (v.proto != proto || v.protoNeg) {
		desc := v.proto.String()
		if v.protoNeg {
			desc = "! " + desc
		}
		return errRulef("%s type match in a rule whose protocol criterion is %s", proto, desc)
	}
	return nil
}

// action checks the rule's action against its criteria.
func (v *validator) action(a Action) error {
	switch a := a.(type) {
	case ActionAccept, ActionDrop, ActionReturn, ActionNoTrack:
		return nil
	case ActionReject:
		if a.With >= rejectWithCount {
			return errRulef("unknown reject reply %v", a.With)
		}
		if r := rejectReplies[a.With]; v.f == ipfamily.IPv4 && !r.v4 || v.f == ipfamily.IPv6 && !r.v6 {
			return errFamilyf("reject with %v does not exist in %v", a.With, v.f)
		}
		if a.With == RejectTCPReset && (!v.protoCriterion || v.proto != ProtoTCP || v.protoNeg) {
			return errRulef("reject with tcp-reset needs a tcp protocol criterion")
		}
		return nil
	case ActionJump:
		return checkTargetChain("jump", a.Chain)
	case ActionGoto:
		return checkTargetChain("goto", a.Chain)
	case ActionSetMark:
		return checkMark("set mark", a.Mark, a.Mask)
	case ActionMasquerade:
		return v.natPorts("masquerade", a.ToPorts)
	case ActionSNAT:
		return v.natTarget("SNAT", a.To, a.Ports)
	case ActionDNAT:
		return v.natTarget("DNAT", a.To, a.Ports)
	case ActionLog:
		if err := checkText("log prefix", a.Prefix); err != nil {
			return err
		}
		if a.Level > LogLevelDebug {
			return errRulef("unknown log level %d", a.Level)
		}
		return nil
	case ActionNFLOG:
		return checkText("NFLOG prefix", a.Prefix)
	case ActionVerdictMap:
		return checkSetRef("verdict map", "verdict map", a.Map, a.Dims)
	}
	return errRulef("action is a %T, not one of the Action values of package netfilter", a)
}

// natTarget checks a NAT address and port range.
func (v *validator) natTarget(what string, to netip.Addr, ports PortRange) error {
	switch {
	case !to.IsValid():
		return errRulef("%s without an address", what)
	case to.Zone() != "":
		return errRulef("%s address %v has a zone", what, to)
	case !v.f.Contains(to):
		return errFamilyf("%s address %s in an %v rule", what, to, v.f)
	case to.IsUnspecified():
		return errRulef("%s to the unspecified address %v", what, to)
	}
	return v.natPorts(what, ports)
}

// natPorts checks a NAT port range; the zero range is no range.
func (v *validator) natPorts(what string, r PortRange) error {
	if r == (PortRange{}) {
		return nil
	}
	if r.First == 0 || r.First > r.Last {
		return errRulef("%s port range %d-%d must be 1 to 65535 and not end below its start", what, r.First, r.Last)
	}
	if !v.portProto() {
		return errRulef("%s ports without tcp/udp/sctp protocol", what)
	}
	return nil
}

// reservedTargets are names that a jump reads as a built-in chain or a
// target, never as a chain of ours.
var reservedTargets = map[string]bool{
	"INPUT": true, "FORWARD": true, "OUTPUT": true, "PREROUTING": true, "POSTROUTING": true,
	"ACCEPT": true, "DROP": true, "RETURN": true, "QUEUE": true, "NFQUEUE": true,
	"REJECT": true, "LOG": true, "NFLOG": true, "ULOG": true, "MARK": true, "CONNMARK": true,
	"MASQUERADE": true, "SNAT": true, "DNAT": true, "REDIRECT": true, "NETMAP": true,
	"CT": true, "NOTRACK": true, "TPROXY": true, "TCPMSS": true, "TRACE": true,
	"CHECKSUM": true, "CLASSIFY": true, "DSCP": true, "TOS": true, "TTL": true, "HL": true,
	"SET": true, "AUDIT": true, "SECMARK": true, "CONNSECMARK": true, "IDLETIMER": true,
	"SYNPROXY": true, "TEE": true, "TCPOPTSTRIP": true, "ECN": true, "HMARK": true,
	"LED": true, "RATEEST": true, "CLUSTERIP": true,
}

// checkTargetChain checks the chain of a jump or goto; the error matches
// ErrInvalidRule and ErrInvalidChainName.
func checkTargetChain(kind, chain string) error {
	p := chainNameProblem(chain)
	if p == "" && reservedTargets[chain] {
		p = fmt.Sprintf("%q is a built-in chain or a target, not a user chain", chain)
	}
	if p == "" {
		return nil
	}
	return errs.Also(errRulef("%s target %s", kind, p), ErrInvalidChainName)
}

// ValidateChainName checks a chain name: 1 to MaxChainNameLength printable
// ASCII characters, without blanks or quotes, not starting with "-" or
// "!". The error matches ErrInvalidChainName.
func ValidateChainName(name string) error {
	if p := chainNameProblem(name); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalidChainName, p)
	}
	return nil
}

// chainNameProblem says what is wrong with a chain name, or "".
func chainNameProblem(name string) string {
	if name == "" || len(name) > MaxChainNameLength {
		return fmt.Sprintf("%q must be 1 to %d characters", name, MaxChainNameLength)
	}
	if name[0] == '-' || name[0] == '!' {
		return fmt.Sprintf("%q starts with %q", name, name[0])
	}
	for _, r := range name {
		if r <= ' ' || r > '~' || r == '"' || r == '\'' {
			return fmt.Sprintf("%q contains %q", name, r)
		}
	}
	return ""
}

// validateComment checks one comment of a rule.
func validateComment(c string) error {
	if c == "" {
		return errRulef("empty comment")
	}
	return checkText("comment", c)
}

// checkText checks free text of a rule (comments, log prefixes): printable
// UTF-8, without control characters, double quotes or backslashes, which
// iptables-restore input would need to escape and iptables-save prints
// back escaped.
func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return errRulef("%s %q is not valid UTF-8", what, s)
	}
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r':
			return errRulef("%s %q contains a newline", what, s)
		case r == '"' || r == '\\':
			return errRulef("%s %q contains a double quote or a backslash", what, s)
		case r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return errRulef("%s %q contains a control character", what, s)
		}
	}
	return nil
}

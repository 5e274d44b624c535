package iptables

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/nodeplane/nodeplane/internal/errs"
)

// Limits that iptables and the kernel put on actions.
const (
	// MaxLogPrefixLength is the longest LOG prefix; the kernel would cut a
	// longer one silently.
	MaxLogPrefixLength = 29
	// MaxNFLOGPrefixLength is the longest NFLOG prefix; iptables-legacy
	// would cut a longer one silently.
	MaxNFLOGPrefixLength = 63
)

// AcceptAction lets the packet through (-j ACCEPT).
type AcceptAction struct{}

// Accept returns the action that lets the packet through.
func Accept() Action { return AcceptAction{} }

func (a AcceptAction) iptablesArgs(v IPVersion) ([]string, error) { return actionArgs(a, v) }

// JumpTarget returns "".
func (AcceptAction) JumpTarget() string { return "" }

func (AcceptAction) render(_ *ruleRender, w *tokWriter) error { return target(w, "-j", "ACCEPT") }

// DropAction drops the packet silently (-j DROP). iptables refuses it in
// the nat table, which is not meant for filtering; a Table of the nat
// table refuses it when declared.
type DropAction struct{}

// Drop returns the action that drops the packet.
func Drop() Action { return DropAction{} }

func (a DropAction) iptablesArgs(v IPVersion) ([]string, error) { return actionArgs(a, v) }

// JumpTarget returns "".
func (DropAction) JumpTarget() string { return "" }

func (DropAction) render(st *ruleRender, w *tokWriter) error {
	if st.at.table == "nat" {
		return errRulef("DROP is not allowed in the nat table, which is not for filtering")
	}
	return target(w, "-j", "DROP")
}

// ReturnAction returns from the current chain to the one that jumped to it
// (-j RETURN); in a built-in chain it applies the chain's policy.
type ReturnAction struct{}

// Return returns the action that leaves the current chain.
func Return() Action { return ReturnAction{} }

func (a ReturnAction) iptablesArgs(v IPVersion) ([]string, error) { return actionArgs(a, v) }

// JumpTarget returns "".
func (ReturnAction) JumpTarget() string { return "" }

func (ReturnAction) render(_ *ruleRender, w *tokWriter) error { return target(w, "-j", "RETURN") }

// RejectWith is the reply a RejectAction sends. The zero value is
// RejectPortUnreachable, the default of iptables for both IP versions.
type RejectWith uint8

// Replies of a RejectAction. Some exist in one IP version only; using one
// in a rule of the other version is ErrWrongIPVersion.
const (
	// RejectPortUnreachable: icmp-port-unreachable (IPv4),
	// icmp6-port-unreachable (IPv6).
	RejectPortUnreachable RejectWith = iota
	// RejectTCPReset: a TCP RST; the Match must have Protocol(ProtoTCP).
	RejectTCPReset
	// RejectAdminProhibited: icmp-admin-prohibited (IPv4),
	// icmp6-adm-prohibited (IPv6).
	RejectAdminProhibited
	// RejectNetUnreachable: icmp-net-unreachable (IPv4 only).
	RejectNetUnreachable
	// RejectHostUnreachable: icmp-host-unreachable (IPv4 only).
	RejectHostUnreachable
	// RejectProtoUnreachable: icmp-proto-unreachable (IPv4 only).
	RejectProtoUnreachable
	// RejectNetProhibited: icmp-net-prohibited (IPv4 only).
	RejectNetProhibited
	// RejectHostProhibited: icmp-host-prohibited (IPv4 only).
	RejectHostProhibited
	// RejectNoRoute: icmp6-no-route (IPv6 only).
	RejectNoRoute
	// RejectAddrUnreachable: icmp6-addr-unreachable (IPv6 only).
	RejectAddrUnreachable
	// RejectPolicyFail: icmp6-policy-fail (IPv6 only).
	RejectPolicyFail
	// RejectRejectRoute: icmp6-reject-route (IPv6 only).
	RejectRejectRoute

	rejectWithCount
)

// rejectNames holds the --reject-with names per version; "" means the
// reply does not exist in that version.
var rejectNames = [rejectWithCount]struct{ v4, v6, name string }{
	RejectPortUnreachable:  {"icmp-port-unreachable", "icmp6-port-unreachable", "port-unreachable"},
	RejectTCPReset:         {"tcp-reset", "tcp-reset", "tcp-reset"},
	RejectAdminProhibited:  {"icmp-admin-prohibited", "icmp6-adm-prohibited", "admin-prohibited"},
	RejectNetUnreachable:   {"icmp-net-unreachable", "", "net-unreachable"},
	RejectHostUnreachable:  {"icmp-host-unreachable", "", "host-unreachable"},
	RejectProtoUnreachable: {"icmp-proto-unreachable", "", "proto-unreachable"},
	RejectNetProhibited:    {"icmp-net-prohibited", "", "net-prohibited"},
	RejectHostProhibited:   {"icmp-host-prohibited", "", "host-prohibited"},
	RejectNoRoute:          {"", "icmp6-no-route", "no-route"},
	RejectAddrUnreachable:  {"", "icmp6-addr-unreachable", "addr-unreachable"},
	RejectPolicyFail:       {"", "icmp6-policy-fail", "policy-fail"},
	RejectRejectRoute:      {"", "icmp6-reject-route", "reject-route"},
}

// String names the reply without its version prefix, such as
// "port-unreachable" or "tcp-reset".
func (w RejectWith) String() string {
	if w < rejectWithCount {
		return rejectNames[w].name
	}
	return "RejectWith(" + strconv.Itoa(int(w)) + ")"
}

// RejectAction drops the packet and answers with an error (-j REJECT
// --reject-with …). The kernel allows it only in the filter table's INPUT,
// FORWARD and OUTPUT chains and chains called from them: a Table refuses it
// when declared in another table or built-in chain (an error matching
// ErrInvalidRule), and the kernel refuses an owned chain holding it that
// another built-in chain reaches (see ObjectError).
type RejectAction struct {
	// With is the reply; the zero value is port unreachable.
	With RejectWith
}

// Reject returns the action that rejects the packet with reply with.
func Reject(with RejectWith) Action { return RejectAction{With: with} }

func (a RejectAction) iptablesArgs(v IPVersion) ([]string, error) { return actionArgs(a, v) }

// JumpTarget returns "".
func (RejectAction) JumpTarget() string { return "" }

func (a RejectAction) render(st *ruleRender, w *tokWriter) error {
	if a.With >= rejectWithCount {
		return errRulef("unknown reject reply %v", a.With)
	}
	name := rejectNames[a.With].v4
	if st.v == IPv6 {
		name = rejectNames[a.With].v6
	}
	if name == "" {
		return errVersionf("reject with %v does not exist in %v", a.With, st.v)
	}
	if a.With == RejectTCPReset && (!st.protoCriterion || st.protoNum != ProtoTCP || st.protoNeg) {
		return errRulef("reject with tcp-reset needs a tcp protocol criterion")
	}
	if err := st.allowed("REJECT", "filter", "INPUT", "FORWARD", "OUTPUT"); err != nil {
		return err
	}
	_ = target(w, "-j", "REJECT")
	w.lit("--reject-with")
	w.tok(name)
	return nil
}

// JumpAction continues in another chain and comes back after it (-j
// CHAIN). The chain must be a valid user chain name (ValidateChainName),
// not a built-in chain or a target name.
type JumpAction struct {
	// Chain is the chain to jump to.
	Chain string
}

// Jump returns the action that jumps to chain.
func Jump(chain string) Action { return JumpAction{Chain: chain} }

func (a JumpAction) iptablesArgs(v IPVersion) ([]string, error) { return actionArgs(a, v) }

// JumpTarget returns the chain jumped to.
func (a JumpAction) JumpTarget() string { return a.Chain }

func (a JumpAction) render(_ *ruleRender, w *tokWriter) error {
	if err := validateTargetChain("jump", a.Chain); err != nil {
		return err
	}
	return target(w, "-j", a.Chain)
}

// GotoAction continues in another chain without coming back (-g CHAIN):
// a RETURN there returns to the chain that jumped to this one. The chain
// is checked as for JumpAction.
type GotoAction struct {
	// Chain is the chain to go to.
	Chain string
}

// Goto returns the action that goes to chain.
func Goto(chain string) Action { return GotoAction{Chain: chain} }

func (a GotoAction) iptablesArgs(v IPVersion) ([]string, error) { return actionArgs(a, v) }

// JumpTarget returns the chain gone to.
func (a GotoAction) JumpTarget() string { return a.Chain }

func (a GotoAction) render(_ *ruleRender, w *tokWriter) error {
	if err := validateTargetChain("goto", a.Chain); err != nil {
		return err
	}
	return target(w, "-g", a.Chain)
}

// reservedTargets are names that -j reads as a built-in chain or a target,
// never as a user chain.
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

// validateTargetChain checks the chain of a jump or goto; the error
// matches ErrInvalidRule and ErrInvalidChainName.
func validateTargetChain(kind, chain string) error {
	p := chainNameProblem(chain)
	if p == "" && reservedTargets[chain] {
		p = fmt.Sprintf("%q is a built-in chain or a target, not a user chain", chain)
	}
	if p == "" {
		return nil
	}
	return errs.Also(errRulef("%s target %s", kind, p), ErrInvalidChainName)
}

// SetMarkAction sets the packet's mark bits under Mask to Mark (-j MARK
// --set-xmark 0xMARK/0xMASK, the form iptables-save prints for every MARK
// variant). Mark must lie within Mask and Mask must not be zero. SetMark,
// SetMaskedMark and ClearMark build it.
type SetMarkAction struct {
	// Mark is the new value of the bits under Mask.
	Mark uint32
	// Mask selects the bits that change; the others keep their value.
	Mask uint32
}

// SetMark sets the whole packet mark to mark.
func SetMark(mark uint32) Action { return SetMarkAction{Mark: mark, Mask: ^uint32(0)} }

// SetMaskedMark sets the mark bits under mask to mark, keeping the others.
func SetMaskedMark(mark, mask uint32) Action { return SetMarkAction{Mark: mark, Mask: mask} }

// ClearMark clears the mark bits under mask, keeping the others.
func ClearMark(mask uint32) Action { return SetMarkAction{Mask: mask} }

func (a SetMarkAction) iptablesArgs(v IPVersion) ([]string, error) { return actionArgs(a, v) }

// JumpTarget returns "".
func (SetMarkAction) JumpTarget() string { return "" }

func (a SetMarkAction) render(_ *ruleRender, w *tokWriter) error {
	if err := checkMark("set mark", a.Mark, a.Mask); err != nil {
		return err
	}
	_ = target(w, "-j", "MARK")
	w.lit("--set-xmark")
	writeMark(w, a.Mark, a.Mask, true)
	return nil
}

// MasqueradeOptions are the options of Masquerade.
type MasqueradeOptions struct {
	// RandomFully randomises source ports fully (--random-fully).
	RandomFully bool
	// ToPorts, when not zero, limits source ports to this range
	// (--to-ports); it needs a tcp, udp or sctp protocol criterion.
	ToPorts PortRange
}

// MasqueradeAction translates the source address to the address of the
// output interface (-j MASQUERADE [--to-ports A-B] [--random-fully]).
// Only in the nat table's POSTROUTING chain and chains called from it
// (checked as for RejectAction).
type MasqueradeAction struct {
	// RandomFully randomises source ports fully.
	RandomFully bool
	// ToPorts, when not zero, limits source ports to this range; it needs
	// a tcp, udp or sctp protocol criterion and must not start at 0.
	ToPorts PortRange
}

// Masquerade returns the masquerade action with options opts.
func Masquerade(opts MasqueradeOptions) Action {
	return MasqueradeAction(opts)
}

func (a MasqueradeAction) iptablesArgs(v IPVersion) ([]string, error) { return actionArgs(a, v) }

// JumpTarget returns "".
func (MasqueradeAction) JumpTarget() string { return "" }

func (a MasqueradeAction) render(st *ruleRender, w *tokWriter) error {
	if err := st.allowed("MASQUERADE", "nat", "POSTROUTING"); err != nil {
		return err
	}
	ports, err := st.natPorts("masquerade", a.ToPorts)
	if err != nil {
		return err
	}
	_ = target(w, "-j", "MASQUERADE")
	if ports {
		w.lit("--to-ports")
		w.sep()
		w.b = a.ToPorts.appendTo(w.b, '-')
	}
	if a.RandomFully {
		w.lit("--random-fully")
	}
	return nil
}

// SNATOptions are the options of SNAT.
type SNATOptions struct {
	// RandomFully randomises source ports fully (--random-fully).
	RandomFully bool
	// Ports, when not zero, limits source ports to this range; it needs a
	// tcp, udp or sctp protocol criterion.
	Ports PortRange
}

// SNATAction translates the source address to To (-j SNAT --to-source
// ADDR[:A-B] [--random-fully]; IPv6 with ports is [ADDR]:A-B). Only in the
// nat table's POSTROUTING and INPUT chains and chains called from them
// (checked as for RejectAction).
type SNATAction struct {
	// To is the new source address, of the rule's IP version.
	To netip.Addr
	// Ports, when not zero, limits source ports to this range; it needs a
	// tcp, udp or sctp protocol criterion and must not start at 0.
	Ports PortRange
	// RandomFully randomises source ports fully.
	RandomFully bool
}

// SNAT returns the action that translates the source address to to.
func SNAT(to netip.Addr, opts SNATOptions) Action {
	return SNATAction{To: to, Ports: opts.Ports, RandomFully: opts.RandomFully}
}

func (a SNATAction) iptablesArgs(v IPVersion) ([]string, error) { return actionArgs(a, v) }

// JumpTarget returns "".
func (SNATAction) JumpTarget() string { return "" }

func (a SNATAction) render(st *ruleRender, w *tokWriter) error {
	if err := st.allowed("SNAT", "nat", "POSTROUTING", "INPUT"); err != nil {
		return err
	}
	ports, err := st.natTarget("SNAT", a.To, a.Ports)
	if err != nil {
		return err
	}
	_ = target(w, "-j", "SNAT")
	w.lit("--to-source")
	writeNATTarget(w, a.To, a.Ports, ports)
	if a.RandomFully {
		w.lit("--random-fully")
	}
	return nil
}

// DNATAction translates the destination address, and optionally port, to
// To and Ports (-j DNAT --to-destination ADDR[:A-B]; IPv6 with ports is
// [ADDR]:A-B). Only in the nat table's PREROUTING and OUTPUT chains and
// chains called from them (checked as for RejectAction).
type DNATAction struct {
	// To is the new destination address, of the rule's IP version.
	To netip.Addr
	// Ports, when not zero, is the new destination port (or range); it
	// needs a tcp, udp or sctp protocol criterion and must not start at 0.
	Ports PortRange
}

// DNAT returns the action that translates the destination to to; a zero
// port keeps the packet's port (use netip.AddrPortFrom(addr, 0)).
func DNAT(to netip.AddrPort) Action {
	a := DNATAction{To: to.Addr()}
	if to.Port() != 0 {
		a.Ports = Port(to.Port())
	}
	return a
}

func (a DNATAction) iptablesArgs(v IPVersion) ([]string, error) { return actionArgs(a, v) }

// JumpTarget returns "".
func (DNATAction) JumpTarget() string { return "" }

func (a DNATAction) render(st *ruleRender, w *tokWriter) error {
	if err := st.allowed("DNAT", "nat", "PREROUTING", "OUTPUT"); err != nil {
		return err
	}
	ports, err := st.natTarget("DNAT", a.To, a.Ports)
	if err != nil {
		return err
	}
	_ = target(w, "-j", "DNAT")
	w.lit("--to-destination")
	writeNATTarget(w, a.To, a.Ports, ports)
	return nil
}

// natTarget checks a NAT address and port range; it reports whether the
// range is used (not zero).
func (st *ruleRender) natTarget(what string, to netip.Addr, ports PortRange) (bool, error) {
	if !to.IsValid() {
		return false, errRulef("%s without an address", what)
	}
	if to.Zone() != "" {
		return false, errRulef("%s address %v has a zone", what, to)
	}
	if wrongVersion(st.v, to) {
		return false, errVersionf("%s address %s in an %v rule", what, to, st.v)
	}
	if to.IsUnspecified() {
		return false, errRulef("%s to the unspecified address %v", what, to)
	}
	return st.natPorts(what, ports)
}

// writeNATTarget writes a NAT address and port range as --to-source and
// --to-destination take them: ADDR, ADDR:A-B, or [ADDR]:A-B for IPv6.
func writeNATTarget(w *tokWriter, to netip.Addr, r PortRange, ports bool) {
	n := w.begin()
	switch {
	case !ports:
		w.b = to.AppendTo(w.b)
	case to.Is6():
		w.b = append(w.b, '[')
		w.b = to.AppendTo(w.b)
		w.b = append(w.b, ']', ':')
		w.b = r.appendTo(w.b, '-')
	default:
		w.b = to.AppendTo(w.b)
		w.b = append(w.b, ':')
		w.b = r.appendTo(w.b, '-')
	}
	w.end(n)
}

// natPorts checks a NAT port range (rendered as A-B); it reports whether
// the range is used: the zero range is no range.
func (st *ruleRender) natPorts(what string, r PortRange) (bool, error) {
	if r == (PortRange{}) {
		return false, nil
	}
	if r.First == 0 || r.First > r.Last {
		return false, errRulef("%s port range %d-%d must be 1 to 65535 and not end below its start", what, r.First, r.Last)
	}
	if _, ok := st.portProto(); !ok {
		return false, errRulef("%s ports without tcp/udp/sctp protocol", what)
	}
	return true, nil
}

// LogLevel is the syslog level of a LogAction. The zero value is
// LogLevelDefault, which iptables treats as LogLevelWarning.
type LogLevel uint8

// Log levels, from most to least severe.
const (
	// LogLevelDefault is warning, the level iptables uses when none is
	// given.
	LogLevelDefault LogLevel = iota
	LogLevelEmerg
	LogLevelAlert
	LogLevelCrit
	LogLevelErr
	LogLevelWarning
	LogLevelNotice
	LogLevelInfo
	LogLevelDebug
)

// syslog returns the syslog level number (0 emerg … 7 debug).
func (l LogLevel) syslog() int {
	if l == LogLevelDefault {
		return int(LogLevelWarning) - 1
	}
	return int(l) - 1
}

// LogOptions are the options of Log.
type LogOptions struct {
	// Prefix starts every log line; at most MaxLogPrefixLength bytes of
	// printable text without double quotes or backslashes. Empty means no
	// prefix.
	Prefix string
	// Level is the syslog level; zero is warning.
	Level LogLevel
}

// LogAction logs the packet to the kernel log and goes on with the next
// rule (-j LOG [--log-prefix P] [--log-level N]; the level is left out
// when it is warning, as iptables-save prints it). In a network namespace
// other than the initial one the kernel logs only when the
// net.netfilter.nf_log_all_netns sysctl is set.
type LogAction struct {
	// Prefix starts every log line; empty means none.
	Prefix string
	// Level is the syslog level; zero is warning.
	Level LogLevel
}

// Log returns the action that logs the packet with options opts.
func Log(opts LogOptions) Action { return LogAction(opts) }

func (a LogAction) iptablesArgs(v IPVersion) ([]string, error) { return actionArgs(a, v) }

// JumpTarget returns "".
func (LogAction) JumpTarget() string { return "" }

func (a LogAction) render(_ *ruleRender, w *tokWriter) error {
	if err := validateText("log prefix", a.Prefix, MaxLogPrefixLength); err != nil {
		return err
	}
	if a.Level > LogLevelDebug {
		return errRulef("unknown log level %d", a.Level)
	}
	_ = target(w, "-j", "LOG")
	if a.Prefix != "" {
		w.lit("--log-prefix")
		w.tok(a.Prefix)
	}
	if l := a.Level.syslog(); l != int(LogLevelWarning)-1 {
		w.lit("--log-level")
		w.uint(uint64(l))
	}
	return nil
}

// NoTrackAction exempts the packet from connection tracking (-j CT
// --notrack; the older NOTRACK target is deprecated). Only in the raw
// table: a Table of another table refuses it when declared.
type NoTrackAction struct{}

// NoTrack returns the action that exempts the packet from connection
// tracking.
func NoTrack() Action { return NoTrackAction{} }

func (a NoTrackAction) iptablesArgs(v IPVersion) ([]string, error) { return actionArgs(a, v) }

// JumpTarget returns "".
func (NoTrackAction) JumpTarget() string { return "" }

func (NoTrackAction) render(st *ruleRender, w *tokWriter) error {
	if err := st.allowed("CT --notrack", "raw"); err != nil {
		return err
	}
	_ = target(w, "-j", "CT")
	w.lit("--notrack")
	return nil
}

// NFLOGOptions are the options of NFLOG.
type NFLOGOptions struct {
	// Group is the netlink log group (0 is iptables' default).
	Group uint16
	// Prefix is passed with every packet; at most MaxNFLOGPrefixLength
	// bytes of printable text without double quotes or backslashes. Empty
	// means no prefix.
	Prefix string
	// Size is how many bytes of each packet to copy; 0 copies the whole
	// packet.
	Size uint32
}

// NFLOGAction sends the packet to a netlink log group and goes on with the
// next rule (-j NFLOG [--nflog-prefix P] [--nflog-group G] [--nflog-size
// S], leaving out zero values as iptables-save does).
type NFLOGAction struct {
	// Group is the netlink log group.
	Group uint16
	// Prefix is passed with every packet; empty means none.
	Prefix string
	// Size is how many bytes of each packet to copy; 0 copies all.
	Size uint32
}

// NFLOG returns the action that sends the packet to a netlink log group.
func NFLOG(opts NFLOGOptions) Action {
	return NFLOGAction(opts)
}

func (a NFLOGAction) iptablesArgs(v IPVersion) ([]string, error) { return actionArgs(a, v) }

// JumpTarget returns "".
func (NFLOGAction) JumpTarget() string { return "" }

func (a NFLOGAction) render(_ *ruleRender, w *tokWriter) error {
	if err := validateText("NFLOG prefix", a.Prefix, MaxNFLOGPrefixLength); err != nil {
		return err
	}
	_ = target(w, "-j", "NFLOG")
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
	return nil
}

// target writes the "-j TARGET" (or "-g CHAIN") of an action; it returns
// nil, so that simple actions can return it.
func target(w *tokWriter, opt, name string) error {
	w.lit(opt)
	w.tok(name)
	return nil
}

// actionArgs renders one action alone, for Action.iptablesArgs: without
// criteria, actions that need a protocol fail.
func actionArgs(a actionRenderer, v IPVersion) ([]string, error) {
	if !v.Valid() {
		return nil, errRulef("unknown IP version %v", v)
	}
	var st ruleRender
	st.reset(v, placement{})
	var w tokWriter
	if err := a.render(&st, &w); err != nil {
		return nil, err
	}
	return splitTokens(string(w.b)), nil
}

// normalizeAction returns the action of a rule, dereferencing a pointer to
// one of the package's actions; a nil action is an error.
func normalizeAction(a Action) (Action, error) {
	a, err := derefValue(a, "action")
	if err != nil {
		return nil, err
	}
	return a, nil
}

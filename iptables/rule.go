package iptables

import (
	"fmt"
	"unicode/utf8"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// IPVersion selects the iptables family: IPv4 (iptables) or IPv6
// (ip6tables). It is ipfamily.Family, shared by every nodeplane package.
type IPVersion = ipfamily.Family

// The two IP versions.
const (
	// IPv4 selects iptables.
	IPv4 = ipfamily.IPv4
	// IPv6 selects ip6tables.
	IPv6 = ipfamily.IPv6
)

// MaxChainNameLength is the longest chain name iptables accepts.
const MaxChainNameLength = 28

// Rule is one iptables rule: packets that satisfy every criterion of Match
// get Action. Comments are rendered as comment matches after the match
// criteria.
//
// A Rule is plain data: building one never fails. It is checked when it is
// rendered (Args) or validated (Validate) for one IP version, so a bad
// prefix, a port without a protocol or an IPv4 address in an IPv6 rule is an
// error at the API and nothing is written.
type Rule struct {
	// Match is the conjunction of match criteria; empty matches all packets.
	Match Match
	// Action is what happens to a matching packet. Required.
	Action Action
	// Comments are free text (each 1 to MaxCommentLength bytes of
	// printable UTF-8, without double quote or backslash); they do not
	// change what the rule does.
	Comments []string
}

// MaxCommentLength is the longest comment iptables keeps; longer ones
// would be cut silently by the kernel, so Args refuses them.
const MaxCommentLength = 255

// Criterion is one match criterion. The set of criteria is closed: the
// package's own types (NetMatch, ProtoMatch, PortMatch, IfaceMatch,
// MarkMatch, SetMatch, ConntrackMatch, AddrTypeMatch, ICMPMatch), built by
// constructors such as SourceNet and Protocol, are the only
// implementations, so that every backend (iptables-restore, native
// nftables) can render each of them. A pointer to one of these types is
// accepted too; a nil pointer is an error, not a panic.
type Criterion interface {
	// iptablesArgs renders the criterion alone for iptables of version v.
	iptablesArgs(v IPVersion) ([]string, error)
}

// Match is a conjunction of criteria. Args renders the criteria that
// iptables keeps in the rule's IP header part first, in the order
// iptables-save prints them (-s, -d, -i, -o, -p), then every other
// criterion in the order given; the order does not change what matches.
type Match []Criterion

// Action is what a rule does with a matching packet. As with Criterion, the
// set of actions is closed: AcceptAction, DropAction, RejectAction,
// ReturnAction, JumpAction, GotoAction, SetMarkAction, MasqueradeAction,
// SNATAction, DNATAction, LogAction, NoTrackAction and NFLOGAction, built by
// Accept, Drop, Reject, … (pointers to them are accepted too).
type Action interface {
	// iptablesArgs renders the action (the -j/-g part) for version v.
	iptablesArgs(v IPVersion) ([]string, error)
	// JumpTarget returns the chain a jump or goto action refers to, and ""
	// for every other action. Table writers use it to program only the
	// chains that are referenced.
	JumpTarget() string
}

// Args renders the rule as iptables arguments, without the chain (-A
// CHAIN) part: header criteria (-s, -d, -i, -o, -p), the other criteria in
// order, then comments, then the action. For every rule of the package's
// own criteria and actions the result is the form iptables-save prints
// back (so `-D CHAIN <args>` finds the rule), except where noted on a
// criterion. The rendering is deterministic: equal rules give equal
// arguments. An invalid rule is an error wrapping ErrInvalidRule (and
// ErrWrongIPVersion or ErrInvalidChainName where that is the cause), with
// no arguments.
func (r Rule) Args(v IPVersion) ([]string, error) {
	sc := getScratch()
	defer putScratch(sc)
	b, _, err := r.appendRestore(sc.buf[:0], v, placement{}, &sc.st)
	if err != nil {
		return nil, err
	}
	sc.buf = b
	return splitTokens(string(b)), nil
}

// Validate reports whether the rule can be rendered for version v: it is
// Args without the result. The error is the one Args would return.
func (r Rule) Validate(v IPVersion) error {
	sc := getScratch()
	defer putScratch(sc)
	_, _, err := r.appendRestore(sc.buf[:0], v, placement{}, &sc.st)
	return err
}

// ValidateChainName checks a chain name against iptables' limits; the
// error matches ErrInvalidChainName.
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
	return validateText("comment", c, MaxCommentLength)
}

// validateText checks free text that ends up as one iptables argument
// (comments, log prefixes): at most limit bytes of printable UTF-8, without
// control characters, double quotes or backslashes, which iptables-restore
// input would need to escape and iptables-save prints back escaped.
func validateText(what, s string, limit int) error {
	if len(s) > limit {
		return errRulef("%s is %d bytes, longer than %d", what, len(s), limit)
	}
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

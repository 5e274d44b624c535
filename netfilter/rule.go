package netfilter

import (
	"fmt"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// Rule is one packet-filter rule: packets that satisfy every criterion of
// Matches get Action. Comments do not change what the rule does.
//
// A Rule is plain data: building one never fails. It is checked for one
// IP family by Validate, and by a backend when declared, so a bad prefix,
// a port without a protocol or an IPv4 address in an IPv6 rule is an error
// at the API and nothing is written.
type Rule struct {
	// Matches is the conjunction of criteria; empty matches all packets.
	// Their order does not change what matches.
	Matches []Match
	// Action is what happens to a matching packet. Required.
	Action Action
	// Comments are free text, each non-empty printable UTF-8 without
	// double quote or backslash. A backend bounds their length (iptables:
	// 255 bytes).
	Comments []string
}

// JumpTarget returns the chain the rule's action jumps or goes to
// (ActionJump, ActionGoto), and "" for every other action. Backends use it
// to program only the chains that are referenced.
func (r Rule) JumpTarget() string {
	switch a := r.Action.(type) {
	case ActionJump:
		return a.Chain
	case ActionGoto:
		return a.Chain
	}
	return ""
}

// Chain is the full desired content of one chain a Table owns.
type Chain struct {
	// Name must carry the Table's ownership prefix (ValidateChainName
	// gives the rest of the rules).
	Name string
	// Rules are the chain's rules, in order.
	Rules []Rule
	// ForceProgramming programs the chain even when no programmed rule
	// jumps to it (by default such a chain is left out of the kernel).
	ForceProgramming bool
}

// Hook names a point of the kernel's packet path where a Table puts rules
// of its own, before or after everyone else's: a built-in chain of
// iptables, a base chain of nftables. The values are the iptables names of
// the built-in chains.
type Hook string

// The hooks. Which a Table offers depends on what it filters (iptables'
// filter table has INPUT, FORWARD and OUTPUT; nat has PREROUTING, INPUT,
// OUTPUT and POSTROUTING).
const (
	// HookPrerouting sees packets as they arrive, before routing.
	HookPrerouting Hook = "PREROUTING"
	// HookInput sees packets routed to the host.
	HookInput Hook = "INPUT"
	// HookForward sees packets routed through the host.
	HookForward Hook = "FORWARD"
	// HookOutput sees packets the host sends.
	HookOutput Hook = "OUTPUT"
	// HookPostrouting sees packets as they leave, after routing.
	HookPostrouting Hook = "POSTROUTING"
)

// Table is the rule-table interface managers take: one table of one IP
// family that a backend keeps in the state its owner declares, writing only
// the difference and never touching what is not its own. *iptables.Table
// and *nftables.Table implement it, so a manager written against Table
// works on either.
//
// Declarations change nothing in the kernel: they render and check the
// rules (an invalid rule is an error matching ErrInvalidRule, and nothing
// changes) and Apply, from dataplane.Driver, writes. QueueResync makes the
// next Apply read the kernel again; a dataplane.Loop calls it periodically,
// a standalone user calls it when it wants drift repaired.
type Table interface {
	dataplane.Driver
	// SetChains sets the full content of owned chains, replacing what was
	// declared for them before. A chain is programmed only while a
	// programmed rule jumps to it, or when it is forced.
	SetChains(chains ...Chain) error
	// RemoveChains forgets owned chains: the next Apply deletes them once
	// nothing of ours jumps to them. Names not declared are ignored.
	RemoveChains(names ...string) error
	// InsertRules sets owner's rules at the top of hook, before everyone
	// else's, replacing those owner set there before; nil removes them.
	// Several owners (managers sharing the Table) keep their rules at one
	// hook side by side, in the order of their names, and one owner's
	// call never changes another's. An owner is 1 to 64 bytes of
	// printable UTF-8 without spaces.
	InsertRules(owner string, hook Hook, rules []Rule) error
	// AppendRules sets owner's rules at the bottom of hook, after
	// everyone else's, replacing those owner set there before; nil
	// removes them. Owners are kept apart as by InsertRules.
	AppendRules(owner string, hook Hook, rules []Rule) error
}

// TableInfo is what a Table may say of itself without I/O, so that a
// manager given one checks its options in its constructor (CheckTable)
// rather than at every pass. Both writers of the module implement it.
type TableInfo interface {
	// Family returns the IP family of the rules the Table writes.
	Family() ipfamily.Family
	// CheckChain returns the error SetChains would return for a chain
	// called name (not the Table's to own, say), nil when it takes it.
	CheckChain(name string) error
}

// CheckTable checks, when t is a TableInfo, that it writes family f and
// would take every chain of names; a Table that is not one passes. The
// error names what is wrong.
func CheckTable(t Table, f ipfamily.Family, names ...string) error {
	info, ok := t.(TableInfo)
	if !ok {
		return nil
	}
	if got := info.Family(); got != f {
		return fmt.Errorf("%w: the Table writes %v rules, not %v", ErrWrongFamily, got, f)
	}
	for _, n := range names {
		if err := info.CheckChain(n); err != nil {
			return err
		}
	}
	return nil
}

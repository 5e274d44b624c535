package nftables

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Role is the place in the packet path that a Table's base chains take:
// that of one of iptables' tables. It decides which hooks the Table offers,
// the type of its base chains and their priorities, and so which actions
// its rules may take (REJECT only in filter, NAT only in nat, NoTrack only
// in raw), exactly as for an iptables.Table of that table, so that a
// manager written against netfilter.Table behaves the same on both.
type Role string

// The roles, named after the iptables tables whose place they take.
const (
	// Filter filters at INPUT, FORWARD and OUTPUT (type filter, around
	// priority 0, where iptables' filter table sits).
	Filter Role = "filter"
	// NAT translates addresses at PREROUTING and OUTPUT (destination NAT,
	// around priority -100) and at INPUT and POSTROUTING (source NAT,
	// around 100).
	NAT Role = "nat"
	// Mangle changes packets at every hook, around priority -150 (OUTPUT
	// is a chain of type route, so that a changed mark re-routes).
	Mangle Role = "mangle"
	// Raw sees packets at PREROUTING and OUTPUT before connection
	// tracking, around priority -300.
	Raw Role = "raw"
)

// Priorities of the base chains, by role and hook: the priority of the
// iptables table that takes that place (NF_IP_PRI_*), which is also where
// iptables-nft puts its chains. A Table has one base chain per hook, with
// the rules of InsertRules at its top and those of AppendRules at its
// bottom, as in iptables' built-in chain; it sits PriorityOffset below
// iptables' table, so that all of our rules at a hook run before
// iptables' (legacy or nft) rules of the same place.
//
// How this interleaves with kube-proxy's nftables mode (table ip
// kube-proxy): its filter chains sit at -110 (prerouting, input, forward,
// output) and -90 (output after DNAT), its NAT at -100 (dstnat) and 100
// (srcnat). A filter Table (-10) therefore runs after kube-proxy's service
// filtering and after its DNAT, so it sees translated destinations, as
// iptables' filter table does; a nat Table (-110, 90) translates before
// kube-proxy's (a connection takes the first NAT binding made); mangle
// (-160) and raw (-310) run before both, and raw before conntrack (-200).
const (
	PriorityRaw    = -300
	PriorityMangle = -150
	PriorityDNAT   = -100
	PriorityFilter = 0
	PrioritySNAT   = 100
	PriorityOffset = 10
)

// roleHooks are the hooks each role offers, in packet-path order.
var roleHooks = map[Role][]netfilter.Hook{
	Filter: {netfilter.HookInput, netfilter.HookForward, netfilter.HookOutput},
	NAT:    {netfilter.HookPrerouting, netfilter.HookInput, netfilter.HookOutput, netfilter.HookPostrouting},
	Mangle: {netfilter.HookPrerouting, netfilter.HookInput, netfilter.HookForward, netfilter.HookOutput, netfilter.HookPostrouting},
	Raw:    {netfilter.HookPrerouting, netfilter.HookOutput},
}

// Hooks returns the hooks r offers, in packet-path order (nil for an
// unknown role).
func (r Role) Hooks() []netfilter.Hook { return append([]netfilter.Hook(nil), roleHooks[r]...) }

// Valid reports whether r is one of the four roles.
func (r Role) Valid() bool { return roleHooks[r] != nil }

// basePriority is the priority of iptables' chain for role r at hook h.
func (r Role) basePriority(h netfilter.Hook) int32 {
	switch r {
	case Raw:
		return PriorityRaw
	case Mangle:
		return PriorityMangle
	case NAT:
		if h == netfilter.HookInput || h == netfilter.HookPostrouting {
			return PrioritySNAT
		}
		return PriorityDNAT
	}
	return PriorityFilter
}

// chainType is the type of role r's base chain at hook h.
func (r Role) chainType(h netfilter.Hook) string {
	switch {
	case r == NAT:
		return "nat"
	case r == Mangle && h == netfilter.HookOutput:
		return "route"
	}
	return "filter"
}

// Priority returns the priority of the base chain that holds role r's
// rules at hook h (those of InsertRules at its top, those of AppendRules
// at its bottom): PriorityOffset below iptables' table of that role.
func (r Role) Priority(h netfilter.Hook) int32 {
	return r.basePriority(h) - PriorityOffset
}

// BaseChain returns the name of the base chain that holds the rules at
// hook h: the hook's name, such as "INPUT". These names are the Table's
// own: SetChains refuses them, and so does a jump or goto.
func BaseChain(h netfilter.Hook) string { return string(h) }

// Defaults and limits of Options.
const (
	// MaxTableNameLength bounds Options.Name.
	MaxTableNameLength = 64
	// MaxPrefixLength bounds ChainPrefix.
	MaxPrefixLength = 20
	// MaxHashPrefixLength bounds HashPrefix.
	MaxHashPrefixLength = netfilter.MaxHashPrefixLength
	// DefaultHashPrefix is the HashPrefix of a Table without ChainPrefix.
	DefaultHashPrefix = "np:"
	// DefaultRebuildAfter is RebuildAfter's default.
	DefaultRebuildAfter = 3
	// DefaultElementsPerTransaction is ElementsPerTransaction's default.
	DefaultElementsPerTransaction = 16384
)

// DefaultPostWriteRecheck is the schedule of checks after a write, used
// when Options.PostWriteRecheck is nil: each entry is the delay after the
// previous check (the first after the write itself). A check asks the
// kernel for its ruleset generation, which changes with every change to
// any table; only when it changed is the table read again.
var DefaultPostWriteRecheck = []time.Duration{100 * time.Millisecond, time.Second, 10 * time.Second}

// Options configures a Table. Name, Family and Role are required; every
// other zero field takes the default named after it.
type Options struct {
	// Name is the nftables table the Table owns, in the family of Family
	// ("ip" for IPv4, "ip6" for IPv6). Everything in it is the Table's:
	// chains, rules and sets it did not declare are deleted. 1 to
	// MaxTableNameLength letters, digits and "_-.", starting with a
	// letter, and none of the names iptables-nft gives its tables
	// (IPTablesNFTTables: "filter", "nat" …), which hold iptables' rules,
	// kube-proxy's among them. Give each Table its own name: two Tables
	// (of two roles, or two agents) on one name would delete each other's
	// work. A table of that name that holds rules, none of them carrying
	// HashPrefix, is someone else's: the Table neither writes nor deletes
	// it (ErrForeignTable).
	Name string
	// Family is IPv4 (table family ip) or IPv6 (ip6).
	Family ipfamily.Family
	// Role is the place in the packet path the Table's base chains take:
	// Filter, NAT, Mangle or Raw.
	Role Role
	// ChainPrefix, when set, must start every chain name given to
	// SetChains and RemoveChains, as iptables.Options.ChainPrefix does, so
	// that a manager declares the same chains on either backend. The table
	// being the Table's own, it is not needed for ownership. At most
	// MaxPrefixLength bytes, a valid start of a chain name.
	ChainPrefix string
	// HashPrefix starts the comment each rule carries in its user data:
	// HashPrefix and the rule's 16-character hash, by which the Table
	// recognises its rules when it reads the table back. Letters, digits
	// and "_-:.", at most MaxHashPrefixLength bytes. Empty means
	// ChainPrefix with a trailing "-" replaced by ":" ("np-" → "np:"), or
	// DefaultHashPrefix without ChainPrefix.
	HashPrefix string
	// Counters gives every rule a counter (packets and bytes), as iptables
	// rules have; read them with Counters. Off, rules count nothing, as
	// nft rules without a counter statement.
	Counters bool
	// Kernel is the network namespace whose nftables the Table programs,
	// through its kernel.NFTables capability: a *kernel.Namespace
	// (kernel.Open, kernel.OpenCurrent) or, in tests, a kernelfake.Namespace
	// or an nftablesfake.Namespace. Nil means the process's network
	// namespace.
	Kernel kernel.NFTables
	// PostWriteRecheck schedules checks after each write, to catch another
	// agent changing the table right after us (see
	// DefaultPostWriteRecheck). Nil means DefaultPostWriteRecheck; an
	// empty non-nil slice turns them off. Entries must be positive.
	PostWriteRecheck []time.Duration
	// RebuildAfter is how many Applies in a row may fail as a whole before
	// the next one rebuilds the table: it deletes the table and writes it
	// again, whole, in one transaction, so that the base chains are never
	// missing. Zero means DefaultRebuildAfter; negative never rebuilds.
	RebuildAfter int
	// ElementsPerTransaction bounds the set elements one transaction adds:
	// the rest go in further transactions of that many, so that a set of
	// a hundred thousand elements loads without an oversized message.
	// Everything else of an Apply (chains, rules, sets, element deletions)
	// is one transaction. Zero means DefaultElementsPerTransaction.
	ElementsPerTransaction int
	// Logger receives the Table's logs. Nil discards them.
	Logger *slog.Logger
	// Clock is the time source for rechecks and the retries of refused
	// objects. Nil means clock.Real().
	Clock clock.Clock
}

// withDefaults validates o and returns it with every default filled in.
func (o Options) withDefaults() (Options, error) {
	if err := validateTableName(o.Name); err != nil {
		return o, err
	}
	if !o.Family.Valid() {
		return o, fmt.Errorf("%w: IP family %v", ErrInvalidOptions, o.Family)
	}
	if !o.Role.Valid() {
		return o, fmt.Errorf("%w: role %q (want %q, %q, %q or %q)", ErrInvalidOptions, string(o.Role), Filter, NAT, Mangle, Raw)
	}
	if o.ChainPrefix != "" {
		if len(o.ChainPrefix) > MaxPrefixLength {
			return o, fmt.Errorf("%w: ChainPrefix %q longer than %d bytes", ErrInvalidOptions, o.ChainPrefix, MaxPrefixLength)
		}
		if err := netfilter.ValidateChainName(o.ChainPrefix); err != nil {
			text := strings.TrimPrefix(err.Error(), netfilter.ErrInvalidChainName.Error()+": ")
			return o, errs.Also(fmt.Errorf("%w: ChainPrefix %s", ErrInvalidOptions, text), err)
		}
	}
	if o.HashPrefix == "" {
		o.HashPrefix = DefaultHashPrefix
		if o.ChainPrefix != "" {
			o.HashPrefix = netfilter.HashPrefixFor(o.ChainPrefix)
		}
	}
	if err := netfilter.ValidateHashPrefix(o.HashPrefix); err != nil {
		text := strings.TrimPrefix(err.Error(), netfilter.ErrInvalidHashPrefix.Error()+": ")
		return o, errs.Also(fmt.Errorf("%w: HashPrefix %s", ErrInvalidOptions, text), err)
	}
	if o.PostWriteRecheck == nil {
		o.PostWriteRecheck = DefaultPostWriteRecheck
	}
	for _, d := range o.PostWriteRecheck {
		if d <= 0 {
			return o, fmt.Errorf("%w: post-write recheck delay %v is not positive", ErrInvalidOptions, d)
		}
	}
	o.PostWriteRecheck = append([]time.Duration(nil), o.PostWriteRecheck...)
	if o.RebuildAfter == 0 {
		o.RebuildAfter = DefaultRebuildAfter
	}
	if o.ElementsPerTransaction < 0 {
		return o, fmt.Errorf("%w: ElementsPerTransaction %d is negative", ErrInvalidOptions, o.ElementsPerTransaction)
	}
	if o.ElementsPerTransaction == 0 {
		o.ElementsPerTransaction = DefaultElementsPerTransaction
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Clock = clock.OrReal(o.Clock)
	return o, nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// IPTablesNFTTables are the names of the tables iptables-nft (and so
// kube-proxy's iptables mode on it) keeps in the ip and ip6 families: no
// Table takes them (Options.Name).
var IPTablesNFTTables = []string{"filter", "nat", "mangle", "raw", "security"}

// validateTableName checks a table name (Options.Name, RemoveTable).
func validateTableName(name string) error {
	if name == "" || len(name) > MaxTableNameLength {
		return fmt.Errorf("%w: table name %q must be 1 to %d characters", ErrInvalidOptions, name, MaxTableNameLength)
	}
	if slices.Contains(IPTablesNFTTables, name) {
		return fmt.Errorf("%w: table name %q is iptables-nft's: its table holds iptables' rules (kube-proxy's among them); choose another", ErrInvalidOptions, name)
	}
	if c := name[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
		return fmt.Errorf("%w: table name %q does not start with a letter", ErrInvalidOptions, name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(isAlnum(c) || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("%w: table name %q contains %q (want letters, digits and _-.)", ErrInvalidOptions, name, c)
		}
	}
	return nil
}

// nfproto is the nf_tables family of f.
func nfproto(f ipfamily.Family) uint8 {
	if f == ipfamily.IPv6 {
		return 10
	}
	return 2
}

// familyName is nft's name of f's table family.
func familyName(f ipfamily.Family) string {
	if f == ipfamily.IPv6 {
		return "ip6"
	}
	return "ip"
}

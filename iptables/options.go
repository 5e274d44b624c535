package iptables

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Backend selects which iptables implementation a Table writes through:
// the legacy xtables kernel API (iptables-legacy-restore) or nf_tables
// through the iptables-nft compatibility layer (iptables-nft-restore). The
// two keep separate rule sets in the kernel; a node should use one.
// DetectBackend picks the one a node already uses.
type Backend string

// The two backends.
const (
	// BackendLegacy writes with ip[6]tables-legacy-restore and reads with
	// ip[6]tables-legacy-save.
	BackendLegacy Backend = "legacy"
	// BackendNFT writes with ip[6]tables-nft-restore and reads with
	// ip[6]tables-nft-save.
	BackendNFT Backend = "nft"
)

// Valid reports whether b is BackendLegacy or BackendNFT.
func (b Backend) Valid() bool { return b == BackendLegacy || b == BackendNFT }

// String returns "legacy" or "nft".
func (b Backend) String() string {
	if b == "" {
		return "(none)"
	}
	return string(b)
}

// ParseBackend parses "legacy" or "nft" (case-insensitive). Use
// DetectBackend for "auto".
func ParseBackend(s string) (Backend, error) {
	switch b := Backend(strings.ToLower(strings.TrimSpace(s))); b {
	case BackendLegacy, BackendNFT:
		return b, nil
	}
	return "", fmt.Errorf("%w: unknown backend %q (want %q or %q)", ErrInvalidOptions, s, BackendLegacy, BackendNFT)
}

// SaveCommand returns the name of the binary that dumps tables of family f
// with backend b, such as "ip6tables-nft-save".
func (b Backend) SaveCommand(f ipfamily.Family) string { return binaryName(b, f, "save") }

// RestoreCommand returns the name of the binary that loads tables of
// family f with backend b, such as "iptables-legacy-restore".
func (b Backend) RestoreCommand(f ipfamily.Family) string { return binaryName(b, f, "restore") }

func binaryName(b Backend, f ipfamily.Family, verb string) string {
	base := "iptables"
	if f == ipfamily.IPv6 {
		base = "ip6tables"
	}
	return base + "-" + string(b) + "-" + verb
}

// Defaults for the zero fields of Options.
const (
	// DefaultLockTimeout is how long the restore binary waits for the
	// xtables lock (its --wait option).
	DefaultLockTimeout = 5 * time.Second
	// MaxPrefixLength bounds ChainPrefix, so that chain names have room
	// after it.
	MaxPrefixLength = 20
	// MaxHashPrefixLength bounds HashPrefix.
	MaxHashPrefixLength = netfilter.MaxHashPrefixLength
)

// DefaultPostWriteRecheck is the schedule of re-reads after a write, used
// when Options.PostWriteRecheck is nil: each entry is the delay after the
// previous check (the first after the write itself).
var DefaultPostWriteRecheck = []time.Duration{100 * time.Millisecond, time.Second, 10 * time.Second}

// Tables are the iptables tables a Table can manage, with their built-in
// chains in the order iptables-save prints them.
var tableChains = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"mangle": {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"raw":    {"PREROUTING", "OUTPUT"},
}

// Options configures a Table. Table, Family, Backend and ChainPrefix are
// required; every other zero field takes the default named after it.
type Options struct {
	// Table is the iptables table: "filter", "nat", "mangle" or "raw".
	Table string
	// Family is IPv4 (iptables) or IPv6 (ip6tables).
	Family ipfamily.Family
	// Backend is BackendLegacy or BackendNFT (see DetectBackend).
	Backend Backend
	// ChainPrefix marks the chains the Table owns, e.g. "np-". Every chain
	// given to SetChains must start with it, and every chain in the kernel
	// that starts with it and is not wanted is deleted. It must be a valid
	// start of a chain name, at most MaxPrefixLength bytes, and must not
	// be the start of a built-in chain's name.
	ChainPrefix string
	// HashPrefix starts the hash comment of every rule the Table writes
	// ("np:" gives `-m comment --comment "np:Ab3…"`); it is how the Table
	// recognises its own rules in built-in chains. Letters, digits and
	// "_-:.", at most MaxHashPrefixLength bytes. Empty means ChainPrefix
	// with a trailing "-" replaced by ":" ("np-" → "np:"), or ChainPrefix
	// followed by ":".
	HashPrefix string
	// Kernel is the network namespace whose table the Table manages: its
	// Runner runs iptables-save and iptables-restore there, and `ipset
	// list -t` when rules to write match ip sets. A
	// *kernel.Namespace (kernel.Open, kernel.OpenCurrent) or, in tests, a
	// kernelfake.Namespace, whose Runner serves the binaries from an
	// in-memory kernel. Nil means the process's network namespace: the
	// binaries run as command.Local runs them. The Table runs the save on
	// a goroutine of its own, so the runner, not the calling thread,
	// decides the namespace. When Kernel is nil or also has a Do method
	// (a *kernel.Namespace has), Apply reads the table in process instead
	// of running iptables-save, which it then runs only when that read
	// fails or to learn the text of a rule of ours it must delete from a
	// built-in chain.
	Kernel kernel.Commands
	// LockTimeout is passed to the restore binary as -w (--wait), in
	// whole seconds rounded up. Zero means DefaultLockTimeout; negative
	// means -w without a timeout (wait for ever). Only the legacy backend
	// takes the xtables lock; the nft binaries accept and ignore it.
	LockTimeout time.Duration
	// PostWriteRecheck schedules re-reads after each write, to catch
	// another agent clobbering our rules right after us: each entry is the
	// delay after the previous check. Nil means DefaultPostWriteRecheck;
	// an empty non-nil slice turns rechecks off. Entries must be positive.
	// Periodic re-reads are not the Table's: a dataplane.Loop calls
	// QueueResync every ResyncInterval, and a standalone user calls it.
	PostWriteRecheck []time.Duration
	// Logger receives the Table's logs. Nil discards them.
	Logger *slog.Logger
	// Clock is the time source for rechecks and the retries of refused
	// objects. Nil means clock.Real().
	Clock clock.Clock
}

// withDefaults validates o and returns it with every default filled in.
func (o Options) withDefaults() (Options, error) {
	if tableChains[o.Table] == nil {
		return o, fmt.Errorf("%w: unknown table %q (want filter, nat, mangle or raw)", ErrInvalidOptions, o.Table)
	}
	if !o.Family.Valid() {
		return o, fmt.Errorf("%w: IP family %v", ErrInvalidOptions, o.Family)
	}
	if !o.Backend.Valid() {
		return o, fmt.Errorf("%w: backend %q (want %q or %q; see DetectBackend)", ErrInvalidOptions, string(o.Backend), BackendLegacy, BackendNFT)
	}
	if err := validateChainPrefix(o.ChainPrefix); err != nil {
		return o, err
	}
	if o.HashPrefix == "" {
		o.HashPrefix = netfilter.HashPrefixFor(o.ChainPrefix)
	}
	if err := validateHashPrefix(o.HashPrefix); err != nil {
		return o, err
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = DefaultLockTimeout
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
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Clock = clock.OrReal(o.Clock)
	return o, nil
}

// validateChainPrefix checks Options.ChainPrefix.
func validateChainPrefix(p string) error {
	if p == "" {
		return fmt.Errorf("%w: ChainPrefix is required", ErrInvalidOptions)
	}
	if len(p) > MaxPrefixLength {
		return fmt.Errorf("%w: ChainPrefix %q longer than %d bytes", ErrInvalidOptions, p, MaxPrefixLength)
	}
	if err := netfilter.ValidateChainName(p); err != nil {
		text := strings.TrimPrefix(err.Error(), netfilter.ErrInvalidChainName.Error()+": ")
		return errs.Also(fmt.Errorf("%w: ChainPrefix %s", ErrInvalidOptions, text), err)
	}
	for _, chains := range tableChains {
		for _, c := range chains {
			if strings.HasPrefix(c, p) {
				return fmt.Errorf("%w: ChainPrefix %q would claim the built-in chain %s", ErrInvalidOptions, p, c)
			}
		}
	}
	for _, t := range []string{"ACCEPT", "DROP", "RETURN", "QUEUE"} {
		if strings.HasPrefix(t, p) {
			return fmt.Errorf("%w: ChainPrefix %q would claim the target %s", ErrInvalidOptions, p, t)
		}
	}
	return nil
}

// validateHashPrefix checks Options.HashPrefix.
func validateHashPrefix(p string) error {
	if err := netfilter.ValidateHashPrefix(p); err != nil {
		text := strings.TrimPrefix(err.Error(), netfilter.ErrInvalidHashPrefix.Error()+": ")
		return errs.Also(fmt.Errorf("%w: HashPrefix %s", ErrInvalidOptions, text), err)
	}
	return nil
}

// lockArgs returns the -w arguments for the restore binary.
func (o Options) lockArgs() []string {
	if o.LockTimeout < 0 {
		return []string{"-w"}
	}
	secs := int64((o.LockTimeout + time.Second - 1) / time.Second)
	return []string{"-w", fmt.Sprint(secs)}
}

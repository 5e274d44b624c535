package iptables

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/vishvananda/netns"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/internal/errs"
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

// SaveCommand returns the name of the binary that dumps tables of version v
// with backend b, such as "ip6tables-nft-save".
func (b Backend) SaveCommand(v IPVersion) string { return binaryName(b, v, "save") }

// RestoreCommand returns the name of the binary that loads tables of
// version v with backend b, such as "iptables-legacy-restore".
func (b Backend) RestoreCommand(v IPVersion) string { return binaryName(b, v, "restore") }

func binaryName(b Backend, v IPVersion, verb string) string {
	base := "iptables"
	if v == IPv6 {
		base = "ip6tables"
	}
	return base + "-" + string(b) + "-" + verb
}

// Defaults for the zero fields of Options.
const (
	// DefaultLockTimeout is how long the restore binary waits for the
	// xtables lock (its --wait option).
	DefaultLockTimeout = 5 * time.Second
	// DefaultRefreshInterval is how often Apply re-reads the kernel to
	// repair drift when nothing else made it read.
	DefaultRefreshInterval = 90 * time.Second
	// MaxPrefixLength bounds ChainPrefix, so that chain names have room
	// after it.
	MaxPrefixLength = 20
	// MaxHashPrefixLength bounds HashPrefix.
	MaxHashPrefixLength = 32
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

// BuiltinChains returns the built-in chains of table ("filter", "nat",
// "mangle" or "raw") in the order iptables-save prints them, or nil for an
// unknown table.
func BuiltinChains(table string) []string {
	c := tableChains[table]
	if c == nil {
		return nil
	}
	return append([]string(nil), c...)
}

// Options configures a Table. Table, IPVersion, Backend and ChainPrefix are
// required; every other zero field takes the default named after it.
type Options struct {
	// Table is the iptables table: "filter", "nat", "mangle" or "raw".
	Table string
	// IPVersion is IPv4 (iptables) or IPv6 (ip6tables).
	IPVersion IPVersion
	// Backend is BackendLegacy or BackendNFT (see DetectBackend).
	Backend Backend
	// ChainPrefix marks the chains the Table owns, e.g. "np-". Every chain
	// given to UpdateChain must start with it, and every chain in the
	// kernel that starts with it and is not wanted is deleted. It must be
	// a valid start of a chain name, at most MaxPrefixLength bytes, and
	// must not be the start of a built-in chain's name.
	ChainPrefix string
	// HashPrefix starts the hash comment of every rule the Table writes
	// ("np:" gives `-m comment --comment "np:Ab3…"`); it is how the Table
	// recognises its own rules in built-in chains. Letters, digits and
	// "_-:.", at most MaxHashPrefixLength bytes. Empty means ChainPrefix
	// with a trailing "-" replaced by ":" ("np-" → "np:"), or ChainPrefix
	// followed by ":".
	HashPrefix string
	// Runner runs the save and restore binaries. Nil means
	// command.NetNS{FD: Namespace} when Namespace is set, else
	// command.Local{} (the process's network namespace). Apply calls it
	// from a goroutine of its own for the save, so a Runner must not
	// depend on the calling goroutine's OS thread (such as a thread moved
	// into another network namespace): bind the runner to the namespace
	// instead (command.NetNS).
	Runner command.Runner
	// Namespace is the network namespace whose tables the Table manages,
	// as an open handle (such as netns.GetFromName's). When set, Apply
	// reads the table in process instead of running iptables-save: with
	// the xtables getsockopt interface for BackendLegacy, over nf_tables
	// netlink for BackendNFT. That read sees only chain names, hash
	// comments and jumps, so when it finds one of our rules in a built-in
	// chain whose text the Table does not know (not declared now, not
	// written or read by this Table before) it reads again with
	// iptables-save, and it falls back to iptables-save on any error. The
	// writes always go through Runner, so Runner and Namespace must name
	// the same namespace. New checks it where it can tell (the only system
	// calls New makes: an fstat of each descriptor): a Runner bound to a
	// namespace (one with a NetNSFD() int method, such as command.NetNS)
	// must be bound to this one, and with command.Local Namespace must be
	// the process's namespace (/proc/self/ns/net, opened for the check).
	// command.Local starts the binaries from whatever thread runs Apply's
	// goroutines, which share the process's namespace; the namespace of
	// the thread that happens to call New (/proc/thread-self) would tell
	// nothing about them, so it is not the one compared. Otherwise New
	// fails with ErrInvalidOptions. For any other Runner (a wrapper, a
	// fake) the match is the caller's responsibility.
	// The Table does not close the handle; it must stay open while the
	// Table is used. Zero (or netns.None(), negative) leaves it unset:
	// every read runs iptables-save. Descriptor 0, standard input, is never
	// a namespace handle in practice.
	Namespace netns.NsHandle
	// LockTimeout is passed to the restore binary as -w (--wait), in
	// whole seconds rounded up. Zero means DefaultLockTimeout; negative
	// means -w without a timeout (wait for ever). Only the legacy backend
	// takes the xtables lock; the nft binaries accept and ignore it.
	LockTimeout time.Duration
	// RefreshInterval is how often Apply re-reads the kernel to find and
	// repair drift. Zero means DefaultRefreshInterval; negative turns
	// periodic refresh off (QueueResync still works).
	RefreshInterval time.Duration
	// PostWriteRecheck schedules re-reads after each write, to catch
	// another agent clobbering our rules right after us: each entry is the
	// delay after the previous check. Nil means DefaultPostWriteRecheck;
	// an empty non-nil slice turns rechecks off. Entries must be positive.
	PostWriteRecheck []time.Duration
	// Logger receives the Table's logs. Nil discards them.
	Logger *slog.Logger
	// Clock is the time source for refresh, rechecks and the retries of
	// refused objects. Nil means clock.Real().
	Clock clock.Clock
}

// withDefaults validates o and returns it with every default filled in.
func (o Options) withDefaults() (Options, error) {
	if tableChains[o.Table] == nil {
		return o, fmt.Errorf("%w: unknown table %q (want filter, nat, mangle or raw)", ErrInvalidOptions, o.Table)
	}
	if !o.IPVersion.Valid() {
		return o, fmt.Errorf("%w: IP version %v", ErrInvalidOptions, o.IPVersion)
	}
	if !o.Backend.Valid() {
		return o, fmt.Errorf("%w: backend %q (want %q or %q; see DetectBackend)", ErrInvalidOptions, string(o.Backend), BackendLegacy, BackendNFT)
	}
	if err := validateChainPrefix(o.ChainPrefix); err != nil {
		return o, err
	}
	if o.HashPrefix == "" {
		o.HashPrefix = strings.TrimSuffix(o.ChainPrefix, "-") + ":"
	}
	if err := validateHashPrefix(o.HashPrefix); err != nil {
		return o, err
	}
	switch {
	case o.Namespace > 0 && o.Runner == nil:
		o.Runner = command.NetNS{FD: int(o.Namespace)}
	case o.Namespace > 0:
		if err := o.checkNamespace(); err != nil {
			return o, err
		}
	case o.Runner == nil:
		o.Runner = command.Local{}
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = DefaultRefreshInterval
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
	if prob := chainNameProblem(p); prob != "" {
		return errs.Also(fmt.Errorf("%w: ChainPrefix %s", ErrInvalidOptions, prob), ErrInvalidChainName)
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
	if len(p) > MaxHashPrefixLength {
		return fmt.Errorf("%w: HashPrefix %q longer than %d bytes", ErrInvalidOptions, p, MaxHashPrefixLength)
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == ':' || c == '.') {
			return fmt.Errorf("%w: HashPrefix %q contains %q (want letters, digits and _-:.)", ErrInvalidOptions, p, c)
		}
	}
	return nil
}

// checkNamespace checks that the Runner runs the binaries in Namespace,
// where it can tell (see Options.Namespace).
func (o Options) checkNamespace() error {
	var fd int
	var where string
	switch r := o.Runner.(type) {
	case command.Local, *command.Local:
		f, err := os.Open("/proc/self/ns/net")
		if err != nil {
			return fmt.Errorf("%w: Namespace with command.Local: %w", ErrInvalidOptions, err)
		}
		defer f.Close()
		fd, where = int(f.Fd()), "the process's namespace, where command.Local runs the binaries"
	case interface{ NetNSFD() int }:
		fd = r.NetNSFD()
		where = fmt.Sprintf("the namespace the Runner runs the binaries in (fd %d)", fd)
	default:
		return nil
	}
	same, err := command.SameNetNS(fd, int(o.Namespace))
	if err != nil {
		return fmt.Errorf("%w: comparing Namespace (fd %d) with the Runner's namespace: %w", ErrInvalidOptions, o.Namespace, err)
	}
	if !same {
		return fmt.Errorf("%w: Namespace (fd %d) is not %s", ErrInvalidOptions, o.Namespace, where)
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

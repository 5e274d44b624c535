package iptablesfake

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// Op classifies the calls the fake kernel serves.
type Op uint8

// The kinds of calls.
const (
	// OpAny matches every call (for faults and counts).
	OpAny Op = iota
	// OpSave is an ip[6]tables[-legacy|-nft]-save run.
	OpSave
	// OpRestore is an ip[6]tables[-legacy|-nft]-restore run.
	OpRestore
	// OpCommand is a single ip[6]tables[-legacy|-nft] command.
	OpCommand
)

// String returns "any", "save", "restore" or "command".
func (o Op) String() string {
	switch o {
	case OpAny:
		return "any"
	case OpSave:
		return "save"
	case OpRestore:
		return "restore"
	case OpCommand:
		return "command"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Backend is the iptables implementation a binary belongs to, as its name
// says: ip[6]tables-legacy-* or ip[6]tables-nft-* (and the bare
// ip[6]tables-*, which the fake serves as nft). Its values are those of
// iptables.Backend: convert one with Backend(b).
type Backend string

// The two backends.
const (
	// BackendLegacy is the xtables kernel API (ip[6]tables-legacy-*).
	BackendLegacy Backend = "legacy"
	// BackendNFT is nf_tables through the compatibility layer
	// (ip[6]tables-nft-*).
	BackendNFT Backend = "nft"
)

// String returns "legacy" or "nft" (or the value as it is).
func (b Backend) String() string { return string(b) }

// Call is one recorded run of a binary.
type Call struct {
	// Binary and Args are what was run.
	Binary string
	Args   []string
	// Stdin is what was fed to it (restore input).
	Stdin string
	// Op, Backend and Family classify the binary; Op is OpAny for a
	// binary the fake does not know.
	Op      Op
	Backend Backend
	Family  ipfamily.Family
	// Err is what the call returned.
	Err error
}

// Fault makes matching calls fail; see Kernel.AddFault.
type Fault struct {
	// Op selects the calls: OpAny, OpSave, OpRestore or OpCommand.
	Op Op
	// Binary, when set, restricts the fault to calls of that binary (such
	// as "iptables-nft-restore").
	Binary string
	// LineContains, for restores, fails only an input with a line
	// containing this text, at that line: the transaction holding it is
	// not committed (earlier COMMITted ones are, as with the real binary).
	// Calls without such a line do not count.
	LineContains string
	// AtCommit reports a LineContains failure at the COMMIT line of the
	// transaction holding the line, as the legacy kernel does for a rule
	// it refuses only when the whole table is committed (a target in a
	// chain it does not allow, say): the binary names no line of the
	// rule.
	AtCommit bool
	// Times is how many matching calls fail; zero means every matching
	// call until ClearFaults.
	Times int
	// ExitCode is the exit status; zero means 1.
	ExitCode int
	// Stderr is the error output; empty means what the real binary prints
	// ("iptables-restore: line N failed" for a line fault).
	Stderr string
}

type fault struct {
	Fault
	left int // remaining failures; <0 means unlimited
}

// tableKey names one table of one backend and IP version.
type tableKey struct {
	backend Backend
	v       ipfamily.Family
	name    string
}

// table is one in-memory xtables table.
type table struct {
	chains       map[string]*chain
	incompatible bool
}

// chain is one chain of a table.
type chain struct {
	builtin bool
	policy  string
	rules   []*rule
}

// rule is one rule: immutable once created, so transactions share them.
type rule struct {
	spec   spec
	serial uint64
}

// Kernel is an in-memory model of the kernel's iptables tables behind both
// backends and both IP versions, served through command.Runner as the
// binaries nodeplane runs: ip[6]tables-{legacy,nft}-save, -restore and
// single ip[6]tables-{legacy,nft} commands (names without -legacy or -nft
// mean nft). It keeps separate tables per backend and IP version, like the
// kernel.
//
// Kernel is safe for concurrent use. The zero value is not usable; call
// New.
type Kernel struct {
	mu      sync.Mutex
	tables  map[tableKey]*table
	calls   []Call
	faults  []*fault
	serial  uint64
	onCall  func(Call)
	version string
	sets    func(name string) (ipfamily.Family, bool)
}

// New returns an empty fake kernel: no table exists until a call touches it,
// and every table starts with its built-in chains, empty, policy ACCEPT.
func New() *Kernel {
	return &Kernel{tables: map[tableKey]*table{}, version: "v1.8.9"}
}

// binaryRE parses the names of the binaries the fake serves.
var binaryRE = regexp.MustCompile(`^(?:.*/)?(ip6?tables)(-legacy|-nft)?(-save|-restore)?$`)

// classify returns what a binary name is.
func classify(name string) (op Op, b Backend, v ipfamily.Family, ok bool) {
	m := binaryRE.FindStringSubmatch(name)
	if m == nil {
		return OpAny, "", 0, false
	}
	v = ipfamily.IPv4
	if m[1] == "ip6tables" {
		v = ipfamily.IPv6
	}
	b = BackendNFT
	if m[2] == "-legacy" {
		b = BackendLegacy
	}
	switch m[3] {
	case "-save":
		op = OpSave
	case "-restore":
		op = OpRestore
	default:
		op = OpCommand
	}
	return op, b, v, true
}

// Run serves one binary run: it implements command.Runner, which
// kernelfake.Namespace's Runner calls for the iptables binaries. A failure
// is a *command.Error with the exit status and the standard error the real
// binary would print (for the errors the fake models). An unknown binary
// fails as not found. A nil ctx is context.Background().
func (k *Kernel) Run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	call := Call{Binary: name, Args: slices.Clone(args)}
	if stdin != nil {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, &command.Error{Argv: argv(name, args), ExitCode: -1, Err: err}
		}
		call.Stdin = string(b)
	}
	op, b, v, ok := classify(name)
	call.Op, call.Backend, call.Family = op, b, v
	k.mu.Lock()
	hook := k.onCall
	k.mu.Unlock()
	if hook != nil {
		hook(call)
	}
	if err := ctx.Err(); err != nil {
		call.Err = &command.Error{Argv: argv(name, args), ExitCode: -1, Err: err}
		k.record(call)
		return nil, call.Err
	}
	var out []byte
	var err error
	switch {
	case !ok:
		err = &command.Error{Argv: argv(name, args), ExitCode: -1, Err: &exec.Error{Name: name, Err: exec.ErrNotFound}}
	default:
		out, err = k.serve(call)
	}
	call.Err = err
	k.record(call)
	return out, err
}

func (k *Kernel) record(c Call) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, c)
}

func argv(name string, args []string) []string { return append([]string{name}, args...) }

// failure builds the error of a failed run.
func failure(name string, args []string, code int, stdout, stderr string) error {
	if code == 0 {
		code = 1
	}
	return &command.Error{
		Argv: argv(name, args), ExitCode: code, Stdout: []byte(stdout), Stderr: []byte(stderr),
		Err: fmt.Errorf("exit status %d", code),
	}
}

// serve runs a known binary under the lock.
func (k *Kernel) serve(c Call) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	base := c.Binary
	if i := strings.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:]
	}
	failLine := 0
	if f := k.takeFault(c, base, &failLine); f != nil {
		msg := f.Stderr
		if msg == "" {
			if failLine > 0 {
				msg = fmt.Sprintf("%s: line %d failed\n", restoreProgram(c), failLine)
			} else {
				msg = fmt.Sprintf("%s: injected failure\n", base)
			}
		}
		if failLine == 0 || c.Op != OpRestore {
			return nil, failure(c.Binary, c.Args, f.ExitCode, "", msg)
		}
		// A line fault: commit the transactions before the failing line.
		if err := k.restore(c, failLine); err != nil {
			return nil, err
		}
		return nil, failure(c.Binary, c.Args, f.ExitCode, "", msg)
	}
	switch c.Op {
	case OpSave:
		return k.save(c)
	case OpRestore:
		return nil, k.restore(c, 0)
	default:
		return nil, k.command(c)
	}
}

// takeFault returns the first fault matching the call and counts it down.
// For a line fault it sets *line to the failing line.
func (k *Kernel) takeFault(c Call, base string, line *int) *fault {
	for i, f := range k.faults {
		if f.Op != OpAny && f.Op != c.Op {
			continue
		}
		if f.Binary != "" && f.Binary != base && f.Binary != c.Binary {
			continue
		}
		if f.LineContains != "" {
			if c.Op != OpRestore {
				continue
			}
			n := 0
			lines := strings.Split(c.Stdin, "\n")
			for j, l := range lines {
				if strings.Contains(l, f.LineContains) {
					n = j + 1
					break
				}
			}
			if n > 0 && f.AtCommit {
				for j := n; j < len(lines); j++ {
					if lines[j] == "COMMIT" {
						n = j + 1
						break
					}
				}
			}
			if n == 0 {
				continue
			}
			*line = n
		}
		if f.left > 0 {
			f.left--
			if f.left == 0 {
				k.faults = slices.Delete(k.faults, i, i+1)
			}
		}
		return f
	}
	return nil
}

// restoreProgram is the name the restore binary uses in its messages.
func restoreProgram(c Call) string {
	name := "iptables"
	if c.Family == ipfamily.IPv6 {
		name = "ip6tables"
	}
	if c.Backend == BackendNFT {
		return name + "-nft-restore"
	}
	return name + "-restore"
}

// AddFault makes calls matching f fail (see Fault). Faults are checked in
// the order added; the first that matches a call applies.
func (k *Kernel) AddFault(f Fault) {
	k.mu.Lock()
	defer k.mu.Unlock()
	left := f.Times
	if left <= 0 {
		left = -1
	}
	k.faults = append(k.faults, &fault{Fault: f, left: left})
}

// FailNext makes the next n calls of kind op fail with exit status 1. n of
// zero or less does nothing.
func (k *Kernel) FailNext(op Op, n int) {
	if n <= 0 {
		return
	}
	k.AddFault(Fault{Op: op, Times: n})
}

// UseSets makes rules that match an ip set (-m set --match-set NAME) check
// the set as iptables does when it parses the rule: lookup returns the
// family of the set named (zero for a set of no family, such as
// bitmap:port or list:set) and whether it exists. A rule whose set does not
// exist ("Set NAME doesn't exist.") or is of the other family ("The
// protocol family of set NAME is IPv6, which is not applicable.") is refused
// with the real binary's message, at its line in a restore, by both
// backends. kernelfake.Namespace hands its ipset fake here; a Kernel given
// no lookup (or nil) takes every set to exist.
func (k *Kernel) UseSets(lookup func(name string) (ipfamily.Family, bool)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sets = lookup
}

// ClearFaults removes every fault.
func (k *Kernel) ClearFaults() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults = nil
}

// OnCall sets a function called at the start of every Run, before the call
// is served and outside the Kernel's lock, so it may change the kernel (to
// simulate another agent writing between a save and a restore). Nil
// removes it.
func (k *Kernel) OnCall(fn func(Call)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.onCall = fn
}

// Calls returns the calls served so far, in order.
func (k *Kernel) Calls() []Call {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.calls)
}

// Count returns how many calls of kind op were served (OpAny counts all).
func (k *Kernel) Count(op Op) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, c := range k.calls {
		if op == OpAny || c.Op == op {
			n++
		}
	}
	return n
}

// ResetCalls forgets the recorded calls.
func (k *Kernel) ResetCalls() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = nil
}

// Rule is one rule as the fake holds it.
type Rule struct {
	// Spec is the rule as iptables-save prints it, after "-A CHAIN ".
	Spec string
	// Serial identifies this rule object: it changes when the rule is
	// replaced or re-created, and stays when other rules change, so tests
	// can check that unchanged rules (and their counters) were kept.
	Serial uint64
}

// Save returns what ip[6]tables-<backend>-save -t name prints for the table
// (a table that does not exist yet is shown empty, as the real binary
// does).
func (k *Kernel) Save(b Backend, v ipfamily.Family, name string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var buf bytes.Buffer
	t := k.peek(tableKey{b, v, name})
	if t == nil {
		t = newTable(name)
	}
	k.writeTable(&buf, b, v, name, t)
	return buf.String()
}

// Chains returns the chains of a table in the order iptables-save prints
// them (built-in chains, then the others by name), or nil when the table
// does not exist.
func (k *Kernel) Chains(b Backend, v ipfamily.Family, name string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.peek(tableKey{b, v, name})
	if t == nil {
		return nil
	}
	return t.order(name)
}

// Rules returns the rules of a chain as iptables-save prints them (after
// "-A CHAIN "), or nil when the chain does not exist.
func (k *Kernel) Rules(b Backend, v ipfamily.Family, table, chain string) []string {
	var out []string
	for _, r := range k.ListRules(b, v, table, chain) {
		out = append(out, r.Spec)
	}
	return out
}

// ListRules returns the rules of a chain with their serials, or nil when the
// chain does not exist.
func (k *Kernel) ListRules(b Backend, v ipfamily.Family, table, chain string) []Rule {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.peek(tableKey{b, v, table})
	if t == nil || t.chains[chain] == nil {
		return nil
	}
	var out []Rule
	for _, r := range t.chains[chain].rules {
		out = append(out, Rule{Spec: r.spec.text, Serial: r.serial})
	}
	return out
}

// Exec runs one iptables command against the fake, as
// `ip[6]tables-<backend> args…` would (for example "-t", "nat", "-I",
// "POSTROUTING", "1", "-j", "MASQUERADE"), without recording a call or
// checking faults: it is how tests play another agent. The supported
// commands are -A, -I, -R, -D, -C, -N, -X, -F, -P and -E.
func (k *Kernel) Exec(b Backend, v ipfamily.Family, args ...string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.command(Call{Binary: binaryFor(b, v, ""), Args: args, Op: OpCommand, Backend: b, Family: v})
}

// Restore feeds input to the fake as ip[6]tables-<backend>-restore would
// (with --noflush when noflush is set), without recording a call or
// checking faults.
func (k *Kernel) Restore(b Backend, v ipfamily.Family, input string, noflush bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var args []string
	if noflush {
		args = []string{"--noflush"}
	}
	return k.restore(Call{Binary: binaryFor(b, v, "-restore"), Args: args, Stdin: input, Op: OpRestore, Backend: b, Family: v}, 0)
}

// SetIncompatible marks a table as holding native nftables rules that
// iptables-nft cannot show: its save prints only the
// "# Table `NAME' is incompatible, use 'nft' tool." line. false clears it.
func (k *Kernel) SetIncompatible(b Backend, v ipfamily.Family, name string, incompatible bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	t, err := k.get(tableKey{b, v, name})
	if err != nil {
		return err
	}
	t.incompatible = incompatible
	return nil
}

func binaryFor(b Backend, v ipfamily.Family, suffix string) string {
	name := "iptables-"
	if v == ipfamily.IPv6 {
		name = "ip6tables-"
	}
	return name + string(b) + suffix
}

// peek returns a table or nil, without creating it.
func (k *Kernel) peek(key tableKey) *table { return k.tables[key] }

// get returns a table, creating it with its built-in chains.
func (k *Kernel) get(key tableKey) (*table, error) {
	if t := k.tables[key]; t != nil {
		return t, nil
	}
	if builtins(key.name) == nil {
		return nil, fmt.Errorf("can't initialize %s table `%s': Table does not exist (do you need to insmod?)", tableFamily(key.v), key.name)
	}
	t := newTable(key.name)
	k.tables[key] = t
	return t, nil
}

func tableFamily(v ipfamily.Family) string {
	if v == ipfamily.IPv6 {
		return "ip6tables"
	}
	return "iptables"
}

// builtinChains are the built-in chains of each table the fake knows, in
// the order iptables-save prints them.
var builtinChains = map[string][]string{
	"filter":   {"INPUT", "FORWARD", "OUTPUT"},
	"nat":      {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"mangle":   {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"raw":      {"PREROUTING", "OUTPUT"},
	"security": {"INPUT", "FORWARD", "OUTPUT"},
}

// builtins returns a table's built-in chains, nil for an unknown table.
func builtins(name string) []string { return builtinChains[name] }

func newTable(name string) *table {
	t := &table{chains: map[string]*chain{}}
	for _, c := range builtins(name) {
		t.chains[c] = &chain{builtin: true, policy: "ACCEPT"}
	}
	return t
}

// clone copies a table for a transaction; rules are shared (immutable).
func (t *table) clone() *table {
	c := &table{chains: make(map[string]*chain, len(t.chains)), incompatible: t.incompatible}
	for name, ch := range t.chains {
		cp := *ch
		cp.rules = slices.Clone(ch.rules)
		c.chains[name] = &cp
	}
	return c
}

// order returns the chains in iptables-save order.
func (t *table) order(name string) []string {
	out := slices.Clone(builtins(name))
	var user []string
	for n, c := range t.chains {
		if !c.builtin {
			user = append(user, n)
		}
	}
	slices.Sort(user)
	return append(out, user...)
}

// references counts the rules of the table that jump or go to chain.
func (t *table) references(chain string) int {
	n := 0
	for _, c := range t.chains {
		for _, r := range c.rules {
			if r.spec.target == chain {
				n++
			}
		}
	}
	return n
}

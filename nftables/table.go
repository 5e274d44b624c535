package nftables

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/nfcore"
	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
)

// A Table is the rule table of the rule model, and so a driver of the
// dataplane loop that reports its DriverStats.
var (
	_ netfilter.Table         = (*Table)(nil)
	_ dataplane.StatsReporter = (*Table)(nil)
)

// Policy is what a hook's base chain does with a packet that no rule of
// ours decided on.
type Policy uint8

// The policies. The zero value is PolicyAccept.
const (
	// PolicyAccept lets the packet go on (to the hook's next base chain,
	// of this table or another).
	PolicyAccept Policy = iota
	// PolicyDrop drops it.
	PolicyDrop
)

// String returns "accept" or "drop".
func (p Policy) String() string {
	if p == PolicyDrop {
		return "drop"
	}
	return "accept"
}

// WorkStats count a Table's work since New. Kernel tests use them to
// prove that a no-op Apply writes nothing.
type WorkStats struct {
	// Reads and ReadErrors count reads of the whole table, and failed ones.
	Reads, ReadErrors int
	// ChainReads counts reads of one chain's rules, to learn the handles
	// of rules written before.
	ChainReads int
	// GenChecks counts the times the ruleset generation was asked for, to
	// tell whether the kernel changed since the table was last read.
	GenChecks int
	// Transactions and TransactionErrors count the netlink transactions
	// sent and those the kernel refused (one Apply may send several: one,
	// then more for large element additions, and again after a refused
	// object). A no-op Apply adds nothing.
	Transactions, TransactionErrors int
	// Messages and Bytes count the requests and bytes of transactions the
	// kernel committed.
	Messages, Bytes int
	// Rebuilds counts whole-table rebuilds (see Options.RebuildAfter).
	Rebuilds int
	// ReadTime and WriteTime add up the time spent reading and writing,
	// as measured by the Table's clock.
	ReadTime, WriteTime time.Duration
	// Chains, Rules, Sets and Elements are what the last successful Apply
	// left programmed: the chains (base chains included), the rules in
	// them, the named sets and their elements.
	Chains, Rules, Sets, Elements int
}

// Table keeps one nftables table of one IP family in the state its owner
// declares: its base chains at the hooks of its role, regular chains,
// sets and verdict maps. Apply writes only the difference with what the
// kernel holds, in one netlink transaction, and never touches another
// table. An object the kernel refuses (a chain, a set, an element) is left
// out and retried on its own backoff, so it never holds the others back
// (a *dataplane.ObjectError).
//
// A Table is safe for concurrent use; Apply holds its lock while it talks
// to the kernel.
type Table struct {
	opts  Options
	name  string
	fam   uint8
	hooks map[netfilter.Hook]bool

	mu sync.Mutex
	// chains are the declared chains, regular and base (a hook's rules,
	// named BaseChain).
	chains map[string]*chainDecl
	// hookRules are each hook's rules of InsertRules and of AppendRules,
	// by owner: its base chain holds both groups, in this order.
	hookRules nfcore.HookRules
	sets      map[string]*setDecl
	// vmapTargets counts the verdict-map elements that jump or go to each
	// chain; mapTargets counts them by map.
	vmapTargets map[string]int
	mapTargets  map[string]map[string]int
	dirty       bool
	// structChanged: what is programmed may have changed (chains declared
	// or removed, jump targets, forced chains, sets, verdict-map targets).
	// The next plan updates the last one's programmed chains with
	// reachDelta, from oldTargets (the targets, as of the last plan, of
	// the chains whose declaration changed since), rootsChanged (chains
	// that a verdict map started or stopped jumping to) and newMapEdges,
	// or walks the whole table when needWalk is set or reachDelta cannot
	// tell.
	structChanged bool
	oldTargets    map[string][]string
	rootsChanged  map[string]struct{}
	newMapEdges   []mapEdge
	needWalk      bool
	changedChains map[string]struct{}
	changedSets   map[string]struct{}

	kern *kstate // nil: read the kernel on the next Apply
	// verify: check the ruleset generation before trusting kern.
	verify bool
	// synced: kern is the declared state as of the last plan, but for the
	// objects held back and what changed since; prog and broken hold.
	synced bool
	prog   map[string]bool
	broken map[string]*dataplane.ObjectError
	// refs counts, for each chain, the rules of programmed chains that
	// jump or go to it (as of the last plan, updated by reachDelta).
	refs map[string]int
	// counted are the programmed chains' rule counts as the last plan left
	// them, progRules their sum (WorkStats.Chains and Rules).
	counted   map[string]int
	progRules int
	// objects are Stats' Desired and InKernel, counted at the end of
	// each Apply that left a kernel picture.
	objects struct{ desired, inKernel int }

	// ledger keeps the objects not written: those the kernel refused
	// (Fail, on objectBackoff) and those whose declaration cannot be
	// written (Hold: the broken ones), by object key. held is what the
	// table holds back of each refused object until its retry, keyed
	// like the ledger and cleaned whenever the ledger forgets the key.
	ledger        *dataplane.Ledger[string]
	held          map[string]hold
	wholeFailures int

	recheck nfcore.Recheck

	sock kernel.NFTablesSocket
	// sockCleanup closes sock if the Table is collected without Close;
	// Close stops it, so that a socket is closed once.
	sockCleanup runtime.Cleanup
	sockMu      sync.Mutex // guards sock against Close during Apply
	buf         []byte
	seq         uint32
	ids         uint32

	statsMu sync.Mutex
	stats   WorkStats
}

// chainDecl is a declared chain, rendered.
type chainDecl struct {
	rules []rendered
	force bool
	// base is set for a hook's base chain.
	base *baseSpec
}

// baseSpec is a base chain's hook, priority, type and policy.
type baseSpec struct {
	hook     netfilter.Hook
	num      uint32
	priority int32
	typ      string
	policy   Policy
}

// setDecl is a declared set.
type setDecl struct {
	spec setSpec
	// elems are the declared elements: encoded key → encoded verdict ("" in
	// a plain set).
	elems map[string]string
	// canon are the elements as written for a one-field interval set
	// (merged ranges); nil for other sets, which write elems.
	canon map[string]string
	// changed are the keys (of canon for an interval set of one field)
	// changed since the last plan; all: every key may have.
	changed map[string]struct{}
	all     bool
}

// written returns the elements as the kernel holds them.
func (s *setDecl) written() map[string]string {
	if s.canon != nil {
		return s.canon
	}
	return s.elems
}

// hold is what is held back of an object.
type hold uint8

const (
	holdNone hold = iota
	// holdContent keeps a chain's kernel rules (creating it empty if
	// missing), an element's kernel version, a set's kernel shape.
	holdContent
	// holdDelete keeps the kernel's chain or set as it is, or absent: one
	// no longer wanted stays, one whose creation was refused is not
	// created.
	holdDelete
)

// objectBackoff paces the retries of an object Apply could not write.
var objectBackoff = dataplane.Backoff{Initial: time.Second, Max: 5 * time.Minute}

// New validates opts and returns a Table with nothing declared. It does
// no I/O: the first Apply reads the table from the kernel, adopts what it
// finds and writes only what differs (everything in the table that was not
// declared is deleted).
func New(opts Options) (*Table, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	t := &Table{
		opts:          o,
		name:          fmt.Sprintf("nftables-%s-%s", familyName(o.Family), o.Name),
		fam:           nfproto(o.Family),
		hooks:         map[netfilter.Hook]bool{},
		chains:        map[string]*chainDecl{},
		sets:          map[string]*setDecl{},
		vmapTargets:   map[string]int{},
		mapTargets:    map[string]map[string]int{},
		dirty:         true,
		structChanged: true,
		oldTargets:    map[string][]string{},
		rootsChanged:  map[string]struct{}{},
		changedChains: map[string]struct{}{},
		changedSets:   map[string]struct{}{},
		ledger:        dataplane.NewLedger[string](objectBackoff, o.Clock),
		held:          map[string]hold{},
		counted:       map[string]int{},
		recheck:       nfcore.NewRecheck(o.PostWriteRecheck),
	}
	for _, h := range roleHooks[o.Role] {
		t.hooks[h] = true
	}
	t.opts.Logger = o.Logger.With("table", t.name)
	return t, nil
}

// Name returns the Table's name for logs, such as "nftables-ip-np-filter".
func (t *Table) Name() string { return t.name }

// Family returns Options.Family (netfilter.TableInfo).
func (t *Table) Family() ipfamily.Family { return t.opts.Family }

// CheckChain returns the error SetChains would return for a chain called
// name: an invalid name, or one not the Table's to own (ErrNotOwned); nil
// when it takes it (netfilter.TableInfo). It does no I/O.
func (t *Table) CheckChain(name string) error { return t.checkOwned(name) }

var _ netfilter.TableInfo = (*Table)(nil)

// Phase returns dataplane.PhaseTables.
func (t *Table) Phase() dataplane.Phase { return dataplane.PhaseTables }

// Options returns the Table's options with defaults filled in.
func (t *Table) Options() Options {
	o := t.opts
	o.PostWriteRecheck = slices.Clone(o.PostWriteRecheck)
	return o
}

// WorkStats returns the Table's work counters.
func (t *Table) WorkStats() WorkStats {
	t.statsMu.Lock()
	defer t.statsMu.Unlock()
	return t.stats
}

// Close releases the Table's netlink socket. The Table stays usable: the
// next Apply opens a new socket. The kernel state is left as it is (use
// RemoveTable to delete the table).
func (t *Table) Close() error {
	t.sockMu.Lock()
	defer t.sockMu.Unlock()
	if t.sock == nil {
		return nil
	}
	// Closed here, the socket must not be closed again when the Table is
	// collected: a socket may close a bare descriptor number, which by
	// then names another file.
	t.sockCleanup.Stop()
	err := t.sock.Close()
	t.sock = nil
	return err
}

// socket returns the Table's socket, opened on first use.
func (t *Table) socket() (kernel.NFTablesSocket, error) {
	t.sockMu.Lock()
	defer t.sockMu.Unlock()
	if t.sock != nil {
		return t.sock, nil
	}
	s, err := openSocket(t.opts.Kernel)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWrite, err)
	}
	t.sock = s
	// A Table dropped without Close releases its socket when collected.
	t.sockCleanup = runtime.AddCleanup(t, func(s kernel.NFTablesSocket) { _ = s.Close() }, s)
	return s, nil
}

// dropSocket closes the socket after an error that may have left it out
// of step with the kernel.
func (t *Table) dropSocket() { _ = t.Close() }

// checkOwned validates a declared chain name.
func (t *Table) checkOwned(name string) error {
	if err := netfilter.ValidateChainName(name); err != nil {
		return quoted(err)
	}
	if t.opts.ChainPrefix != "" && !strings.HasPrefix(name, t.opts.ChainPrefix) {
		return fmt.Errorf("%w: %q does not start with %q", ErrNotOwned, name, t.opts.ChainPrefix)
	}
	for _, h := range roleHooks[t.opts.Role] {
		if name == BaseChain(h) {
			return fmt.Errorf("%w: %q is the name of one of the table's base chains", ErrNotOwned, name)
		}
	}
	return nil
}

// checkTarget validates the chain a rule or verdict-map element jumps or
// goes to: a regular chain the Table may own (never a base chain, which
// the kernel refuses as a target, nor a name outside ChainPrefix, which
// the Table could never declare).
func (t *Table) checkTarget(name string) error {
	if err := t.checkOwned(name); err != nil {
		return fmt.Errorf("%w (a jump or goto target)", err)
	}
	return nil
}

// setSpecOf is the renderer's view of the declared sets.
func (t *Table) setSpecOf(name string) *setSpec {
	if s := t.sets[name]; s != nil {
		return &s.spec
	}
	return nil
}

// renderRules renders a chain's rules at at; identical rules get
// different hashes by their order.
func (t *Table) renderRules(chain string, at placement, rules []netfilter.Rule) ([]rendered, error) {
	rd := renderer{f: t.opts.Family, at: at, counters: t.opts.Counters, sets: t.setSpecOf}
	out := make([]rendered, 0, len(rules))
	seen := map[string]int{}
	for i, r := range rules {
		x, err := rd.render(r, t.opts.HashPrefix, 0)
		if err == nil && x.target != "" {
			err = t.checkTarget(x.target)
		}
		if err != nil {
			return nil, fmt.Errorf("%w (chain %s, rule %d)", err, chain, i)
		}
		if n := seen[x.hash]; n > 0 {
			seen[x.hash] = n + 1
			x.hash = ruleHash(x.exprs, x.anon, r.Comments, n)
			comment := t.opts.HashPrefix + x.hash
			for _, c := range r.Comments {
				comment += " " + c
			}
			x.udata = appendComment(nil, comment)
		} else {
			seen[x.hash] = 1
		}
		out = append(out, x)
	}
	return out, nil
}

// sameRules reports whether two rendered lists are the same rules.
func sameRules(a, b []rendered) bool {
	return slices.EqualFunc(a, b, func(x, y rendered) bool { return x.hash == y.hash })
}

// targets returns what a chain's rules jump to and the verdict maps they
// dispatch through, for comparing structure.
func targets(rules []rendered) (chains, vmaps []string) {
	for i := range rules {
		if rules[i].target != "" {
			chains = append(chains, rules[i].target)
		}
		if rules[i].vmap != "" {
			vmaps = append(vmaps, rules[i].vmap)
		}
	}
	return chains, vmaps
}

// sameTargets reports whether two lists jump to the same chains and maps.
func sameTargets(a, b []rendered) bool {
	ac, av := targets(a)
	bc, bv := targets(b)
	return slices.Equal(ac, bc) && slices.Equal(av, bv)
}

// SetChains sets the full content of regular chains, replacing what was
// declared for them before. Every name must be a valid chain name, carry
// Options.ChainPrefix when set and not be one of the base chains'
// (BaseChain); every rule must render for the Table's family and role
// (see the package documentation for what is refused here and what only
// Apply can find); a set or verdict map a rule uses must be declared
// (SetSets) before. Otherwise nothing changes and the error says which
// rule of which chain is wrong. The kernel is written by the next Apply,
// and only if a programmed rule or a verdict-map element jumps to the
// chain, or it is forced. A chain declared with the same rules as before
// is left as it is; one declared differently is retried at once by the
// next Apply even if the kernel refused its previous content.
func (t *Table) SetChains(chains ...netfilter.Chain) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	type change struct {
		name string
		d    *chainDecl
	}
	var changes []change
	seen := map[string]bool{}
	for _, c := range chains {
		if err := t.checkOwned(c.Name); err != nil {
			return err
		}
		if seen[c.Name] {
			return fmt.Errorf("%w: chain %s", ErrDuplicate, c.Name)
		}
		seen[c.Name] = true
		rules, err := t.renderRules(c.Name, placement{role: t.opts.Role}, c.Rules)
		if err != nil {
			return err
		}
		for i := range rules {
			if rules[i].target == c.Name {
				return errRulef("chain %s jumps to itself (rule %d)", c.Name, i)
			}
		}
		old := t.chains[c.Name]
		if old != nil && old.force == c.ForceProgramming && sameRules(old.rules, rules) {
			continue
		}
		changes = append(changes, change{c.Name, &chainDecl{rules: rules, force: c.ForceProgramming}})
	}
	for _, ch := range changes {
		old := t.chains[ch.name]
		if old == nil || old.force != ch.d.force || !sameTargets(old.rules, ch.d.rules) {
			t.declChanging(ch.name)
		}
		t.chains[ch.name] = ch.d
		t.chainChanged(ch.name)
	}
	return nil
}

// chainChanged records that a chain's declaration changed.
func (t *Table) chainChanged(name string) {
	t.changedChains[name] = struct{}{}
	t.retryNow(objChain(name))
	t.dirty = true
}

// RemoveChains forgets regular chains: the next Apply deletes them from
// the kernel (with the jumps to them that it owns). Names not declared are
// ignored; a name the Table cannot own is an error and nothing changes.
// A rule or verdict-map element that still jumps to a removed chain is not
// written while it does (ErrUnknownChain, see Apply).
func (t *Table) RemoveChains(names ...string) error {
	for _, n := range names {
		if err := t.checkOwned(n); err != nil {
			return err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range names {
		if _, ok := t.chains[n]; ok {
			t.declChanging(n)
			if t.vmapTargets[n] > 0 {
				t.needWalk = true // map elements jump to it
			}
			delete(t.chains, n)
			t.chainChanged(n)
		}
	}
	return nil
}

// InsertRules sets owner's rules at the top of hook's base chain
// (BaseChain), before those of AppendRules, replacing those owner set there
// before; nil or empty removes them (and the base chain, when no rule is
// left at the hook and the policy is accept). Several owners share a hook:
// their rules stand in the order of the owners' names, and one owner's
// call leaves the others' rules in place. A rule the role or hook does not
// allow, or an invalid owner, is refused here, and nothing changes. As in
// iptables' built-in chain, a packet one of them accepts meets none of the
// rules after it — but it still meets the base chains of later priorities
// at the hook, of other tables (see the package documentation).
func (t *Table) InsertRules(owner string, hook netfilter.Hook, rules []netfilter.Rule) error {
	return t.setGroup(owner, hook, rules, false)
}

// AppendRules sets owner's rules at the bottom of hook's base chain, after
// those of InsertRules, replacing those owner set there before; nil or
// empty removes them. Owners share a hook as with InsertRules. Changing
// one rule rewrites only that rule; the others keep their place and their
// counters.
func (t *Table) AppendRules(owner string, hook netfilter.Hook, rules []netfilter.Rule) error {
	return t.setGroup(owner, hook, rules, true)
}

// SetPolicy sets the policy of hook's base chain: PolicyDrop drops every
// packet that none of our rules accepted or sent elsewhere. Note that,
// unlike in iptables, a packet another table's chain accepted still meets
// ours.
func (t *Table) SetPolicy(hook netfilter.Hook, p Policy) error {
	if err := t.checkHook(hook); err != nil {
		return err
	}
	if p != PolicyAccept && p != PolicyDrop {
		return fmt.Errorf("%w: unknown policy %d", ErrInvalidOptions, p)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	name := BaseChain(hook)
	d := t.chains[name]
	cur := PolicyAccept
	if d != nil {
		cur = d.base.policy
	}
	if cur == p {
		return nil
	}
	nd := &chainDecl{base: t.baseSpec(hook)}
	if d != nil {
		nd.rules = d.rules
	}
	nd.base.policy = p
	t.putBase(name, nd)
	return nil
}

// checkHook checks that the role offers hook.
func (t *Table) checkHook(hook netfilter.Hook) error {
	if !t.hooks[hook] {
		return fmt.Errorf("%w: %q is not one of the %s role's hooks %v", ErrNoSuchHook, hook, t.opts.Role, roleHooks[t.opts.Role])
	}
	return nil
}

// baseSpec returns the spec of a hook's base chain.
func (t *Table) baseSpec(hook netfilter.Hook) *baseSpec {
	return &baseSpec{
		hook: hook, num: hookNum(hook), priority: t.opts.Role.Priority(hook),
		typ: t.opts.Role.chainType(hook),
	}
}

// hookNum is the kernel's number of a hook.
func hookNum(h netfilter.Hook) uint32 {
	switch h {
	case netfilter.HookPrerouting:
		return nfnl.HookPrerouting
	case netfilter.HookInput:
		return nfnl.HookInput
	case netfilter.HookForward:
		return nfnl.HookForward
	case netfilter.HookOutput:
		return nfnl.HookOutput
	}
	return nfnl.HookPostrouting
}

// setGroup sets owner's rules of InsertRules (appendGroup false) or
// AppendRules at hook: the base chain holds the first group, then the
// second.
func (t *Table) setGroup(owner string, hook netfilter.Hook, rules []netfilter.Rule, appendGroup bool) error {
	if err := t.checkHook(hook); err != nil {
		return err
	}
	if err := nfcore.ValidateOwner(owner); err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	name := BaseChain(hook)
	at := placement{role: t.opts.Role, hook: hook}
	t.mu.Lock()
	defer t.mu.Unlock()
	// Rendered alone first, so that an error names the rule by its place
	// in rules.
	if _, err := t.renderRules(name, at, rules); err != nil {
		return err
	}
	var insert, appended []netfilter.Rule
	if appendGroup {
		insert, appended = t.hookRules.Group(hook, false), t.hookRules.With(hook, true, owner, rules)
	} else {
		insert, appended = t.hookRules.With(hook, false, owner, rules), t.hookRules.Group(hook, true)
	}
	rs, err := t.renderRules(name, at, slices.Concat(insert, appended))
	if err != nil {
		return err
	}
	t.hookRules.Set(hook, appendGroup, owner, rules)
	d := t.chains[name]
	if d != nil && sameRules(d.rules, rs) {
		return nil
	}
	nd := &chainDecl{rules: rs, base: t.baseSpec(hook)}
	if d != nil {
		nd.base.policy = d.base.policy
	}
	t.putBase(name, nd)
	return nil
}

// putBase stores a base chain's declaration; one with no rules and the
// accept policy is not wanted.
func (t *Table) putBase(name string, d *chainDecl) {
	old := t.chains[name]
	if len(d.rules) == 0 && d.base.policy == PolicyAccept {
		if old == nil {
			return
		}
		t.declChanging(name)
		delete(t.chains, name)
	} else {
		if old == nil || !sameTargets(old.rules, d.rules) {
			t.declChanging(name)
		}
		t.chains[name] = d
	}
	t.chainChanged(name)
}

// retryNow forgets that an object was not written, because it was
// declared anew: the next Apply tries it at once, in a full plan.
func (t *Table) retryNow(key string) {
	if _, ok := t.held[key]; ok {
		t.forget(key)
		t.structChanged, t.needWalk = true, true
	}
}

// QueueResync makes the next Apply check whether the kernel changed since
// the Table last read or wrote it (the ruleset generation) and, if it did,
// read the table again and repair whatever differs. A dataplane.Loop calls
// it every ResyncInterval and after a failed Apply; a Table used without a
// loop repairs drift only when its user calls it (or at a post-write
// recheck).
func (t *Table) QueueResync() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.verify = true
}

// Object keys: a chain's, a set's and an element's.
func objChain(name string) string { return "c\x00" + name }
func objSet(name string) string   { return "s\x00" + name }
func objElem(set, key string) string {
	return "e\x00" + set + "\x00" + key
}

// elemOfObj returns the set and key of an element's object key.
func elemOfObj(obj string) (set, key string, ok bool) {
	rest, ok := strings.CutPrefix(obj, "e\x00")
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "\x00")
}

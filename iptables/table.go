// Size: the Table's state and its whole Apply cycle (scope, restore, per-object failures, recheck), read in the order Apply runs it.

package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/nfcore"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// A Table is the rule table of the rule model, and so a driver of the
// dataplane loop that reports its DriverStats.
var (
	_ netfilter.Table         = (*Table)(nil)
	_ dataplane.StatsReporter = (*Table)(nil)
)

// WorkStats count a Table's work since New. Kernel tests use them to
// prove that a no-op Apply writes nothing.
type WorkStats struct {
	// Saves and SaveErrors count iptables-save runs and failed ones.
	Saves, SaveErrors int
	// Restores and RestoreErrors count iptables-restore runs and failed
	// ones. A no-op Apply adds nothing.
	Restores, RestoreErrors int
	// LinesWritten counts the command lines (-A, -R, -D, -I, -F, -X and
	// chain declarations) of successful restores.
	LinesWritten int
	// SaveTime and RestoreTime add up the time spent waiting for the
	// binaries, as measured by the Table's clock.
	SaveTime, RestoreTime time.Duration
	// Chains and Rules are the owned chains and the rules (in owned and
	// built-in chains) programmed by the last successful Apply.
	Chains, Rules int
}

// Table keeps one iptables table of one IP family (for example the IPv4
// filter table) in the state its owner declares: the full content of the
// owned chains (those whose names carry the prefix) and our rules in the
// built-in chains. Apply writes only the difference with what the kernel
// holds, in one iptables-restore transaction, and never touches a rule or
// chain that is not ours. An object the kernel refuses (an owned chain, or
// our rules in one built-in chain) is left out and retried on its own
// backoff, so it never holds the others back (see "One object never holds
// back the others" in the package documentation).
//
// A Table is safe for concurrent use; Apply holds its lock while it runs
// the binaries.
type Table struct {
	opts    Options
	name    string
	runner  command.Runner
	inNS    func(func() error) error // nil: no in-process read
	parser  saveParser
	builtin map[string]bool

	mu      sync.Mutex
	desired map[string]*desiredChain
	hooks   map[string]*hookRules
	// owners are the rules each owner declared at the hooks; hooks holds
	// their rendered concatenation.
	owners nfcore.HookRules
	dirty  bool
	// unhashed are the lists declared since the last Apply, whose hashes
	// the next Apply computes (while iptables-save runs, when it reads).
	unhashed []unhashedList

	kernel *kernelTable // nil: read the kernel on the next Apply
	// synced says that kernel is the declared state as of the last plan
	// (what it wrote, or found right, but for the objects held back),
	// except for what changed since: changedChains and changedHooks, or
	// anything when structChanged (jump targets, forced chains or the set
	// of chains changed). Then prog (the programmed chains) and broken
	// still hold and only the changed chains need comparing. chainRules
	// counts the rules of prog.
	synced        bool
	structChanged bool
	changedChains map[string]struct{}
	changedHooks  map[string]struct{}
	prog          map[string]bool
	// broken are the objects whose declaration cannot be written
	// (ErrUnknownChain, ErrChainLoop), found with prog.
	broken     map[string]*dataplane.ObjectError
	chainRules int
	planFully  bool // tests: never plan incrementally

	// ledger keeps the objects an Apply could not write, by name: a
	// refused one (Fail) keeps its kernel version as held says until its
	// retry is due or it is declared anew; one whose declaration cannot
	// be written (broken) is a Hold, looked at again by every plan.
	ledger *dataplane.Ledger[string]
	// held is what a plan holds back of each refused object in the
	// ledger; it has exactly the ledger's failed (not held) objects.
	held map[string]hold

	// objects are Stats' Desired and InKernel, counted at the end of
	// each Apply that left a kernel picture.
	objects struct{ desired, inKernel int }

	recheck nfcore.Recheck

	statsMu sync.Mutex
	stats   WorkStats
}

// objectBackoff paces the retries of an object Apply could not write: the
// first retry comes a second after the failure, and each further failure
// doubles the delay up to five minutes.
var objectBackoff = dataplane.Backoff{Initial: time.Second, Max: 5 * time.Minute}

// maxRounds bounds the restores of one Apply. A round that fails costs
// one restore and either leaves an object out or halves the objects that
// the culprit is searched in, so a few refused objects among thousands
// take a few dozen rounds; past the bound Apply fails as a whole and the
// next Apply goes on from there (the objects found stay left out).
const maxRounds = 64

// desiredChain is an owned chain rendered for writing.
type desiredChain struct {
	ruleList
	force bool
}

// hookRules are our rules in one built-in chain: the InsertRules group
// at its top and the AppendRules group at its bottom.
type hookRules struct {
	insert, append ruleList
}

// unhashedList is a declared list waiting for its hashes.
type unhashedList struct {
	chain, salt string
	list        *ruleList
	// owner is the desired chain the list belongs to (nil for the groups
	// of built-in chains): a chain replaced before Apply is not hashed.
	owner *desiredChain
}

// New validates opts and returns a Table with nothing declared. It does no
// I/O: the first Apply reads the kernel, adopts the rules and chains that
// already carry the prefixes and writes only what differs.
// Until InsertRules and AppendRules say otherwise, the Table wants none of
// its rules in the built-in chains, so an Apply removes those a previous
// run left there.
func New(opts Options) (*Table, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	t := &Table{
		opts:    o,
		name:    fmt.Sprintf("iptables-%s-%s-v%d", o.Backend, o.Table, uint8(o.Family)),
		runner:  runnerOf(o.Kernel),
		inNS:    inNamespace(o.Kernel),
		parser:  saveParser{table: o.Table, chainPrefix: o.ChainPrefix, hashPrefix: o.HashPrefix},
		builtin: map[string]bool{},
		desired: map[string]*desiredChain{},
		hooks:   map[string]*hookRules{},
		dirty:   true,

		changedChains: map[string]struct{}{},
		changedHooks:  map[string]struct{}{},
		ledger:        dataplane.NewLedger[string](objectBackoff, o.Clock),
		held:          map[string]hold{},
		recheck:       nfcore.NewRecheck(o.PostWriteRecheck),
	}
	for _, c := range tableChains[o.Table] {
		t.builtin[c] = true
	}
	t.opts.Logger = o.Logger.With("table", t.name)
	return t, nil
}

// Name returns the Table's name for logs, such as "iptables-nft-filter-v4".
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

// Stats implements dataplane.StatsReporter. The objects are the owned
// chains the last Apply programmed (those reachable from our rules in
// built-in chains, and the forced ones) and the built-in chains holding
// declared rules of ours: Desired counts them, and InKernel those the
// kernel held as the last Apply read or wrote it (an owned chain that
// exists, a built-in chain with a rule of ours). Failing counts the
// objects of the last PartialError (failed, waiting for their retry, or
// whose declaration cannot be written), and Writes the command lines of
// successful restores.
func (t *Table) Stats() dataplane.DriverStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := dataplane.DriverStats{Desired: t.objects.desired, InKernel: t.objects.inKernel, Failing: t.ledger.Len()}
	t.statsMu.Lock()
	st.Writes = uint64(t.stats.LinesWritten)
	t.statsMu.Unlock()
	return st
}

// SetChains sets the full content of owned chains, replacing what was
// declared for them before. Every name must carry the ChainPrefix and
// every rule must render for the Table's IP family and table (see
// "Declaring and applying" in the package documentation for what is
// refused here and what only Apply can find); otherwise nothing changes
// and the error says which rule of which chain is wrong. The kernel is
// written by the next Apply, and only if a programmed rule jumps to the
// chain or it is forced. A chain declared with the same rules as before is
// left as it is (its rendering and hashes are kept); a chain declared
// differently is retried at once by the next Apply even if the kernel
// refused its previous content.
func (t *Table) SetChains(chains ...netfilter.Chain) error {
	sc := getScratch()
	defer putScratch(sc)
	var seen map[string]struct{}
	if len(chains) > 1 {
		if sc.seen == nil {
			sc.seen = make(map[string]struct{}, len(chains))
		}
		seen = sc.seen
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// Render each chain and compare it with what is declared; nothing
	// changes until every chain has rendered. An unchanged chain keeps its
	// rendering and hashes, and costs no allocation.
	changes := sc.changes[:0]
	for _, c := range chains {
		if err := t.checkOwned(c.Name); err != nil {
			return err
		}
		if seen != nil {
			if _, dup := seen[c.Name]; dup {
				return fmt.Errorf("%w: %s", ErrDuplicateChain, c.Name)
			}
			seen[c.Name] = struct{}{}
		}
		sc.resetLists()
		if _, err := sc.renderList(c.Name, placement{table: t.opts.Table}, c.Rules, t.opts.Family); err != nil {
			return err
		}
		old := t.desired[c.Name]
		same := old != nil && sc.same(0, &old.ruleList)
		var d *desiredChain
		switch {
		case same && old.force == c.ForceProgramming:
			continue
		case same:
			d = &desiredChain{ruleList: old.ruleList, force: c.ForceProgramming}
		default:
			d = &desiredChain{ruleList: sc.list(0), force: c.ForceProgramming}
		}
		changes = append(changes, chainChange{name: c.Name, chain: d})
	}
	sc.changes = changes
	for _, ch := range changes {
		old := t.desired[ch.name]
		if old == nil || old.force != ch.chain.force || !slices.Equal(old.targets, ch.chain.targets) {
			t.structChanged = true
		} else if t.prog[ch.name] {
			t.chainRules += ch.chain.len() - old.len()
		}
		t.changedChains[ch.name] = struct{}{}
		t.desired[ch.name] = ch.chain
		t.retryNow(ch.name)
		if !ch.chain.hashed {
			t.unhashed = append(t.unhashed, unhashedList{chain: ch.name, salt: saltNone, list: &ch.chain.ruleList, owner: ch.chain})
		}
		t.dirty = true
	}
	return nil
}

// RemoveChains forgets owned chains: the next Apply deletes them from the
// kernel (after removing the jumps to them that we own; a chain a foreign
// rule still jumps to is flushed and kept, see ErrChainInUse). Names not
// declared are ignored; a name without the prefix is an error and nothing
// changes. An object with a rule that still jumps to a removed chain is
// not written while it does (ErrUnknownChain).
func (t *Table) RemoveChains(names ...string) error {
	for _, n := range names {
		if err := t.checkOwned(n); err != nil {
			return err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range names {
		if _, ok := t.desired[n]; ok {
			delete(t.desired, n)
			t.retryNow(n)
			t.dirty, t.structChanged = true, true
		}
	}
	return nil
}

// InsertRules sets owner's rules at the top of the built-in chain hook of
// the table (such as FORWARD in filter), before every foreign rule,
// replacing those owner set there before; nil or empty removes them.
// Several owners share a hook: their rules stand in the order of the
// owners' names, and one owner's call leaves the others' rules in place.
// Foreign rules of the chain are never touched, wherever they are. A rule
// the table or chain does not allow, or an invalid owner, is refused here
// (see SetChains) and nothing changes.
func (t *Table) InsertRules(owner string, hook netfilter.Hook, rules []netfilter.Rule) error {
	return t.setHook(owner, string(hook), rules, false)
}

// AppendRules sets owner's rules at the bottom of the built-in chain hook,
// after every foreign rule, replacing those owner set there before; nil or
// empty removes them. Owners share a hook as with InsertRules. A chain can
// hold both groups: InsertRules ones at its top, AppendRules ones at its
// bottom. Changing one rule of a group rewrites only that rule; the others
// keep their place and their packet counters.
func (t *Table) AppendRules(owner string, hook netfilter.Hook, rules []netfilter.Rule) error {
	return t.setHook(owner, string(hook), rules, true)
}

func (t *Table) setHook(owner, chain string, rules []netfilter.Rule, appendGroup bool) error {
	if !t.builtin[chain] {
		return fmt.Errorf("%w: %q is not one of %s's built-in chains %v", ErrNotBuiltin, chain, t.opts.Table, tableChains[t.opts.Table])
	}
	if err := nfcore.ValidateOwner(owner); err != nil {
		return fmt.Errorf("iptables: %w", err)
	}
	salt := saltInsert
	if appendGroup {
		salt = saltAppend
	}
	sc := getScratch()
	defer putScratch(sc)
	t.mu.Lock()
	defer t.mu.Unlock()
	at := placement{table: t.opts.Table, chain: chain}
	// Rendered alone first, so that an error names the rule by its place
	// in rules.
	i, err := sc.renderList(chain, at, rules, t.opts.Family)
	if err != nil {
		return err
	}
	if group := t.owners.With(netfilter.Hook(chain), appendGroup, owner, rules); len(group) != len(rules) {
		// Other owners have rules here: the group is rendered whole.
		sc.resetLists()
		if i, err = sc.renderList(chain, at, group, t.opts.Family); err != nil {
			return err
		}
	}
	t.owners.Set(netfilter.Hook(chain), appendGroup, owner, rules)
	h := t.hooks[chain]
	if h == nil {
		h = &hookRules{}
		t.hooks[chain] = h
	}
	cur := &h.insert
	if appendGroup {
		cur = &h.append
	}
	if sc.same(i, cur) {
		return nil
	}
	l := sc.list(i)
	if !slices.Equal(cur.targets, l.targets) {
		t.structChanged = true
	}
	t.changedHooks[chain] = struct{}{}
	*cur = l
	t.unhashed = append(t.unhashed, unhashedList{chain: chain, salt: salt, list: cur})
	t.retryNow(chain)
	t.dirty = true
	return nil
}

// retryNow forgets that an object was not written, because it was
// declared anew: the next Apply tries it at once, in a full plan (an
// object held back may lie outside what an incremental plan looks at,
// such as an unwanted chain).
func (t *Table) retryNow(name string) {
	if _, ok := t.held[name]; ok {
		t.forget(name)
		t.structChanged = true
	}
}

// forget drops a refused object from the ledger and what is held back of
// it.
func (t *Table) forget(name string) {
	t.ledger.Forget(name)
	delete(t.held, name)
}

// QueueResync makes the next Apply re-read the kernel and repair whatever
// differs, instead of trusting what the Table wrote last. A dataplane.Loop
// calls it every ResyncInterval and after a failed Apply; a Table used
// without a loop repairs drift only when its user calls it (or at a
// post-write recheck).
func (t *Table) QueueResync() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropKernel()
}

// checkOwned validates an owned chain name.
func (t *Table) checkOwned(name string) error {
	if err := netfilter.ValidateChainName(name); err != nil {
		return quoted(err)
	}
	if !strings.HasPrefix(name, t.opts.ChainPrefix) {
		return fmt.Errorf("%w: %q does not start with %q", ErrNotOwned, name, t.opts.ChainPrefix)
	}
	return nil
}

// hashDeclared computes the hashes of the lists declared since the last
// Apply.
func (t *Table) hashDeclared() {
	for _, u := range t.unhashed {
		if u.owner != nil && t.desired[u.chain] != u.owner {
			continue // replaced or removed since
		}
		u.list.ensureHashed(u.chain, u.salt)
	}
	if cap(t.unhashed) > keepBookkeeping {
		t.unhashed = nil // a big declaration: do not keep its room
	} else {
		clear(t.unhashed)
		t.unhashed = t.unhashed[:0]
	}
}

// keepBookkeeping is the most entries that the Table's per-Apply
// bookkeeping (lists to hash, changed chains) keeps room for once done.
const keepBookkeeping = 256

// programmed returns the owned chains to program — those reachable through
// jumps from our rules in built-in chains, from forced chains and from
// chains that foreign rules in the kernel jump to — and the objects whose
// declaration cannot be written: our rules in a built-in chain, or an owned
// chain, with a jump to an owned chain that is not declared
// (ErrUnknownChain), and the owned chain whose jump closes a loop
// (ErrChainLoop). Such a chain is still programmed (it keeps its kernel
// content, see hold), and the chains it jumps to are too.
func (t *Table) programmed(kt *kernelTable) (map[string]bool, map[string]*dataplane.ObjectError) {
	broken := map[string]*dataplane.ObjectError{}
	breaks := func(name string, reason error, format string, a ...any) {
		if broken[name] == nil {
			broken[name] = objectError(name, reason, fmt.Sprintf(format, a...), nil)
		}
	}
	owned := func(name string) bool { return strings.HasPrefix(name, t.opts.ChainPrefix) }
	var roots []string
	for _, chain := range sortedKeys(t.hooks) {
		h := t.hooks[chain]
		for _, target := range slices.Concat(h.insert.targets, h.append.targets) {
			switch {
			case !owned(target):
			case t.desired[target] == nil:
				breaks(chain, ErrUnknownChain, "a rule of ours jumps to %s, which is not declared", target)
			default:
				roots = append(roots, target)
			}
		}
	}
	for _, name := range sortedKeys(t.desired) {
		d := t.desired[name]
		if d.force {
			roots = append(roots, name)
		} else if kt != nil {
			if kc := kt.chains[name]; kc != nil && kc.foreignRefs > 0 {
				roots = append(roots, name)
			}
		}
	}
	prog := nfcore.Reach(nfcore.Graph{
		Targets:  func(dst []string, name string) []string { return append(dst, t.desired[name].targets...) },
		Declared: func(name string) bool { return t.desired[name] != nil },
		Foreign:  func(name string) bool { return !owned(name) }, // the kernel checks that it exists
	}, roots, func(b nfcore.Break) {
		switch b.Reason {
		case nfcore.BreakLoop:
			breaks(b.Chain, ErrChainLoop, "it jumps back to %s", b.Target)
		case nfcore.BreakUnknown:
			breaks(b.Chain, ErrUnknownChain, "it jumps to %s, which is not declared", b.Target)
		}
	})
	return prog, broken
}

// Apply makes the kernel match the declared state. When nothing changed
// since the last Apply and no recheck or retry is due it returns at once
// without running anything. Otherwise it reads the table if its picture of
// the kernel is stale (first Apply, QueueResync, post-write recheck, a
// retry due, previous failure), computes
// the difference and writes it in one iptables-restore --noflush
// transaction, or runs nothing when there is nothing to write.
//
// One object never holds back the others. When the restore binary
// refuses a line, Apply reads the table again with iptables-save (the
// picture may have been stale: another writer) and writes again; when it
// still refuses one, Apply leaves out the object the line belongs to (an
// owned chain, or our rules in one built-in chain: the kernel keeps its
// current version) and writes the rest, until the transaction goes
// through (within 64 restores; past them Apply fails as a whole and the
// next Apply goes on without the objects found). When the binary blames
// no object's line (the legacy kernel checks the rules when the table is
// committed), Apply finds the object by writing halves of the changed
// objects alone. An object that jumps to a foreign chain or matches an ip
// set that the kernel lacks is left out before writing, without a failed
// restore (see "One object never holds back the others" in the package
// documentation). The objects left out, and those whose declaration
// cannot be written (ErrUnknownChain, ErrChainLoop), make Apply return a
// *dataplane.PartialError (errors.Is(err, dataplane.ErrPartial)) holding a
// *dataplane.ObjectError per object; each is retried on its own backoff
// (see dataplane.ObjectError.RetryAt; RetryAfter asks the loop to come
// back then), or at once when it is declared anew; one left out for
// what the read showed, as soon as a read shows the cause gone. Only a
// failure that belongs to no object
// (the binary is missing, the table cannot be read, the lock wait timed
// out) is returned as such, and the next Apply starts with a re-read; the
// dataplane loop retries it with backoff.
//
// When it reads (see Options.Kernel), it does so in a goroutine while it
// hashes the rules declared since the last Apply, and waits for the read
// before comparing; the read has always ended when Apply returns
// (cancelling ctx stops iptables-save through the runner). A nil ctx is
// context.Background().
//
// RetryAfter in the result is when the next recheck or retry is due.
func (t *Table) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	ctx = orBackground(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.countObjects()
	now := t.ledger.Begin()
	recheck := t.recheck.Due(now)
	work, err := t.prepare(ctx, now)
	if err != nil {
		return dataplane.ApplyResult{}, err
	}
	if !work {
		return t.result(now), t.ledger.Err()
	}
	wrote, err := t.write(ctx, now)
	if err != nil {
		t.dropKernel()
		return dataplane.ApplyResult{}, err
	}
	end := t.opts.Clock.Now()
	t.recheck.Settle(end, wrote, recheck, t.opts.Logger)
	return t.result(end), t.ledger.Err()
}

// prepare gets the kernel picture ready for deciding at now, as every
// Apply (and Plan) does: it drops the picture when a post-write recheck or
// the retry of a refused object is due, and reports whether there is
// anything to compare — not when the picture is fresh and nothing was
// declared since the last Apply. It then reads the table, when there is
// no picture, while it hashes the rules declared since the last Apply; the
// read is joined before it returns. A picture read here is compared by the
// next decision (it marks the Table dirty), so the read Plan makes serves
// the next Apply.
func (t *Table) prepare(ctx context.Context, now time.Time) (work bool, err error) {
	if t.recheck.Due(now) {
		t.dropKernel()
	}
	if t.retryDue() {
		// Whether the kernel takes the object now depends on the kernel
		// (a set, a foreign chain or a foreign reference): read it again.
		t.opts.Logger.Debug("retry of refused objects due: re-reading the table")
		t.dropKernel()
	}
	if t.kernel != nil && !t.dirty {
		return false, nil
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	var reading chan readResult
	if t.kernel == nil {
		reading = make(chan readResult, 1)
		p := t.readParser()
		go func() {
			kt, err := t.read(ctx, p)
			reading <- readResult{kt, err}
		}()
		defer func() {
			if reading != nil {
				<-reading
			}
		}()
	}
	t.hashDeclared()
	if reading != nil {
		r := <-reading
		reading = nil
		if r.err != nil {
			return false, r.err
		}
		t.kernel, t.synced, t.dirty = r.kt, false, true
	}
	return true, nil
}

// decision is what one pass of Apply (or a Plan) decided from the
// picture: the programmed chains, the objects whose declaration cannot be
// written, what to plan and what to hold back.
type decision struct {
	now        time.Time
	prog       map[string]bool
	broken     map[string]*dataplane.ObjectError
	scope      planScope
	chainRules int
	holds      map[string]hold
	// probes are the sets of objects to write alone while looking for
	// the one the kernel refuses without naming it, the next one last.
	probes [][]string
	// dry is set for a Plan: the objects held back for what the picture
	// shows are not recorded as failing, and the plan describes its
	// writes.
	dry bool
}

// start decides afresh from the picture. A jump to a foreign chain
// declared since the table was read makes it read the table again first:
// whether the chain exists is for the kernel to say now.
func (t *Table) start(ctx context.Context, d *decision) error {
	d.prog, d.broken, d.scope, d.chainRules = t.scope()
	if t.jumpsUnknown(d.prog, d.scope) {
		t.opts.Logger.Debug("a jump to a foreign chain was declared since the table was read: re-reading it")
		kt, err := t.read(ctx, t.readParser())
		if err != nil {
			return err
		}
		t.kernel, t.synced = kt, false
		d.prog, d.broken, d.scope, d.chainRules = t.scope()
	}
	d.holds = t.holds(d.broken)
	t.refuseMissing(d)
	return nil
}

// resave reads the table with iptables-save and decides afresh.
func (t *Table) resave(ctx context.Context, d *decision) error {
	kt, err := t.save(ctx, t.readParser())
	if err != nil {
		return err
	}
	t.kernel, t.synced = kt, false
	return t.start(ctx, d)
}

// decide returns the transaction of the next round: planned from the
// picture with d's holds (and, while d.probes remain, every object but the
// last probe's held back too), after reading with iptables-save when the
// plan needs texts the picture lacks, and without the objects whose rules
// match an ip set the kernel lacks. It writes nothing; Apply runs the
// result, Plan lists it.
func (t *Table) decide(ctx context.Context, d *decision) (*restorePlan, error) {
	for {
		round := d.holds
		if len(d.probes) > 0 {
			round = t.probeHolds(d.holds, d.probes[len(d.probes)-1], d.prog)
		}
		p := t.plan(t.kernel, d.prog, d.scope, round, d.dry)
		if p.needsSave {
			// Once read with iptables-save the picture has every text.
			if err := t.resave(ctx, d); err != nil {
				return nil, err
			}
			continue
		}
		held := t.refuseSets(ctx, p, d)
		if len(held) == 0 {
			return p, nil
		}
		for _, name := range held {
			d.probes = withoutObject(d.probes, name)
		}
		// Plan again without them.
	}
}

// write makes the kernel, pictured by t.kernel, match the declared state,
// in rounds of one restore each (see Apply): it reports whether a restore
// went through. An error is a failure of the Table as a whole.
func (t *Table) write(ctx context.Context, now time.Time) (wrote bool, err error) {
	d := &decision{now: now}
	if err := t.start(ctx, d); err != nil {
		return false, err
	}
	reread := false
	for range maxRounds {
		if err := ctx.Err(); err != nil {
			return wrote, err
		}
		var p *restorePlan
		if p, err = t.decide(ctx, d); err != nil {
			return wrote, err
		}
		if p.input != nil {
			err = t.restore(ctx, p.input, p.lines)
			if err == nil {
				t.kernel.apply(p.delta)
				wrote = true
			}
		}
		if err == nil {
			if len(d.probes) > 0 {
				d.probes = d.probes[:len(d.probes)-1]
				continue
			}
			t.settle(d, p.inUse)
			return wrote, nil
		}
		if ctx.Err() != nil {
			return wrote, ctx.Err()
		}
		var re *command.RestoreError
		if !errors.As(err, &re) || re.Line == 0 {
			return wrote, err // not the kernel refusing a line: the binary failed as a whole
		}
		if !reread {
			// The picture may be stale (another writer changed the
			// table since it was read): read it again and write
			// everything once more.
			t.opts.Logger.Info("restore failed; re-reading the table and writing again", "error", err)
			reread, d.probes = true, nil
			if err := t.resave(ctx, d); err != nil {
				return wrote, err
			}
			continue
		}
		name, h := p.owner(re.Line)
		if name == "" {
			// The binary blamed the transaction, not a line of an object:
			// write halves of the objects tried alone until one fails
			// alone.
			var set []string
			if len(d.probes) > 0 {
				set = d.probes[len(d.probes)-1]
				d.probes = d.probes[:len(d.probes)-1]
			}
			cands := p.objects(set, d.prog, t.builtin)
			if len(cands) == 0 {
				return wrote, err
			}
			if len(cands) > 1 {
				d.probes = append(d.probes, cands[len(cands)/2:], cands[:len(cands)/2])
				continue
			}
			name, h = cands[0], holdContent
		}
		if h <= d.holds[name] {
			return wrote, err // leaving it out would change nothing
		}
		d.holds[name] = h
		t.fail(name, h, ErrRefused, refusal(re), re, now)
		d.probes = withoutObject(d.probes, name)
	}
	return wrote, err
}

// refuseMissing leaves out the objects to plan that jump to a foreign
// chain the table did not have when it was read, as refused without a
// write (the legacy binary would name the line, but iptables-nft resolves
// jumps at COMMIT and names no object), unless they are held back already.
func (t *Table) refuseMissing(d *decision) {
	for name, target := range t.foreignJumps(d.prog, d.scope) {
		if d.holds[name] != holdNone {
			continue
		}
		if exists, known := t.kernel.exists[target]; known && !exists {
			d.holds[name] = holdContent
			t.checked(d, name, ErrRefused, "it jumps to "+target+", which the table does not have")
		}
	}
}

// foreignJumps yields each object to plan with each foreign chain its
// rules jump or go to.
func (t *Table) foreignJumps(prog map[string]bool, scope planScope) iter.Seq2[string, string] {
	return func(yield func(name, target string) bool) {
		names, hooks := scope.chains, scope.hooks
		if scope.full {
			names, hooks = sortedKeys(prog), tableChains[t.opts.Table]
		}
		each := func(name string, l *ruleList) bool {
			for _, target := range l.targets {
				if !strings.HasPrefix(target, t.opts.ChainPrefix) && !yield(name, target) {
					return false
				}
			}
			return true
		}
		for _, name := range names {
			if !each(name, &t.desired[name].ruleList) {
				return
			}
		}
		for _, name := range hooks {
			if h := t.hooks[name]; h != nil && (!each(name, &h.insert) || !each(name, &h.append)) {
				return
			}
		}
	}
}

// jumpsUnknown reports whether an object to plan jumps to a foreign chain
// whose existence the picture does not know: the jump was declared after
// the table was read, and the read cannot be trusted for it.
func (t *Table) jumpsUnknown(prog map[string]bool, scope planScope) bool {
	for _, target := range t.foreignJumps(prog, scope) {
		if _, known := t.kernel.exists[target]; !known {
			return true
		}
	}
	return false
}

// refusal describes a refused line for an ObjectError.
func refusal(re *command.RestoreError) string {
	if line := re.FailedLine(); line != "COMMIT" {
		return fmt.Sprintf("input line %d (%s): %s", re.Line, line, re.Message())
	}
	return "refused when the transaction was committed (found by writing it alone): " + re.Message()
}

// withoutObject removes name from the probe sets, and the sets left empty.
func withoutObject(probes [][]string, name string) [][]string {
	out := probes[:0]
	for _, set := range probes {
		set = slices.DeleteFunc(set, func(s string) bool { return s == name })
		if len(set) > 0 {
			out = append(out, set)
		}
	}
	return out
}

// holds returns what the next plan holds back: the objects whose retry is
// not due yet (but for those the plan checks against the picture, see
// failChecked), and those whose declaration cannot be written.
func (t *Table) holds(broken map[string]*dataplane.ObjectError) map[string]hold {
	h := make(map[string]hold, len(t.held)+len(broken))
	for name, held := range t.held {
		if held != holdNone && t.ledger.Waiting(name) {
			h[name] = held
		}
	}
	for name := range broken {
		h[name] = max(h[name], holdContent)
	}
	return h
}

// probeHolds returns holds with every object but those of set held back
// too: owned chains and our rules in built-in chains keep their kernel
// version, and unwanted chains are left alone.
func (t *Table) probeHolds(holds map[string]hold, set []string, prog map[string]bool) map[string]hold {
	in := make(map[string]bool, len(set))
	for _, name := range set {
		in[name] = true
	}
	h := maps.Clone(holds)
	for name := range t.kernel.chains {
		if !in[name] && !prog[name] && !t.builtin[name] {
			h[name] = holdAll
		}
	}
	for _, names := range []map[string]bool{prog, t.builtin} {
		for name := range names {
			if !in[name] {
				h[name] = max(h[name], holdContent)
			}
		}
	}
	return h
}

// fail records that an object was not written, for the reason given:
// held back as hold says until a retry, after a delay that doubles with
// each failure.
func (t *Table) fail(name string, h hold, reason error, detail string, cause *command.RestoreError, now time.Time) {
	var err error
	if cause != nil {
		// Keep what the binary said, not the whole input: Detail quotes
		// the refused line.
		c := *cause
		c.Input = nil
		err = restoreError(&c)
	}
	e := t.ledger.Fail(name, objectError(name, reason, detail, err))
	t.held[name] = h
	t.opts.Logger.Warn("object not written; retrying it later", "chain", name, "error", e, "retryIn", e.RetryAt.Sub(now))
}

// failChecked records that the plan held an object back for what the
// kernel picture shows: a foreign rule jumps to an unwanted chain, or a
// rule jumps to a foreign chain or matches a set that the kernel does not
// have. Such a failure holds nothing back by itself (holdNone): every full
// plan checks the picture again, so the first read that shows the cause
// gone (a resync, the retry) writes the object on that pass. Its retry
// brings that read. Checking again before the retry is due is no retry: it
// does not push the retry back (the error keeps the detail of its first
// check).
func (t *Table) failChecked(name string, reason error, detail string, now time.Time) {
	held, failed := t.held[name]
	if e, _ := t.ledger.Get(name); !failed || held != holdNone || e.Reason != reason || !t.ledger.Waiting(name) {
		t.fail(name, holdNone, reason, detail, nil, now)
	}
}

// checked records, unless d is a Plan's, that d held an object back for
// what the picture shows (see failChecked).
func (t *Table) checked(d *decision, name string, reason error, detail string) {
	if !d.dry {
		t.failChecked(name, reason, detail, d.now)
	}
}

// settle records the outcome of an Apply whose last round went through:
// the unwanted chains kept because foreign rules jump to them (inUse) are
// failures, checked again by every full plan and retried with a re-read;
// after a full plan, every other refusal that this Apply did not hold
// back is over (a narrow plan looks at no failed object: declaring one
// anew, or its retry, makes the plan full); the objects whose declaration
// cannot be written are held in the ledger (this plan looked at them), and
// those held before that no longer are are forgotten.
func (t *Table) settle(d *decision, inUse []string) {
	broken := d.broken
	for _, name := range inUse {
		t.checked(d, name, ErrChainInUse, "flushed and kept while foreign rules jump to it")
		d.holds[name] = holdDelete
	}
	for name := range t.held {
		if d.scope.full && d.holds[name] == holdNone || broken[name] != nil {
			t.forget(name)
		}
	}
	t.ledger.Retain(func(name string) bool { return !t.ledger.Held(name) || broken[name] != nil })
	for _, name := range sortedKeys(broken) {
		e := *broken[name] // an error returned before is never changed
		t.ledger.Hold(name, &e)
	}
	t.dirty = false
	t.planned(d.prog, broken, d.chainRules)
}

// retryDue reports whether a refused object is due for a retry (a held
// one has no retry: every plan looks at it).
func (t *Table) retryDue() bool {
	for name := range t.held {
		if !t.ledger.Waiting(name) {
			return true
		}
	}
	return false
}

// countObjects counts, for Stats, the objects of the last plan and those
// of them the kernel picture holds: the programmed owned chains that
// exist, and the built-in chains with declared rules of ours that hold a
// rule of ours. Without a picture (the next Apply reads) it keeps the
// last counts.
func (t *Table) countObjects() {
	if t.kernel == nil {
		return
	}
	desired, in := len(t.prog), 0
	for name := range t.prog {
		if t.kernel.chains[name] != nil {
			in++
		}
	}
	for name, h := range t.hooks {
		if len(h.insert.rules)+len(h.append.rules) == 0 {
			continue
		}
		desired++
		if c := t.kernel.chains[name]; c != nil && c.holdsOurs() {
			in++
		}
	}
	t.objects.desired, t.objects.inKernel = desired, in
}

// readResult is the outcome of a read started by Apply.
type readResult struct {
	kt  *kernelTable
	err error
}

// dropKernel forgets the kernel picture, so that the next Apply reads.
func (t *Table) dropKernel() { t.kernel = nil }

// result reports when the next recheck or retry is due.
func (t *Table) result(now time.Time) dataplane.ApplyResult {
	due := t.recheck.At()
	if after := t.ledger.RetryAfter(); after > 0 {
		if retry := t.ledger.Now().Add(after); due.IsZero() || retry.Before(due) {
			due = retry
		}
	}
	if due.IsZero() {
		return dataplane.ApplyResult{}
	}
	return dataplane.ApplyResult{RetryAfter: max(due.Sub(now), time.Millisecond)}
}

// scope returns the programmed chains, the objects whose declaration
// cannot be written, what to plan and the number of rules in the
// programmed chains. When the kernel picture is the declared state but for
// a few changed chains (synced, nothing structural changed) it plans just
// those, so a small change to a big table costs little; else it computes
// the programmed chains and plans everything.
func (t *Table) scope() (prog map[string]bool, broken map[string]*dataplane.ObjectError, scope planScope, chainRules int) {
	if t.synced && !t.structChanged && t.prog != nil && !t.planFully {
		for name := range t.changedChains {
			if t.prog[name] { // else not programmed, so not in the kernel either
				scope.chains = append(scope.chains, name)
			}
		}
		slices.Sort(scope.chains)
		for _, name := range tableChains[t.opts.Table] {
			if _, ok := t.changedHooks[name]; ok {
				scope.hooks = append(scope.hooks, name)
			}
		}
		return t.prog, t.broken, scope, t.chainRules
	}
	prog, broken = t.programmed(t.kernel)
	for name := range prog {
		chainRules += t.desired[name].len()
	}
	return prog, broken, planScope{full: true}, chainRules
}

// planned records that the kernel picture is now the declared state (but
// for the objects held back), and the programmed chain and rule counts.
func (t *Table) planned(prog map[string]bool, broken map[string]*dataplane.ObjectError, chainRules int) {
	t.synced, t.structChanged = true, false
	t.prog, t.broken, t.chainRules = prog, broken, chainRules
	if len(t.changedChains) > keepBookkeeping {
		t.changedChains = map[string]struct{}{} // clear would keep its room
	} else {
		clear(t.changedChains)
	}
	clear(t.changedHooks)
	rules := chainRules
	for _, h := range t.hooks {
		rules += h.insert.len() + h.append.len()
	}
	t.statsMu.Lock()
	t.stats.Chains, t.stats.Rules = len(prog), rules
	t.statsMu.Unlock()
}

// readParser returns the parser for one read: it reports which of the
// foreign chains our rules jump to exist. It needs the Table locked; the
// read may then run on a goroutine of its own.
func (t *Table) readParser() *saveParser {
	p := t.parser
	seen := map[string]bool{}
	add := func(l *ruleList) {
		for _, target := range l.targets {
			if !strings.HasPrefix(target, t.opts.ChainPrefix) && !seen[target] {
				seen[target] = true
				p.foreign = append(p.foreign, target)
			}
		}
	}
	for _, d := range t.desired {
		add(&d.ruleList)
	}
	for _, h := range t.hooks {
		add(&h.insert)
		add(&h.append)
	}
	return &p
}

// save runs iptables-save for the table and parses it with p.
func (t *Table) save(ctx context.Context, p *saveParser) (*kernelTable, error) {
	bin := t.opts.Backend.SaveCommand(t.opts.Family)
	start := t.opts.Clock.Now()
	out, err := t.runner.Run(ctx, nil, bin, "-t", t.opts.Table)
	elapsed := t.opts.Clock.Since(start)
	t.statsMu.Lock()
	t.stats.Saves++
	t.stats.SaveTime += elapsed
	if err != nil {
		t.stats.SaveErrors++
	}
	t.statsMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%w: %s -t %s: %w", ErrSave, bin, t.opts.Table, err)
	}
	kt, err := p.parse(bytes.NewReader(out))
	if err != nil {
		return nil, err
	}
	return kt, nil
}

// restore runs iptables-restore --noflush with input.
func (t *Table) restore(ctx context.Context, input []byte, lines int) error {
	bin := t.opts.Backend.RestoreCommand(t.opts.Family)
	args := append(t.opts.lockArgs(), "--noflush")
	start := t.opts.Clock.Now()
	out, err := t.runner.Run(ctx, bytes.NewReader(input), bin, args...)
	elapsed := t.opts.Clock.Since(start)
	t.statsMu.Lock()
	t.stats.Restores++
	t.stats.RestoreTime += elapsed
	if err != nil {
		t.stats.RestoreErrors++
	} else {
		t.stats.LinesWritten += lines
	}
	t.statsMu.Unlock()
	if err != nil {
		return newRestoreError(append([]string{bin}, args...), input, out, err)
	}
	t.opts.Logger.Debug("wrote the table", "lines", lines, "duration", elapsed)
	if t.opts.Logger.Enabled(ctx, slog.LevelDebug-4) {
		t.opts.Logger.Log(ctx, slog.LevelDebug-4, "restore input", "input", string(input))
	}
	return nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

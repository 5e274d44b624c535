package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
)

// A Table is a driver of the dataplane loop.
var _ dataplane.Driver = (*Table)(nil)

// ErrDuplicateChain reports a chain named twice in one UpdateChains call.
var ErrDuplicateChain = errors.New("iptables: chain given twice")

// Chain is the full desired content of one owned chain.
type Chain struct {
	// Name must start with the Table's ChainPrefix.
	Name string
	// Rules are the chain's rules, in order.
	Rules []Rule
	// ForceProgramming programs the chain even when no programmed rule
	// jumps to it (by default such a chain is left out of the kernel).
	ForceProgramming bool
}

// Stats counts a Table's work since New. Kernel tests use it to prove that a
// no-op Apply writes nothing.
type Stats struct {
	// Saves and SaveErrors count iptables-save runs and failed ones.
	Saves, SaveErrors int
	// FastReads counts reads done in process (see Options.Namespace)
	// and used; FastReadFallbacks counts those that could not be used
	// (an error, or a rule of ours in a built-in chain whose text the
	// Table does not know), each followed by an iptables-save.
	FastReads, FastReadFallbacks int
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

// Table keeps one iptables table of one IP version (for example the IPv4
// filter table) in the state its owner declares: the full content of the
// owned chains (those whose names carry the prefix) and our rules in the
// built-in chains. Apply writes only the difference with what the kernel
// holds, in one iptables-restore transaction, and never touches a rule or
// chain that is not ours.
//
// A Table is safe for concurrent use; Apply holds its lock while it runs
// the binaries.
type Table struct {
	opts    Options
	name    string
	parser  saveParser
	builtin map[string]bool

	mu      sync.Mutex
	desired map[string]*desiredChain
	hooks   map[string]*hookRules
	dirty   bool
	// unhashed are the lists declared since the last Apply, whose hashes
	// the next Apply computes (while iptables-save runs, when it reads).
	unhashed []unhashedList

	kernel *kernelTable // nil: read the kernel on the next Apply
	// prevKernel holds the built-in chains of the last picture dropped,
	// kept for the texts of our rules, which a fast read cannot see.
	prevKernel *kernelTable
	lastRead   time.Time
	// synced says that kernel is the declared state as of the last plan
	// (what it wrote, or found right), except for what changed since:
	// changedChains and changedHooks, or anything when structChanged
	// (jump targets, forced chains or the set of chains changed). Then
	// prog (the programmed chains) still holds and only the changed
	// chains need comparing. chainRules counts the rules of prog.
	synced        bool
	structChanged bool
	changedChains map[string]struct{}
	changedHooks  map[string]struct{}
	prog          map[string]bool
	chainRules    int
	planFully     bool // tests: never plan incrementally

	recheckAt  time.Time // zero: no recheck scheduled
	recheckIdx int

	statsMu sync.Mutex
	stats   Stats
}

// desiredChain is an owned chain rendered for writing.
type desiredChain struct {
	ruleList
	force bool
}

// hookRules are our rules in one built-in chain: the InsertOrAppendRules
// group and the AppendRules group.
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
// already carry the prefixes and writes only what differs. Until
// InsertOrAppendRules and AppendRules say otherwise, the Table wants none
// of its rules in the built-in chains, so an Apply removes those a previous
// run left there.
func New(opts Options) (*Table, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	t := &Table{
		opts:    o,
		name:    fmt.Sprintf("iptables-%s-%s-v%d", o.Backend, o.Table, uint8(o.IPVersion)),
		parser:  saveParser{table: o.Table, chainPrefix: o.ChainPrefix, hashPrefix: o.HashPrefix},
		builtin: map[string]bool{},
		desired: map[string]*desiredChain{},
		hooks:   map[string]*hookRules{},
		dirty:   true,

		changedChains: map[string]struct{}{},
		changedHooks:  map[string]struct{}{},
	}
	for _, c := range tableChains[o.Table] {
		t.builtin[c] = true
	}
	t.opts.Logger = o.Logger.With("table", t.name)
	return t, nil
}

// Name returns the Table's name for logs, such as "iptables-nft-filter-v4".
func (t *Table) Name() string { return t.name }

// Phase returns dataplane.PhaseTables.
func (t *Table) Phase() dataplane.Phase { return dataplane.PhaseTables }

// Options returns the Table's options with defaults filled in.
func (t *Table) Options() Options {
	o := t.opts
	o.PostWriteRecheck = slices.Clone(o.PostWriteRecheck)
	return o
}

// Stats returns the Table's counters.
func (t *Table) Stats() Stats {
	t.statsMu.Lock()
	defer t.statsMu.Unlock()
	return t.stats
}

// UpdateChain sets the full content of an owned chain; see UpdateChains.
func (t *Table) UpdateChain(c Chain) error { return t.UpdateChains(c) }

// UpdateChains sets the full content of owned chains, replacing what was
// declared for them before. Every name must carry the ChainPrefix and
// every rule must render for the Table's IP version; otherwise nothing
// changes and the error says which rule of which chain is wrong. The
// kernel is written by the next Apply, and only if a programmed rule jumps
// to the chain or it is forced. A chain declared with the same rules as
// before is left as it is (its rendering and hashes are kept).
func (t *Table) UpdateChains(chains ...Chain) error {
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
		if _, err := sc.renderList(c.Name, c.Rules, t.opts.IPVersion, t.builtin); err != nil {
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
		if old := t.desired[ch.name]; old == nil || old.force != ch.chain.force || !slices.Equal(old.targets, ch.chain.targets) {
			t.structChanged = true
		}
		t.changedChains[ch.name] = struct{}{}
		t.desired[ch.name] = ch.chain
		if !ch.chain.hashed {
			t.unhashed = append(t.unhashed, unhashedList{chain: ch.name, salt: saltNone, list: &ch.chain.ruleList, owner: ch.chain})
		}
		t.dirty = true
	}
	return nil
}

// RemoveChain forgets an owned chain; see RemoveChains.
func (t *Table) RemoveChain(name string) error { return t.RemoveChains(name) }

// RemoveChains forgets owned chains: the next Apply deletes them from the
// kernel (after removing the jumps to them that we own). Names not declared
// are ignored; a name without the prefix is an error and nothing changes.
// A rule that still jumps to a removed chain makes Apply fail with
// ErrUnknownChain.
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
			t.dirty, t.structChanged = true, true
		}
	}
	return nil
}

// InsertOrAppendRules sets our rules in a built-in chain of the table
// (such as FORWARD in filter), replacing those set before; nil or empty
// removes them. With InsertModeInsert they go before every foreign rule,
// with InsertModeAppend after them (but before the AppendRules rules).
// Foreign rules of the chain are never touched, wherever they are.
func (t *Table) InsertOrAppendRules(chain string, rules []Rule) error {
	return t.setHook(chain, rules, false)
}

// AppendRules sets our rules at the very end of a built-in chain, after
// every foreign rule and after the InsertOrAppendRules rules, replacing
// those set before; nil or empty removes them.
func (t *Table) AppendRules(chain string, rules []Rule) error {
	return t.setHook(chain, rules, true)
}

func (t *Table) setHook(chain string, rules []Rule, appendGroup bool) error {
	if !t.builtin[chain] {
		return fmt.Errorf("%w: %q is not one of %s's built-in chains %v", ErrNotBuiltin, chain, t.opts.Table, tableChains[t.opts.Table])
	}
	salt := saltInsert
	if appendGroup {
		salt = saltAppend
	}
	sc := getScratch()
	defer putScratch(sc)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := sc.renderList(chain, rules, t.opts.IPVersion, t.builtin); err != nil {
		return err
	}
	h := t.hooks[chain]
	if h == nil {
		h = &hookRules{}
		t.hooks[chain] = h
	}
	cur := &h.insert
	if appendGroup {
		cur = &h.append
	}
	if sc.same(0, cur) {
		return nil
	}
	l := sc.list(0)
	if !slices.Equal(cur.targets, l.targets) {
		t.structChanged = true
	}
	t.changedHooks[chain] = struct{}{}
	*cur = l
	t.unhashed = append(t.unhashed, unhashedList{chain: chain, salt: salt, list: cur})
	t.dirty = true
	return nil
}

// QueueResync makes the next Apply re-read the kernel and repair whatever
// differs, instead of trusting what the Table wrote last.
func (t *Table) QueueResync() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropKernel()
}

// checkOwned validates an owned chain name.
func (t *Table) checkOwned(name string) error {
	if err := ValidateChainName(name); err != nil {
		return err
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

// programmed returns the owned chains to program: those reachable through
// jumps from our built-in-chain rules, from forced chains and from foreign
// rules in the kernel. A jump to an undeclared owned chain or a loop is an
// error.
func (t *Table) programmed(kt *kernelTable) (map[string]bool, error) {
	const (
		unseen = iota
		onPath
		done
	)
	state := make(map[string]int, len(t.desired))
	prog := make(map[string]bool, len(t.desired))
	var roots []string
	for _, chain := range sortedKeys(t.hooks) {
		h := t.hooks[chain]
		roots = append(roots, h.insert.targets...)
		roots = append(roots, h.append.targets...)
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
	type frame struct {
		name string
		next int // index of the next target to visit
	}
	for _, root := range roots {
		if !strings.HasPrefix(root, t.opts.ChainPrefix) || state[root] == done {
			continue
		}
		if t.desired[root] == nil {
			return nil, fmt.Errorf("%w: %s", ErrUnknownChain, root)
		}
		stack := []frame{{name: root}}
		state[root] = onPath
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			d := t.desired[top.name]
			if top.next == len(d.targets) {
				state[top.name] = done
				prog[top.name] = true
				stack = stack[:len(stack)-1]
				continue
			}
			target := d.targets[top.next]
			top.next++
			if !strings.HasPrefix(target, t.opts.ChainPrefix) {
				continue // a foreign chain: the kernel checks that it exists
			}
			switch state[target] {
			case onPath:
				return nil, fmt.Errorf("%w: %s jumps back to %s", ErrChainLoop, top.name, target)
			case done:
				continue
			}
			if t.desired[target] == nil {
				return nil, fmt.Errorf("%w: %s (jumped to from %s)", ErrUnknownChain, target, top.name)
			}
			state[target] = onPath
			stack = append(stack, frame{name: target})
		}
	}
	return prog, nil
}

// Apply makes the kernel match the declared state. When nothing changed
// since the last Apply and no refresh or recheck is due it returns at once
// without running anything. Otherwise it reads the table if its picture of
// the kernel is stale (first Apply, QueueResync, refresh interval, post-write
// recheck, previous failure), computes the difference and writes it in one
// iptables-restore --noflush transaction, or runs nothing when there is
// nothing to write. A failed restore is retried after a full re-read, up to
// MaxAttempts; the last error is returned (a *RestoreError for a failed
// restore) and the next Apply starts with a re-read.
//
// When it reads, it runs iptables-save (or the in-process read, see
// Options.Namespace) in a goroutine while it hashes the rules declared
// since the last Apply, and waits for it before comparing; the read has
// always ended when Apply returns (cancelling ctx stops iptables-save
// through the Runner).
//
// RetryAfter in the result is when the next refresh or recheck is due.
func (t *Table) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.opts.Clock.Now()
	recheck := false
	if t.kernel != nil {
		if t.opts.RefreshInterval > 0 && !now.Before(t.lastRead.Add(t.opts.RefreshInterval)) {
			t.opts.Logger.Debug("refresh due: re-reading the table")
			t.dropKernel()
		}
	}
	if !t.recheckAt.IsZero() && !now.Before(t.recheckAt) {
		recheck = true
		t.dropKernel()
	}
	if t.kernel != nil && !t.dirty {
		return t.result(now), nil
	}
	if err := ctx.Err(); err != nil {
		return dataplane.ApplyResult{}, err
	}

	// Read the kernel, when needed, while hashing what was declared since
	// the last Apply; the read is joined before anything is compared, and
	// always before Apply returns.
	var reading chan readResult
	if t.kernel == nil {
		reading = make(chan readResult, 1)
		go func() { reading <- t.read(ctx, false) }()
		defer func() {
			if reading != nil {
				<-reading
			}
		}()
	}
	t.hashDeclared()

	backoff := t.opts.RetryBackoff
	var lastErr error
	for attempt := 1; attempt <= t.opts.MaxAttempts; attempt++ {
		if attempt > 1 && backoff > 0 {
			if err := t.sleep(ctx, backoff); err != nil {
				return dataplane.ApplyResult{}, err
			}
			backoff *= 2
		}
		if err := ctx.Err(); err != nil {
			return dataplane.ApplyResult{}, err
		}
		if t.kernel == nil {
			var kt *kernelTable
			var err error
			if reading != nil {
				r := <-reading
				reading = nil
				kt, err = t.finishRead(ctx, r)
			} else {
				// A re-read after a failure uses iptables-save, whose
				// texts of our rules are the kernel's own: a rule that
				// carries one of our hashes but differs from ours (copied
				// by another writer) can then still be deleted.
				kt, err = t.finishRead(ctx, t.read(ctx, true))
			}
			if err != nil {
				lastErr = err
				t.opts.Logger.Warn("reading the table failed", "attempt", attempt, "error", err)
				continue
			}
			t.kernel, t.lastRead = kt, t.opts.Clock.Now()
			t.synced = false
		}
		prog, scope, chainRules, err := t.scope()
		if err != nil {
			return dataplane.ApplyResult{}, err
		}
		input, lines, delta := t.plan(t.kernel, prog, scope)
		if input == nil {
			t.dirty = false
			t.planned(prog, chainRules)
			if recheck {
				t.advanceRecheck(t.opts.Clock.Now())
			}
			return t.result(t.opts.Clock.Now()), nil
		}
		if err := t.restore(ctx, input, lines); err != nil {
			t.dropKernel()
			lastErr = err
			t.opts.Logger.Warn("restore failed; re-reading and retrying", "attempt", attempt, "error", err)
			continue
		}
		t.kernel.apply(delta)
		t.dirty = false
		t.planned(prog, chainRules)
		wrote := t.opts.Clock.Now()
		t.recheckIdx = 0
		t.recheckAt = time.Time{}
		if len(t.opts.PostWriteRecheck) > 0 {
			t.recheckAt = wrote.Add(t.opts.PostWriteRecheck[0])
		}
		if recheck {
			t.opts.Logger.Info("repaired drift found by a post-write recheck", "lines", lines)
		}
		return t.result(wrote), nil
	}
	t.dropKernel()
	return dataplane.ApplyResult{}, lastErr
}

// readResult is the outcome of a read started by Apply. needTexts says
// that a fast read found rules of ours in built-in chains, whose texts
// finishRead must find.
type readResult struct {
	kt              *kernelTable
	fast, needTexts bool
	err             error
}

// dropKernel forgets the kernel picture, so that the next Apply reads.
// With Options.Namespace set it keeps the picture's built-in chains, whose
// texts of our rules a fast read cannot see (see knownTexts).
func (t *Table) dropKernel() {
	if t.kernel != nil && t.opts.Namespace > 0 {
		prev := &kernelTable{chains: make(map[string]*kernelChain, len(t.builtin))}
		for name := range t.builtin {
			if kc := t.kernel.chains[name]; kc != nil {
				prev.chains[name] = kc
			}
		}
		t.prevKernel = prev
	}
	t.kernel = nil
}

// advanceRecheck moves to the next post-write recheck after one found
// nothing to repair.
func (t *Table) advanceRecheck(now time.Time) {
	t.recheckIdx++
	if t.recheckIdx < len(t.opts.PostWriteRecheck) {
		t.recheckAt = now.Add(t.opts.PostWriteRecheck[t.recheckIdx])
	} else {
		t.recheckAt = time.Time{}
	}
}

// result reports when the next refresh or recheck is due.
func (t *Table) result(now time.Time) dataplane.ApplyResult {
	var due time.Time
	if t.opts.RefreshInterval > 0 {
		due = t.lastRead.Add(t.opts.RefreshInterval)
	}
	if !t.recheckAt.IsZero() && (due.IsZero() || t.recheckAt.Before(due)) {
		due = t.recheckAt
	}
	if due.IsZero() {
		return dataplane.ApplyResult{}
	}
	return dataplane.ApplyResult{RetryAfter: max(due.Sub(now), time.Millisecond)}
}

// scope returns the programmed chains, what to plan and the number of
// rules in the programmed chains. When the kernel picture is the declared
// state but for a few changed chains (synced, nothing structural changed)
// it plans just those, so a small change to a big table costs little; else
// it computes the programmed chains and plans everything.
func (t *Table) scope() (prog map[string]bool, scope planScope, chainRules int, err error) {
	if t.synced && !t.structChanged && t.prog != nil && !t.planFully {
		chainRules = t.chainRules
		for name := range t.changedChains {
			if !t.prog[name] {
				continue // not programmed, so not in the kernel either
			}
			scope.chains = append(scope.chains, name)
			if kc := t.kernel.chains[name]; kc != nil {
				chainRules += t.desired[name].len() - kc.rules()
			}
		}
		slices.Sort(scope.chains)
		for _, name := range tableChains[t.opts.Table] {
			if _, ok := t.changedHooks[name]; ok {
				scope.hooks = append(scope.hooks, name)
			}
		}
		return t.prog, scope, chainRules, nil
	}
	prog, err = t.programmed(t.kernel)
	if err != nil {
		return nil, planScope{}, 0, err
	}
	for name := range prog {
		chainRules += t.desired[name].len()
	}
	return prog, planScope{full: true}, chainRules, nil
}

// planned records that the kernel picture is now the declared state, and
// the programmed chain and rule counts.
func (t *Table) planned(prog map[string]bool, chainRules int) {
	t.synced, t.structChanged = true, false
	t.prog, t.chainRules = prog, chainRules
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

// sleep waits d on the Table's clock, or until ctx is done.
func (t *Table) sleep(ctx context.Context, d time.Duration) error {
	timer := t.opts.Clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C():
		return nil
	}
}

// read reads the table: in process when Options.Namespace is set and not
// saveOnly (falling back to iptables-save if that fails), else with
// iptables-save. It may
// run on a goroutine of its own: it touches nothing of the Table but the
// read-only options and the stats.
func (t *Table) read(ctx context.Context, saveOnly bool) readResult {
	if t.opts.Namespace > 0 && !saveOnly {
		kt, needTexts, err := t.fastReadTable(ctx)
		if err == nil {
			return readResult{kt: kt, fast: true, needTexts: needTexts}
		}
		if ctx.Err() != nil {
			return readResult{err: ctx.Err()}
		}
		t.opts.Logger.Debug("fast read failed; reading with iptables-save", "error", err)
		t.statsMu.Lock()
		t.stats.FastReadFallbacks++
		t.statsMu.Unlock()
	}
	kt, err := t.save(ctx)
	return readResult{kt: kt, err: err}
}

// finishRead completes a read with the Table locked and the declared rules
// hashed: the texts of our rules in built-in chains that a fast read found
// come from what the Table knows, and when one is unknown the table is
// read again with iptables-save.
func (t *Table) finishRead(ctx context.Context, r readResult) (*kernelTable, error) {
	if r.err != nil || !r.fast {
		return r.kt, r.err
	}
	if !r.needTexts || t.knownTexts(r.kt) {
		t.statsMu.Lock()
		t.stats.FastReads++
		t.statsMu.Unlock()
		return r.kt, nil
	}
	t.opts.Logger.Debug("fast read found a rule of ours whose text is unknown; reading with iptables-save")
	t.statsMu.Lock()
	t.stats.FastReadFallbacks++
	t.statsMu.Unlock()
	return t.save(ctx)
}

// save runs iptables-save for the table and parses it.
func (t *Table) save(ctx context.Context) (*kernelTable, error) {
	bin := t.opts.Backend.SaveCommand(t.opts.IPVersion)
	start := t.opts.Clock.Now()
	out, err := t.opts.Runner.Run(ctx, nil, bin, "-t", t.opts.Table)
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
	kt, err := t.parser.parse(bytes.NewReader(out))
	if err != nil {
		return nil, err
	}
	return kt, nil
}

// restore runs iptables-restore --noflush with input.
func (t *Table) restore(ctx context.Context, input []byte, lines int) error {
	bin := t.opts.Backend.RestoreCommand(t.opts.IPVersion)
	args := append(t.opts.lockArgs(), "--noflush")
	start := t.opts.Clock.Now()
	out, err := t.opts.Runner.Run(ctx, bytes.NewReader(input), bin, args...)
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

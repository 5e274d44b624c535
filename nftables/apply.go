package nftables

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"syscall"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
)

// maxRounds bounds the transactions one Apply sends after refusals: each
// refused round leaves out the objects the kernel named, so a few refused
// objects among thousands take a few rounds; past the bound Apply fails as
// a whole and the next Apply goes on from there.
const maxRounds = 64

// Apply makes the kernel match the declared state. When nothing changed
// since the last Apply and no recheck or retry is due it returns at once
// without a system call. Otherwise it reads the table if it has no picture
// of it (first Apply, after a failure, or when QueueResync or a recheck
// found the ruleset generation changed), computes the difference and
// writes it in one netlink transaction (set elements past
// ElementsPerTransaction in further ones, each encoded while the kernel
// processes the one before), or writes nothing when nothing differs. It
// returns once every transaction is committed or refused, or after the one
// in flight when ctx is cancelled.
//
// One object never holds back the others: when the kernel refuses a
// request, Apply leaves out the object it belongs to (a chain keeps its
// kernel rules, and is created empty if it did not exist; a set or element
// its kernel version) and writes the rest, in the same Apply. The objects
// left out, and those whose declaration cannot be written (ErrUnknownChain,
// ErrChainLoop), make Apply return a *dataplane.PartialError (errors.Is(err,
// dataplane.ErrPartial)) whose Objects are *dataplane.ObjectError (Driver
// "nftables", Kind KindChain, KindSet or KindElement, Reason ErrRefused,
// ErrUnknownChain or ErrChainLoop). A refused object is retried on its own
// backoff (see dataplane.ObjectError.RetryAt; RetryAfter asks the loop to
// come back then), or at once when it is declared anew; one whose
// declaration cannot be written is looked at again by every Apply that
// plans. A failure that belongs to no object (the socket, the read, a
// refusal the kernel does not attribute) is returned as such and the next
// Apply reads the table again; after RebuildAfter of them in a row, the
// next Apply rebuilds the table in one transaction. Plan decides as Apply
// does, without writing. A nil ctx is context.Background().
func (t *Table) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.countObjects()
	now := t.ledger.Begin()
	recheck := t.due(now)
	if t.idle() {
		return t.result(now), t.ledger.Err()
	}
	if err := ctx.Err(); err != nil {
		return dataplane.ApplyResult{}, err
	}
	s, err := t.socket()
	if err != nil {
		return dataplane.ApplyResult{}, t.wholeFailure(err)
	}
	wrote, err := t.apply(ctx, s, now)
	if err != nil {
		return dataplane.ApplyResult{}, t.wholeFailure(err)
	}
	t.wholeFailures = 0
	end := t.opts.Clock.Now()
	t.recheck.Settle(end, wrote, recheck, t.opts.Logger)
	return t.result(end), t.ledger.Err()
}

// wholeFailure records a failure of the Table as a whole: the next Apply
// reads the table again.
func (t *Table) wholeFailure(err error) error {
	t.kern, t.synced = nil, false
	t.wholeFailures++
	if !errors.Is(err, ErrRead) && !errors.Is(err, ErrWrite) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: %w", ErrWrite, err)
	}
	t.opts.Logger.Warn("apply failed", "error", err, "inARow", t.wholeFailures)
	return err
}

// due marks the kernel picture to be verified when a post-write recheck
// or the retry of a refused object is due, and reports whether a recheck
// is.
func (t *Table) due(now time.Time) (recheck bool) {
	recheck = t.recheck.Due(now)
	if recheck || t.retryDue() {
		t.verify = true
	}
	return recheck
}

// idle reports whether there is nothing to do without a system call: the
// picture is the declared state and nothing changed or is due.
func (t *Table) idle() bool { return t.kern != nil && t.synced && !t.dirty && !t.verify }

// refresh checks the ruleset generation when the picture is to be
// verified, and reads the table when the Table has no picture (or it is
// stale).
func (t *Table) refresh(s kernel.NFTablesSocket) error {
	if t.kern != nil && t.verify {
		gen, err := t.genID(s)
		if err != nil {
			t.dropSocket()
			return fmt.Errorf("%w: %w", ErrRead, err)
		}
		if !t.kern.genOK || gen != t.kern.gen {
			t.opts.Logger.Debug("ruleset changed since the table was last read", "gen", gen)
			t.kern = nil
		}
	}
	t.verify = false
	if t.kern == nil {
		k, err := t.read(s)
		if err != nil {
			t.dropSocket()
			return err
		}
		t.kern, t.synced = k, false
	}
	return nil
}

// rebuildDue reports whether the next write rebuilds the table whole.
func (t *Table) rebuildDue() bool {
	return t.opts.RebuildAfter > 0 && t.wholeFailures >= t.opts.RebuildAfter
}

// needsPlan reports whether, with a fresh picture, the table must be
// planned: something changed, the picture was just read, a rebuild or a
// retry is due.
func (t *Table) needsPlan(rebuild bool) bool {
	return t.dirty || !t.synced || rebuild || t.retryDue()
}

// apply reads the kernel when needed and writes the difference; wrote
// reports a committed transaction.
func (t *Table) apply(ctx context.Context, s kernel.NFTablesSocket, now time.Time) (wrote bool, err error) {
	if err := t.refresh(s); err != nil {
		return false, err
	}
	rebuild := t.rebuildDue()
	if !t.needsPlan(rebuild) {
		return false, nil
	}
	return t.write(ctx, s, now, rebuild)
}

// decision is what a plan is made of: the chains to program (and the
// rule counts that jump to each), the objects that cannot be written,
// whether the plan looks at everything (full) or at the chains of scope
// and the changed sets, what it holds back, and the kernel picture it
// diffs against (empty for a rebuild).
type decision struct {
	full   bool
	prog   map[string]bool
	refs   map[string]int
	broken map[string]*dataplane.ObjectError
	scope  map[string]bool
	holds  map[string]hold
	k      *kstate
}

// decide makes the decisions of a plan, for Apply's write or, dry, for
// Plan: then the Table's programmed chains are left as they are (an
// incremental update is made on copies). A full plan looks at every chain
// and set; otherwise only at what changed: the chains declared anew, those
// whose programmed status changed, or whose declaration became
// (un)writable.
func (t *Table) decide(rebuild, dry bool) decision {
	full := !t.synced || rebuild || t.retryDue() || t.prog == nil
	prog, refs, broken := t.prog, t.refs, t.broken
	var scope map[string]bool
	if !full {
		scope = make(map[string]bool, len(t.changedChains))
		for n := range t.changedChains {
			scope[n] = true
		}
	}
	switch {
	case full:
		prog, refs, broken = t.programmed()
	case t.structChanged:
		if dry {
			// reachDelta updates t.prog and t.refs in place: on copies.
			t.prog, t.refs = maps.Clone(prog), maps.Clone(refs)
		}
		flipped, ok := t.reachDelta()
		if dry {
			t.prog, t.refs, prog, refs = prog, refs, t.prog, t.refs
		}
		if ok {
			for _, n := range flipped {
				scope[n] = true
			}
			break
		}
		// What is programmed, and what cannot be written, changed in a
		// way only a walk of the whole table tells: compare.
		prog, refs, broken = t.programmed()
		for n := range prog {
			if !t.prog[n] {
				scope[n] = true
			}
		}
		for n := range t.prog {
			if !prog[n] {
				scope[n] = true
			}
		}
		for _, pair := range [][2]map[string]*dataplane.ObjectError{{broken, t.broken}, {t.broken, broken}} {
			for obj := range pair[0] {
				if pair[1][obj] == nil {
					t.replan(obj, scope)
				}
			}
		}
	}
	retryDeletes := !t.synced || t.structChanged
	if retryDeletes && scope != nil {
		for obj, h := range t.held {
			if h == holdDelete && !t.declared(obj) {
				t.replan(obj, scope)
			}
		}
	}
	k := t.kern
	if rebuild {
		k = newKstate()
	}
	return decision{full: full, prog: prog, refs: refs, broken: broken, scope: scope, holds: t.holds(broken, retryDeletes), k: k}
}

// write plans and sends rounds until one commits.
func (t *Table) write(ctx context.Context, s kernel.NFTablesSocket, now time.Time, rebuild bool) (wrote bool, err error) {
	if rebuild {
		t.opts.Logger.Warn("rebuilding the table in one transaction", "failuresInARow", t.wholeFailures)
		t.statsMu.Lock()
		t.stats.Rebuilds++
		t.statsMu.Unlock()
	}
	d := t.decide(rebuild, false)
	prog, refs, broken, holds, k := d.prog, d.refs, d.broken, d.holds, d.k
	full, scope := d.full, d.scope
	probe := map[string]bool{}
	for rounds := 0; ; {
		if err := ctx.Err(); err != nil {
			return wrote, err
		}
		p := &planner{t: t, s: s, k: k, holds: holds, probe: probe, prog: prog, full: full, scope: scope, rebuild: rebuild, now: now}
		main, chunks, err := p.plan()
		if err != nil {
			return wrote, err
		}
		if main.empty() && len(chunks) == 0 {
			t.settle(prog, refs, broken, holds, scope)
			return wrote, nil
		}
		refused, err := t.commitAll(ctx, s, p, main, chunks, holds, probe, now, func() {
			wrote = true
			if rebuild {
				t.kern = k
				rebuild = false
			}
		})
		if err != nil {
			return wrote, err
		}
		if !refused {
			t.settle(prog, refs, broken, holds, scope)
			return wrote, nil
		}
		// Plan again without what the kernel refused: the whole round
		// while the main transaction is refused, the remaining element
		// additions after it committed (each refusal holds back or probes
		// more elements).
		if !wrote {
			if rounds++; rounds == maxRounds {
				return wrote, fmt.Errorf("%w: still refused after %d transactions", ErrWrite, maxRounds)
			}
		}
	}
}

// replan puts an object in the scope of an incremental plan (one whose
// declaration became writable or stopped being so, a deletion to try
// again): a chain in scope, a set among the changed sets, an element among
// its set's changed keys.
func (t *Table) replan(obj string, scope map[string]bool) {
	if set, key, ok := elemOfObj(obj); ok {
		if d := t.sets[set]; d != nil {
			if d.changed == nil {
				d.changed = map[string]struct{}{}
			}
			d.changed[key] = struct{}{}
			t.changedSets[set] = struct{}{}
		}
		return
	}
	switch kind, name := t.objName(obj); kind {
	case KindChain:
		scope[name] = true
	case KindSet:
		t.changedSets[name] = struct{}{}
	}
}

// commitAll commits x, then a transaction for each chunk of element
// additions, in order, until one is refused (refused is true: the objects
// to leave out are in holds and probe) or fails. committed is called after
// each transaction the kernel committed.
//
// The kernel processes a transaction inside sendmsg, which runs on another
// goroutine while this one updates the kernel picture with the
// transaction before and encodes the next: the Go work of a large load
// overlaps the kernel's. One transaction is in flight at a time, and
// commitAll returns after it, with the picture updated with every
// committed transaction.
func (t *Table) commitAll(ctx context.Context, s kernel.NFTablesSocket, p *planner, x *txn, chunks [][]elemAdd, holds map[string]hold, probe map[string]bool, now time.Time, committed func()) (refused bool, err error) {
	k := p.k
	var done *txn // committed, not yet in the picture
	update := func() {
		if done != nil {
			for _, f := range done.post {
				f(k)
			}
			done = nil
		}
	}
	defer update()
	for i := 0; ; i++ {
		sent := make(chan sendResult, 1)
		if done == nil && i == len(chunks) {
			sent <- t.transmit(s, x) // nothing to do meanwhile
		} else {
			go func(x *txn) { sent <- t.transmit(s, x) }(x)
		}
		update()
		var next *txn
		if i < len(chunks) && ctx.Err() == nil {
			next = p.elemTxn(chunks[i])
		}
		r := <-sent
		if refused, err := t.conclude(x, r, k, holds, probe, now); err != nil || refused {
			return refused, err
		}
		committed()
		done = x
		if i == len(chunks) {
			return false, nil
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		x = next
	}
}

// sendResult is the outcome of transmitting a transaction.
type sendResult struct {
	// gen0 and gen1 are the ruleset generations before and after.
	gen0, gen1 uint32
	errs       []txErr
	lost       bool
	err        error
	elapsed    time.Duration
}

// transmit sends one transaction between two reads of the ruleset
// generation and collects the kernel's answers. It uses only the socket,
// the sequence numbers, the receive buffer and the stats, so that it runs
// on a goroutine of its own while the caller works on the next
// transaction.
func (t *Table) transmit(s kernel.NFTablesSocket, x *txn) (r sendResult) {
	if r.gen0, r.err = t.genID(s); r.err != nil {
		return r
	}
	start := t.opts.Clock.Now()
	r.errs, r.lost, r.err = t.send(s, x)
	r.elapsed = t.opts.Clock.Since(start)
	t.statsMu.Lock()
	t.stats.Transactions++
	t.stats.WriteTime += r.elapsed
	if r.err != nil || len(r.errs) > 0 || r.lost {
		t.stats.TransactionErrors++
	}
	t.statsMu.Unlock()
	if r.err != nil {
		return r
	}
	r.gen1, r.err = t.genID(s)
	return r
}

// conclude takes the outcome of transmitting x. When the kernel committed
// it, it records the picture's generation (the caller applies x.post to
// k); when the kernel refused objects, they are recorded in holds (or in
// probe, to be written one by one) and refused is true.
func (t *Table) conclude(x *txn, r sendResult, k *kstate, holds map[string]hold, probe map[string]bool, now time.Time) (refused bool, err error) {
	if r.err != nil {
		t.dropSocket()
		return false, fmt.Errorf("%w: %w", ErrWrite, r.err)
	}
	errs := r.errs
	if len(errs) == 0 && !r.lost {
		// The picture is of the new generation only if it was of the one
		// before (nothing changed the kernel since it was read or last
		// written) and the transaction alone moved it.
		k.gen, k.genOK = r.gen1, k.genOK && k.gen == r.gen0 && r.gen1 == r.gen0+1
		t.statsMu.Lock()
		t.stats.Messages += len(x.msgs)
		t.stats.Bytes += x.w.Len()
		t.statsMu.Unlock()
		t.opts.Logger.Debug("wrote the table", "requests", len(x.msgs), "bytes", x.w.Len(), "elements", x.elems, "duration", r.elapsed)
		return false, nil
	}
	if r.gen1 != r.gen0 && len(errs) == 0 {
		// The answers were lost but a transaction committed: ours or
		// another's. Read again.
		return false, fmt.Errorf("%w: the kernel's answers were lost (receive queue overflow)", ErrWrite)
	}
	// The kernel names the element at fault exactly. A request it refused
	// may be innocent: when the kernel finds, validating the transaction,
	// that a chain holds what its hook does not allow, it blames each
	// request it validates after, so only the first refused request of a
	// round is held back; the next round tells about the others.
	found, request := false, false
	for _, e := range errs {
		if e.msg >= 0 && e.msg < len(x.msgs) && len(x.msgs[e.msg].elems) == 0 {
			if request {
				continue
			}
			request = true
		}
		if t.blame(x, e, holds, probe, now) {
			found = true
		}
	}
	if !found {
		desc := "refused as a whole"
		if len(errs) > 0 {
			desc = fmt.Sprintf("refused (%v)", kernelErr(errs[0].errno))
		}
		return false, fmt.Errorf("%w: %s without naming a request of ours", ErrWrite, desc)
	}
	return true, nil
}

// blame finds the object a refusal belongs to and holds it back (or, for
// an element request the kernel did not point into, probes its elements
// one by one). It reports whether it changed what the next round writes.
func (t *Table) blame(x *txn, e txErr, holds map[string]hold, probe map[string]bool, now time.Time) bool {
	if e.msg < 0 || e.msg >= len(x.msgs) {
		return false
	}
	m := &x.msgs[e.msg]
	cause := kernelErr(e.errno)
	if e.text != "" {
		cause = fmt.Errorf("%w (%s)", cause, e.text)
	}
	if len(m.elems) > 0 {
		if e.offset != 0 {
			for i := len(m.elems) - 1; i >= 0; i-- {
				if m.offs[i] <= e.offset {
					return t.hold(m.elems[i].obj(), holdContent, cause, holds, now)
				}
			}
		}
		if len(m.elems) == 1 {
			return t.hold(m.elems[0].obj(), holdContent, cause, holds, now)
		}
		changed := false
		for i := range m.elems {
			if obj := m.elems[i].obj(); !probe[obj] {
				probe[obj] = true
				changed = true
			}
		}
		return changed
	}
	if m.obj == "table" || m.obj == "" {
		return false
	}
	return t.hold(m.obj, m.h, cause, holds, now)
}

// hold records that an object is held back after the kernel refused it.
func (t *Table) hold(obj string, h hold, cause error, holds map[string]hold, now time.Time) bool {
	if holds[obj] >= h {
		return false
	}
	holds[obj] = h
	what := "its change was refused"
	switch {
	case h == holdDelete && t.declared(obj):
		what = "its creation was refused"
	case h == holdDelete:
		what = "its deletion was refused"
	}
	t.fail(obj, h, ErrRefused, fmt.Sprintf("%s: %v", what, cause), cause, now)
	return true
}

// declared reports whether a chain's or set's object key names one the
// Table declares (a refused creation, not a refused deletion).
func (t *Table) declared(obj string) bool {
	switch kind, name := t.objName(obj); kind {
	case KindChain:
		return t.chains[name] != nil
	case KindSet:
		return t.sets[name] != nil
	}
	return false
}

// fail records that an object was not written: held back as h until a
// retry, after a delay that doubles with each failure.
func (t *Table) fail(obj string, h hold, reason error, detail string, cause error, now time.Time) {
	e := t.ledger.Fail(obj, t.objectError(obj, reason, detail, cause))
	t.held[obj] = h
	t.opts.Logger.Warn("object not written; retrying it later", "object", string(e.Kind)+" "+e.Name, "error", e, "retryIn", e.RetryAt.Sub(now))
}

// objectError returns the error of the object key obj.
func (t *Table) objectError(obj string, reason error, detail string, cause error) *dataplane.ObjectError {
	kind, name := t.objName(obj)
	return &dataplane.ObjectError{Driver: driverName, Kind: kind, Name: name, Reason: reason, Detail: detail, Err: cause}
}

// forget drops a refused object from the ledger: it was written,
// withdrawn or declared anew.
func (t *Table) forget(obj string) {
	t.ledger.Forget(obj)
	delete(t.held, obj)
}

// holds returns what the next plan holds back: the objects whose retry is
// not due yet (but for refused deletions when retryDeletes), and those
// whose declaration cannot be written.
func (t *Table) holds(broken map[string]*dataplane.ObjectError, retryDeletes bool) map[string]hold {
	h := make(map[string]hold, len(t.held)+len(broken))
	for obj, hd := range t.held {
		if t.ledger.Waiting(obj) && !(retryDeletes && hd == holdDelete && !t.declared(obj)) {
			h[obj] = hd
		}
	}
	for obj := range broken {
		h[obj] = max(h[obj], holdContent)
	}
	return h
}

// settle records the outcome of an Apply whose last round committed (or
// had nothing to write): every refusal this Apply did not hold back is
// over, the broken objects are held on the ledger (and those no longer
// broken forgotten), and the picture is the declared state but for the
// objects held.
func (t *Table) settle(prog map[string]bool, refs map[string]int, broken map[string]*dataplane.ObjectError, holds map[string]hold, scope map[string]bool) {
	for obj := range t.held {
		if holds[obj] == holdNone || broken[obj] != nil {
			t.forget(obj)
		}
	}
	t.ledger.Retain(func(obj string) bool { return !t.ledger.Held(obj) || broken[obj] != nil })
	for _, obj := range sortedKeys(broken) { // in order: the ledger lists them so
		t.ledger.Hold(obj, broken[obj])
	}
	t.dirty, t.synced, t.structChanged = false, true, false
	t.prog, t.refs, t.broken = prog, refs, broken
	clear(t.oldTargets)
	clear(t.rootsChanged)
	t.newMapEdges, t.needWalk = t.newMapEdges[:0], false
	clear(t.changedChains)
	clear(t.changedSets)
	for _, s := range t.sets {
		s.changed, s.all = nil, false
	}
	// Elements held back stay to look at in the next plans, which are
	// incremental.
	for _, held := range []map[string]hold{holds} {
		for obj := range held {
			if set, key, ok := elemOfObj(obj); ok {
				if s := t.sets[set]; s != nil {
					if s.changed == nil {
						s.changed = map[string]struct{}{}
					}
					s.changed[key] = struct{}{}
				}
			}
		}
	}
	// The programmed chains and their rules are counted again where the
	// plan looked: everywhere, or the chains of an incremental plan's scope.
	if scope == nil {
		clear(t.counted)
		t.progRules = 0
		for name := range prog {
			if c := t.chains[name]; c != nil {
				t.counted[name] = len(c.rules)
				t.progRules += len(c.rules)
			}
		}
	} else {
		for name := range scope {
			if n, ok := t.counted[name]; ok {
				t.progRules -= n
				delete(t.counted, name)
			}
			if c := t.chains[name]; c != nil && prog[name] {
				t.counted[name] = len(c.rules)
				t.progRules += len(c.rules)
			}
		}
	}
	elems := 0
	for _, s := range t.sets {
		elems += len(s.written())
	}
	t.statsMu.Lock()
	t.stats.Chains, t.stats.Rules, t.stats.Sets, t.stats.Elements = len(t.counted), t.progRules, len(t.sets), elems
	t.statsMu.Unlock()
}

// retryDue reports whether an object the kernel refused is due for a
// retry (the broken ones are looked at by every plan, not retried).
func (t *Table) retryDue() bool {
	for obj := range t.held {
		if !t.ledger.Waiting(obj) {
			return true
		}
	}
	return false
}

// result reports when the next recheck or retry is due.
func (t *Table) result(now time.Time) dataplane.ApplyResult {
	due := t.recheck.At()
	if after := t.ledger.RetryAfter(); after > 0 {
		if at := t.ledger.Now().Add(after); due.IsZero() || at.Before(due) {
			due = at
		}
	}
	if due.IsZero() {
		return dataplane.ApplyResult{}
	}
	return dataplane.ApplyResult{RetryAfter: max(due.Sub(now), time.Millisecond)}
}

// isNotFound reports a kernel ENOENT.
func isNotFound(err error) bool { return errors.Is(err, syscall.ENOENT) }

// Size: Apply and what it reads and writes (dumps, deletions, updates, neighbours, conntrack), in the order one Apply runs them.

package routetable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routetable/internal/delta"
)

// applyState collects the outcome of one Apply, or of one Plan.
type applyState struct {
	now time.Time
	// conntrackWait is set when routes wait for a conntrack deletion.
	conntrackWait bool
	// flush holds the addresses whose conntrack entries wait to be
	// deleted, as the pass goes: Table.pendingFlush at its start, and at
	// its end for an Apply.
	flush []netip.Addr
	// plan, when set, makes the pass a Plan: each write is appended to it
	// instead of being sent, counts as a success, and nothing of the
	// Table changes (its views, its ledger, its grace periods).
	plan *[]dataplane.Write
}

// dry reports whether the pass is a Plan.
func (st *applyState) dry() bool { return st.plan != nil }

// record lists w in a Plan's writes; an Apply ignores it (and should not
// build w: callers check dry first).
func (st *applyState) record(w dataplane.Write) {
	if st.plan != nil {
		*st.plan = append(*st.plan, w)
	}
}

// Apply writes the difference between the winners of every key and the
// kernel table: deletes of our unwanted routes (after their grace period),
// conntrack deletions for addresses whose route moves, replaces of routes
// that are missing or differ, static neighbour entries. It re-reads the
// table first on the first call, after QueueResync and after a failed
// read. It implements dataplane.Driver. A nil ctx is
// context.Background().
//
// Failures are per object. An Apply that cannot read the kernel writes
// nothing and returns an error wrapping ErrDump. Otherwise the rest is
// written whatever failed: the failed objects stay pending, each retried
// on its own backoff (from 100 ms, doubling up to 30 s; not on the passes
// in between), and the returned *dataplane.PartialError (one
// *dataplane.ObjectError per object) says what failed or still waits. A new
// declaration of a failed route (a change, a withdrawal) or its interface
// coming up ends its backoff: the next Apply writes it. RetryAfter asks
// for the next call when a retry is due or a grace period ends; it is zero
// when nothing waits (periodic resync is the caller's: a dataplane.Loop
// calls QueueResync every dataplane.Options.ResyncInterval).
func (t *Table) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now, err := t.read(ctx)
	if err != nil {
		return dataplane.ApplyResult{}, err
	}
	st := applyState{now: now, flush: t.pendingFlush}
	t.write(ctx, &st)
	t.pendingFlush = st.flush
	if err := ctx.Err(); err != nil {
		return dataplane.ApplyResult{}, fmt.Errorf("%sapply interrupted: %w", prefix, err)
	}
	t.forgetRetries(len(t.pendingFlush) > 0 || st.conntrackWait)
	return dataplane.ApplyResult{RetryAfter: t.retryAfter(now)}, t.failed.Err()
}

// read takes the queued events and reads what the next writes need: the
// table and the links on the first call, after QueueResync and after a
// failed read, else the links when stale and the routes of interfaces
// that came up. It begins the ledger's pass and returns its instant.
// Apply, Plan and State all start with it.
func (t *Table) read(ctx context.Context) (time.Time, error) {
	t.drainEvents()
	now := t.failed.Begin()
	if t.needResync {
		return now, t.resync(ctx)
	}
	if t.linksStale {
		if err := t.listLinks(ctx); err != nil {
			return now, err
		}
	}
	return now, t.rescanIfaces(ctx)
}

// write decides and makes the writes of one pass, in order: neighbour
// entries, route deletions, the conntrack entries of the host routes
// deleted (in this pass or before), route updates, neighbour deletions.
// The conntrack deletion comes before the updates so that a host route
// written where one was deleted is written in the same pass, after the
// old flows are gone. For a Plan (st.plan) it lists the writes instead.
func (t *Table) write(ctx context.Context, st *applyState) {
	t.setNeighbors(ctx, st)
	t.applyDeletions(ctx, st)
	t.flushPending(ctx, st)
	t.applyUpdates(ctx, st)
	t.deleteNeighbors(ctx, st)
}

// retryAfter is when Apply wants to run again: the earliest of the next
// attempt of a failed object and the end of a grace period; 0 for none.
func (t *Table) retryAfter(now time.Time) time.Duration {
	var next time.Duration
	consider := func(at time.Time) {
		// Past times are being handled, or wait for something else (a
		// failed route whose key a foreign route took).
		if d := at.Sub(now); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	for _, first := range t.graceSeen {
		consider(first.Add(t.opts.GracePeriod))
	}
	if d := t.failed.RetryAfter(); d > 0 && (next == 0 || d < next) {
		next = d
	}
	return next
}

// forgetRetries drops the failures of the routes and neighbour entries
// that no longer wait to be written (they were written by someone else,
// or are no longer wanted), and that of the conntrack deletion unless
// flushing (addresses wait for it).
func (t *Table) forgetRetries(flushing bool) {
	t.failed.Retain(func(k failKey) bool {
		switch k.kind {
		case failRoute:
			return pending(t.tr, k.route)
		case failNeighbor:
			return pending(t.nbrs, k.nbr)
		}
		return flushing
	})
}

// pending reports whether tr has a write of k to make.
func pending[K comparable, V any](tr *delta.Tracker[K, V], k K) bool {
	_, update := tr.PendingUpdates().Get(k)
	_, deletion := tr.PendingDeletions().Get(k)
	return update || deletion
}

// resync lists the links and re-reads the table (and, if any are in play,
// the neighbours).
func (t *Table) resync(ctx context.Context) error {
	if err := t.listLinks(ctx); err != nil {
		return err
	}
	if err := t.dumpRoutes(ctx); err != nil {
		return err
	}
	if err := t.dumpNeighbors(ctx); err != nil {
		return err
	}
	t.needResync = false
	return nil
}

// dumpRoutes replaces the dataplane view with a dump of the table. The
// common case, a dump that finds everything as recorded, costs one map
// lookup per route: only when something differs (or the dump restarted)
// is the set of dumped keys built to find the routes that went away. A
// failed dump records what it saw and removes nothing.
func (t *Table) dumpRoutes(ctx context.Context) error {
	fam, table := t.opts.Family, t.opts.Table
	clear(t.foreign)
	keys := make([]rkey, 0, t.tr.Dataplane().Len()+16)
	changed := false
	err := t.opts.Kernel.DumpRoutes(ctx, fam, table, func(r *kernel.Route) error {
		k, v, ours, ok := t.dumped(r)
		if !ok {
			return nil
		}
		if !ours {
			t.addForeign(k, v)
			return nil
		}
		keys = append(keys, k)
		if old, ok := t.tr.Dataplane().Get(k); !ok || !krouteEqual(old, v) {
			t.tr.Dataplane().Set(k, v)
			changed = true
		}
		return nil
	}, func() {
		// The kernel interrupted the dump, which starts over: what was
		// seen so far proves nothing.
		keys, changed = keys[:0], true
		clear(t.foreign)
	})
	t.stats.Resyncs++
	if err != nil {
		return fmt.Errorf("%w: %v routes of table %d: %w", ErrDump, fam, table, err)
	}
	// Every dumped route was already recorded with the same value: if
	// there were as many as recorded, none went away (the kernel never
	// holds two identical routes).
	if changed || len(keys) != t.tr.Dataplane().Len() {
		seen := make(map[rkey]struct{}, len(keys))
		for _, k := range keys {
			seen[k] = struct{}{}
		}
		var gone []rkey
		for k := range t.tr.Dataplane().All() {
			if _, ok := seen[k]; !ok {
				gone = append(gone, k)
			}
		}
		for _, k := range gone {
			t.tr.Dataplane().Delete(k)
		}
	}
	clear(t.rescan) // every interface's routes were read
	return nil
}

// blocked reports whether a foreign route holds key k, which the Table
// then does not write: one that shares the key with a route of ours (the
// kernel keeps routes of one key through different links side by side)
// does not block ours.
func (t *Table) blocked(k rkey) bool {
	if _, ok := t.foreign[k]; !ok {
		return false
	}
	_, ours := t.tr.Dataplane().Get(k)
	return !ours
}

// dumped converts a dumped route to its key and compared form, and says
// whether it is ours; ok is false for a route the Table ignores (another
// family or table, or a route with a TOS or a source prefix).
func (t *Table) dumped(r *kernel.Route) (k rkey, v kroute, ours, ok bool) {
	if r.Family != t.opts.Family || r.Table != t.opts.Table {
		return k, v, false, false
	}
	k, v, ok = t.fromKernel(r)
	if !ok {
		return k, v, false, false
	}
	return k, v, t.opts.Ownership.RouteIsOurs(r, t.ifaceName(r)), true
}

// maxRescans is the most interfaces whose routes one Apply re-reads one by
// one; past it, one read of the whole table replaces them. The kernel walks
// the whole table for each filtered read but sends only the interface's
// routes: measured (bench routetable/iface-up), a whole-table re-read
// costs 3× one interface's at 1k routes and 6× at 100k.
const maxRescans = 4

// rescanIfaces re-reads the routes through the interfaces that came up
// since the table was last read, so that Apply writes only the ones the
// kernel does not hold: routes survive a lost carrier but not an
// interface going down, and others may have added routes meanwhile.
func (t *Table) rescanIfaces(ctx context.Context) error {
	if len(t.rescan) == 0 {
		return nil
	}
	if len(t.rescan) > maxRescans {
		if err := t.dumpRoutes(ctx); err != nil {
			t.needResync = true
			return err
		}
		return nil
	}
	for idx := range t.rescan {
		if rec := t.byIndex[idx]; rec != nil && rec.up() {
			if err := t.dumpIface(ctx, idx); err != nil {
				t.needResync = true
				return err
			}
		}
		delete(t.rescan, idx)
	}
	return nil
}

// dumpIface replaces the dataplane view of the routes through interface
// idx with a dump of them. A failed dump changes nothing.
func (t *Table) dumpIface(ctx context.Context, idx int32) error {
	type seen struct {
		k    rkey
		v    kroute
		ours bool
	}
	var routes []seen
	err := t.opts.Kernel.DumpInterfaceRoutes(ctx, t.opts.Family, t.opts.Table, int(idx), func(r *kernel.Route) error {
		if k, v, ours, ok := t.dumped(r); ok && v.uses(idx) {
			routes = append(routes, seen{k: k, v: v, ours: ours})
		}
		return nil
	}, func() { routes = routes[:0] })
	t.stats.Rescans++
	if err != nil {
		return fmt.Errorf("%w: %v routes through interface %d in table %d: %w", ErrDump, t.opts.Family, idx, t.opts.Table, err)
	}
	var gone []rkey
	for k, v := range t.tr.Dataplane().All() {
		if v.uses(idx) {
			gone = append(gone, k)
		}
	}
	for _, k := range gone {
		t.tr.Dataplane().Delete(k)
	}
	for k := range t.foreign {
		t.dropForeign(k, func(v kroute) bool { return v.uses(idx) })
	}
	for _, r := range routes {
		if r.ours {
			t.tr.Dataplane().Set(r.k, r.v)
		} else {
			t.addForeign(r.k, r.v)
		}
	}
	return nil
}

// listLinks refreshes the interface table from the kernel.
func (t *Table) listLinks(ctx context.Context) error {
	links, err := t.opts.Kernel.Links(ctx)
	if err != nil {
		return fmt.Errorf("%w: links: %w", ErrDump, err)
	}
	t.refreshLinks(links)
	t.linksStale = false
	return nil
}

// dumpNeighbors re-reads the static neighbour entries that are ours: the
// permanent entries of the family that carry the Table's protocol (its
// writes mark them with it) and that it wants or wrote, or that an earlier
// run wrote for a route it no longer has (leftNeighbors), so that a
// restarted Table deletes those of targets withdrawn while it was down. An
// entry without the protocol is never ours: one the Table wants is written
// again (with the mark), any other is left alone. So is every other entry
// with its protocol: another Table's (of another routing table) or nobody's
// it knows of. It reads nothing when the Table has no entries and may own
// none.
func (t *Table) dumpNeighbors(ctx context.Context) error {
	left := t.leftNeighbors()
	if t.nbrs.Desired().Len() == 0 && t.nbrs.Dataplane().Len() == 0 && len(left) == 0 {
		return nil
	}
	ns, err := t.opts.Kernel.Neighbors(ctx, t.opts.Family, 0)
	if err != nil {
		return fmt.Errorf("%w: neighbours: %w", ErrDump, err)
	}
	known := func(k nbrKey) bool {
		if _, ok := t.nbrs.Desired().Get(k); ok {
			return true
		}
		_, ok := t.nbrs.Dataplane().Get(k)
		return ok
	}
	return t.nbrs.Dataplane().ReplaceAllIter(func(add func(nbrKey, [6]byte)) error {
		for _, n := range ns {
			k := nbrKey{ip: n.IP, oif: int32(n.LinkIndex)}
			if n.State&kernel.NUDPermanent == 0 || len(n.MAC) != 6 || n.Protocol != t.opts.Protocol {
				continue
			}
			if _, ok := left[k]; !ok && !known(k) {
				continue // another Table's, maybe
			}
			add(k, [6]byte(n.MAC))
		}
		return nil
	})
}

// leftNeighbors returns the neighbour entries an earlier run may have
// written and the Table no longer wants: those of the host routes with its
// protocol in its table (which only it writes there) that it does not want
// through the interface they leave through. A neighbour entry names no
// routing table, so that is what ties one to a Table: another Table's
// entries serve routes in another table, and a Table that still wants a
// route through the interface (with or without a destination MAC) claims
// no entry there.
func (t *Table) leftNeighbors() map[nbrKey]struct{} {
	var left map[nbrKey]struct{}
	claim := func(k rkey, v kroute) delta.IterAction {
		if !t.isHost(k) || v.proto != t.opts.Protocol || v.owner() == 0 {
			return delta.IterActionNoOp
		}
		if want, ok := t.tr.Desired().Get(k); ok && want.owner() == v.owner() {
			return delta.IterActionNoOp
		}
		if left == nil {
			left = map[nbrKey]struct{}{}
		}
		left[nbrKey{ip: t.addrOf(k), oif: v.owner()}] = struct{}{}
		return delta.IterActionNoOp
	}
	t.tr.PendingDeletions().Iter(claim)
	t.tr.PendingUpdates().Iter(func(k rkey, _ kroute) delta.IterAction {
		if v, ok := t.tr.Dataplane().Get(k); ok {
			return claim(k, v)
		}
		return delta.IterActionNoOp
	})
	return left
}

// isHost reports whether k is a host route, whose address's conntrack
// entries follow it.
func (t *Table) isHost(k rkey) bool { return int(k.bits) == t.opts.Family.Bits() }

// applyDeletions deletes our routes that nobody wants, except those in
// their grace period and those waiting for their next attempt.
func (t *Table) applyDeletions(ctx context.Context, st *applyState) {
	var dels []update
	t.tr.PendingDeletions().Iter(func(k rkey, v kroute) delta.IterAction {
		if !t.held(k, v) && !t.graced(k, v, st) && !t.waiting(k) {
			dels = append(dels, update{k: k, v: v})
		}
		return delta.IterActionNoOp
	})
	if !st.dry() {
		for k := range t.graceSeen {
			if _, pending := t.tr.PendingDeletions().Get(k); !pending {
				delete(t.graceSeen, k)
			}
		}
	}
	if len(dels) == 0 {
		return
	}
	// Routes through a gateway first: they may depend on the direct ones.
	// Then by key, so that the order is the Plan's.
	slices.SortFunc(dels, func(a, b update) int { return cmp.Or(cmp.Compare(a.v.scope, b.v.scope), compareKey(a.k, b.k)) })
	ops := make([]kernel.RouteOp, 0, min(len(dels), t.opts.BatchSize))
	for chunk := range slices.Chunk(dels, t.opts.BatchSize) {
		if ctx.Err() != nil {
			return
		}
		ops = ops[:0]
		for _, d := range chunk {
			ops = append(ops, t.deleteOp(d.k, d.v))
			if st.dry() {
				st.record(dataplane.Write{Op: dataplane.WriteDelete, Kind: kindRoute, Object: t.routeText(d.k, d.v)})
			}
		}
		errs := t.applyRoutes(ctx, st, ops)
		for i, d := range chunk {
			k, err := d.k, resultOf(errs, i)
			if err != nil && !errors.Is(err, syscall.ESRCH) {
				t.routeFailed(k, kernel.OpDelete, d.v, err)
				continue
			}
			if !st.dry() {
				t.failed.Forget(routeFail(k))
				t.tr.Dataplane().Delete(k)
			}
			if t.isHost(k) && !t.opts.NoConntrackCleanup {
				st.flush = append(st.flush, t.addrOf(k))
			}
		}
	}
}

// applyRoutes sends ops to the kernel in one batch and returns their
// results; for a Plan it sends nothing and every op succeeds.
func (t *Table) applyRoutes(ctx context.Context, st *applyState, ops []kernel.RouteOp) []error {
	if st.dry() {
		return make([]error, len(ops))
	}
	t.stats.RouteWrites += uint64(len(ops))
	return t.opts.Kernel.ApplyRoutes(ctx, ops)
}

// hold records that the route k, v could not be written for a reason that
// only a change elsewhere clears (see dataplane.Ledger.Hold); a Plan
// records nothing.
func (t *Table) hold(st *applyState, k rkey, v kroute, class, err error) {
	if !st.dry() {
		t.failed.Hold(routeFail(k), t.routeError(k, kernel.OpReplace, v, class, err))
	}
}

// waiting reports whether the route with key k failed and waits for its
// next attempt.
func (t *Table) waiting(k rkey) bool { return t.failed.Waiting(routeFail(k)) }

// routeError returns the error of the route k, v for op: class and err.
func (t *Table) routeError(k rkey, op kernel.OpKind, v kroute, class, err error) *dataplane.ObjectError {
	obj := RouteObject{Key: t.public(k), Iface: t.nameOf(v.oif)}
	return &dataplane.ObjectError{Driver: "routetable", Op: op.String(), Kind: kindRoute, Name: obj.String(), Object: obj,
		Reason: class, Err: err}
}

// held reports whether the kernel's route v for key k goes through an
// interface that is down and that k is still declared on. The kernel kept
// it (the interface lost only its carrier); it stays for when the
// interface comes back rather than being deleted and written again.
func (t *Table) held(k rkey, v kroute) bool {
	rec := t.byIndex[v.oif]
	set, declared := t.cands[k]
	if v.oif == 0 || rec == nil || rec.up() || !declared {
		return false
	}
	for i := range set.len() {
		if set.at(i).iface == rec {
			return true
		}
	}
	return false
}

// graced reports whether the unwanted route k (v in the kernel) is left in
// place for now, starting its grace period when first seen. Only routes
// someone else wrote (another protocol) on an interface with a grace
// period and without declared routes get one.
func (t *Table) graced(k rkey, v kroute, st *applyState) bool {
	if t.opts.GracePeriod <= 0 || v.proto == t.opts.Protocol {
		return false // routes with our protocol are ours for sure
	}
	oif := v.oif
	if v.hops != nil && len(*v.hops) > 0 {
		oif = (*v.hops)[0].oif
	}
	rec := t.byIndex[oif]
	if rec == nil || !t.opts.Ownership.IfaceHasGracePeriod(rec.name) {
		return false
	}
	if len(rec.classes) > 0 {
		return false // the interface's routes are known: the rest can go
	}
	first, ok := t.graceSeen[k]
	if !ok {
		if !st.dry() {
			t.graceSeen[k] = st.now
			t.opts.Logger.Debug("routetable: unexpected route, grace period starts", "table", t.Name(), "route", t.public(k),
				"iface", rec.name)
		}
		return true
	}
	return st.now.Sub(first) < t.opts.GracePeriod
}

// update is one pending route write.
type update struct {
	k rkey
	v kroute
	// moved is set for a host route whose owner changes: it waits for the
	// conntrack entries of its address to be deleted.
	moved bool
}

// applyUpdates writes the routes that are missing or differ, after the
// conntrack entries of addresses whose route moves are deleted. Routes
// whose key a foreign route holds, and routes waiting for their next
// attempt, are not written.
func (t *Table) applyUpdates(ctx context.Context, st *applyState) {
	n := t.tr.PendingUpdates().Len()
	if n == 0 {
		return
	}
	ups := make([]update, 0, n)
	var moved []netip.Addr
	var flushing map[netip.Addr]struct{}
	if len(st.flush) > 0 {
		flushing = make(map[netip.Addr]struct{}, len(st.flush))
		for _, a := range st.flush {
			flushing[a] = struct{}{}
		}
	}
	t.tr.PendingUpdates().Iter(func(k rkey, v kroute) delta.IterAction {
		if t.blocked(k) {
			t.hold(st, k, v, ErrForeignRoute, errors.New("not overwritten; delete it or give ours another metric"))
			return delta.IterActionNoOp
		}
		if t.waiting(k) {
			return delta.IterActionNoOp
		}
		if t.isHost(k) && !t.opts.NoConntrackCleanup {
			if _, waiting := flushing[t.addrOf(k)]; waiting {
				t.waitConntrack(k, v, st)
				return delta.IterActionNoOp
			}
			if old, ok := t.tr.Dataplane().Get(k); ok && old.owner() != v.owner() {
				moved = append(moved, t.addrOf(k))
				ups = append(ups, update{k: k, v: v, moved: true})
				return delta.IterActionNoOp
			}
		}
		ups = append(ups, update{k: k, v: v})
		return delta.IterActionNoOp
	})
	slices.SortFunc(moved, netip.Addr.Compare) // the Plan's order
	if len(moved) > 0 && t.deleteConntrack(ctx, st, moved) != nil {
		// Moved routes wait: their old flows must go first.
		ups = slices.DeleteFunc(ups, func(u update) bool {
			if u.moved {
				t.waitConntrack(u.k, u.v, st)
			}
			return u.moved
		})
	}
	// Direct and local routes first: routes via a gateway may need them.
	// Then by key, so that the order is the Plan's.
	slices.SortFunc(ups, func(a, b update) int { return cmp.Or(cmp.Compare(b.v.scope, a.v.scope), compareKey(a.k, b.k)) })
	ops := make([]kernel.RouteOp, 0, min(len(ups), t.opts.BatchSize))
	for chunk := range slices.Chunk(ups, t.opts.BatchSize) {
		if ctx.Err() != nil {
			return
		}
		ops = ops[:0]
		for _, u := range chunk {
			ops = append(ops, kernel.RouteOp{Kind: kernel.OpReplace, Route: t.toKernel(u.k, u.v)})
			if st.dry() {
				st.record(t.updateWrite(u.k, u.v))
			}
		}
		errs := t.applyRoutes(ctx, st, ops)
		for i, u := range chunk {
			if err := resultOf(errs, i); err != nil {
				t.routeFailed(u.k, kernel.OpReplace, u.v, err)
				continue
			}
			if !st.dry() {
				t.failed.Forget(routeFail(u.k))
				t.tr.Dataplane().Set(u.k, u.v)
			}
		}
	}
}

// waitConntrack reports the route k, v as waiting for the conntrack
// entries of its address to be deleted.
func (t *Table) waitConntrack(k rkey, v kroute, st *applyState) {
	st.conntrackWait = true
	t.hold(st, k, v, ErrConntrack, errors.New("waiting for the conntrack entries of its address to be deleted"))
}

// routeFailed records the kernel's refusal of one route write: it classifies
// the error, backs the route off and arranges the follow-up (a link
// refresh, for interface errors). A refusal says nothing against the
// Table's view of the table, which is not re-read.
func (t *Table) routeFailed(k rkey, op kernel.OpKind, v kroute, err error) {
	class := ErrRouteFailed
	switch {
	case errors.Is(err, syscall.ENODEV):
		class = ErrIfaceGone
		t.linksStale = true
	case errors.Is(err, syscall.ENETDOWN):
		class = ErrIfaceDown
		t.linksStale = true
	}
	e := t.failed.Fail(routeFail(k), t.routeError(k, op, v, class, err))
	t.opts.Logger.Warn("routetable: route write failed", "table", t.Name(), "error", e, "failures", e.Attempts,
		"retry_in", e.RetryAt.Sub(t.failed.Now()))
}

// nameOf names the interface with index oif, if known.
func (t *Table) nameOf(oif int32) string {
	if rec := t.byIndex[oif]; rec != nil && oif != 0 {
		return rec.name
	}
	return ""
}

// flushPending deletes the conntrack entries of addresses whose routes
// were deleted (st.flush), unless a failed deletion waits for its next
// attempt.
func (t *Table) flushPending(ctx context.Context, st *applyState) {
	if len(st.flush) == 0 || ctx.Err() != nil {
		return
	}
	if t.deleteConntrack(ctx, st, st.flush) == nil {
		st.flush = nil
	}
}

// deleteConntrack deletes the conntrack entries of addrs. Deletions share
// one backoff: while it runs, it fails at once with the last error. A Plan
// lists the deletion and counts it done.
func (t *Table) deleteConntrack(ctx context.Context, st *applyState, addrs []netip.Addr) error {
	if t.failed.Waiting(conntrackFail()) {
		e, _ := t.failed.Get(conntrackFail())
		return e
	}
	if st.dry() {
		st.record(conntrackWrite(addrs))
		return nil
	}
	t.stats.ConntrackDeletions++
	if _, err := t.opts.Kernel.DeleteConntrack(ctx, t.opts.Family, addrs); err != nil {
		return t.failed.Fail(conntrackFail(), &dataplane.ObjectError{Driver: "routetable", Op: "delete", Kind: kindConntrack,
			Name: fmt.Sprintf("entries of %d address(es)", len(addrs)), Reason: ErrConntrack, Err: err})
	}
	t.failed.Forget(conntrackFail())
	return nil
}

// nbrWrite is one neighbour write of a batch.
type nbrWrite struct {
	k   nbrKey
	mac [6]byte
}

// setNeighbors writes the static neighbour entries that are missing or
// differ (before the routes that use them), in one batch.
func (t *Table) setNeighbors(ctx context.Context, st *applyState) {
	t.writeNeighbors(ctx, st, kernel.OpReplace, t.nbrs.PendingUpdates().Iter)
}

// deleteNeighbors deletes the static neighbour entries no longer wanted
// (after the routes that used them), in one batch. An entry already gone,
// or whose interface is, counts as deleted.
func (t *Table) deleteNeighbors(ctx context.Context, st *applyState) {
	t.writeNeighbors(ctx, st, kernel.OpDelete, t.nbrs.PendingDeletions().Iter)
}

// writeNeighbors writes the pending neighbour entries that iter lists with
// kind, except those waiting for their next attempt.
func (t *Table) writeNeighbors(ctx context.Context, st *applyState, kind kernel.OpKind, iter func(func(nbrKey, [6]byte) delta.IterAction)) {
	if ctx.Err() != nil {
		return
	}
	var writes []nbrWrite
	iter(func(k nbrKey, mac [6]byte) delta.IterAction {
		if !t.failed.Waiting(nbrFail(k)) {
			writes = append(writes, nbrWrite{k: k, mac: mac})
		}
		return delta.IterActionNoOp
	})
	if len(writes) == 0 {
		return
	}
	slices.SortFunc(writes, func(a, b nbrWrite) int { return cmp.Or(a.k.ip.Compare(b.k.ip), cmp.Compare(a.k.oif, b.k.oif)) })
	ops := make([]kernel.NeighborOp, len(writes))
	for i, w := range writes {
		ops[i] = kernel.NeighborOp{Kind: kind, Neighbor: kernel.Neighbor{LinkIndex: int(w.k.oif), IP: w.k.ip,
			MAC: net.HardwareAddr(w.mac[:]), State: kernel.NUDPermanent, Protocol: t.opts.Protocol}}
		if st.dry() {
			st.record(t.neighborWrite(kind, w.k, w.mac))
		}
	}
	if st.dry() {
		return
	}
	errs := t.opts.Kernel.ApplyNeighbors(ctx, ops)
	t.stats.NeighborWrites += uint64(len(ops))
	for i, w := range writes {
		err := resultOf(errs, i)
		if kind == kernel.OpDelete && (errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENODEV)) {
			err = nil
		}
		if err != nil {
			e := t.failed.Fail(nbrFail(w.k), &dataplane.ObjectError{Driver: "routetable", Op: kind.String(), Kind: kindNeighbor,
				Name: fmt.Sprintf("%v dev %s", w.k.ip, t.nameOf(w.k.oif)), Reason: ErrNeighbor, Err: err})
			t.opts.Logger.Warn("routetable: neighbour write failed", "table", t.Name(), "error", e)
			if kind != kernel.OpDelete {
				t.linksStale = true
			}
			continue
		}
		t.failed.Forget(nbrFail(w.k))
		if kind == kernel.OpDelete {
			t.nbrs.Dataplane().Delete(w.k)
		} else {
			t.nbrs.Dataplane().Set(w.k, w.mac)
		}
	}
}

// resultOf returns the result of op i; a Kernel that returned too few
// results failed the rest.
func resultOf(errs []error, i int) error {
	if i < len(errs) {
		return errs[i]
	}
	return errors.New("no result from the kernel for this operation")
}

package routerule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/fib"
	"github.com/nodeplane/nodeplane/kernel"
)

// staleRetry is the RetryAfter that Apply asks for when a write showed that
// its view of the kernel was out of date (a rule to delete was already
// gone, a rule to add already there): the next Apply re-reads the kernel.
const staleRetry = time.Second

// entry is one of our rules in the kernel.
type entry struct {
	// k is the rule as the kernel holds it (fib.Stored form, as dumped).
	k kernel.Rule
	// rule is its canonical form, when ok: a rule this package can
	// express. Other rules of ours are deleted.
	rule Rule
	ok   bool
	// gone is set once the rule was deleted.
	gone bool
	// kernels says the rule is one of the kernel's own (protocol
	// kernel) at an owned priority: never ours, in the model only for
	// the list order that decides which rule a delete request hits.
	kernels bool
}

// owns reports whether a kernel rule is ours: at an owned priority, and a
// lookup of an owned table, or any other action (goto, blackhole,
// unreachable, prohibit, nop). The kernel's own rules (protocol kernel:
// lookup local, main and default) never are, whatever the priorities and
// tables owned: without them the host does not route.
func (r *Rules) owns(k *kernel.Rule) bool {
	if k.Family != r.opt.family || k.Protocol == kernel.ProtoKernel {
		return false
	}
	if _, ok := r.opt.priorities[k.Priority]; !ok {
		return false
	}
	if k.Action == kernel.RuleLookup {
		_, ok := r.opt.tables[k.Table]
		return ok
	}
	return true
}

// parse returns the canonical Rule for a kernel rule of ours, or false when
// it uses attributes or actions this package does not express (TOS, realm,
// ports, UID range, suppressors, nop, unreachable, prohibit…) or is not
// valid as a Rule. The kernel keeps host bits in a rule's prefixes (a rule
// added by hand) but matches as if they were clear: such a rule is the one
// with clear host bits.
func (r *Rules) parse(k *kernel.Rule) (Rule, bool) {
	if k.TOS != 0 || k.Realm != 0 || k.TunID != 0 || k.IPProto != 0 || k.UID.Set ||
		k.SrcPorts != (kernel.PortRange{}) || k.DstPorts != (kernel.PortRange{}) ||
		k.SuppressPrefixLen.Set || k.SuppressIfGroup.Set {
		return Rule{}, false
	}
	out := Rule{
		Priority: k.Priority, Src: k.Src.Masked(), Dst: k.Dst.Masked(), Mark: k.Mark, Mask: k.Mask,
		Invert: k.Invert, IIF: k.IIF, OIF: k.OIF,
	}
	switch k.Action {
	case kernel.RuleLookup:
		out.Action = ActionLookup{Table: k.Table}
	case kernel.RuleGoto:
		out.Action = ActionGoto{Priority: k.Goto}
	case kernel.RuleBlackhole:
		out.Action = ActionBlackhole{}
	default:
		return Rule{}, false
	}
	c, err := out.canonical(r.opt.family)
	if err != nil {
		return Rule{}, false
	}
	return c, true
}

// toKernel returns the kernel rule that a canonical rule is, in the form
// the kernel stores it (fib.Stored).
func (r *Rules) toKernel(rule Rule) kernel.Rule {
	k := kernel.Rule{
		Family: r.opt.family, Priority: rule.Priority, Src: rule.Src, Dst: rule.Dst,
		Mark: rule.Mark, Mask: rule.Mask, Invert: rule.Invert, IIF: rule.IIF, OIF: rule.OIF, Protocol: Protocol,
	}
	switch a := rule.Action.(type) {
	case ActionLookup:
		k.Action, k.Table = kernel.RuleLookup, a.Table
	case ActionGoto:
		k.Action, k.Goto = kernel.RuleGoto, a.Priority
	case ActionBlackhole:
		k.Action = kernel.RuleBlackhole
	}
	return fib.Stored(k)
}

// describe names a kernel entry for logs and errors.
func describe(e *entry) string {
	if e.ok {
		return e.rule.String()
	}
	return fmt.Sprintf("%d: %+v (attributes routerule does not manage)", e.k.Priority, e.k)
}

// applyState collects what one Apply did.
type applyState struct {
	adds, deletes, rebuilds int
	// stale is set when a write showed the model out of date (a rule to
	// delete already gone, a rule to add already there).
	stale bool
	// seen holds the writes this Apply made or held back; the backoff of
	// any other is forgotten.
	seen map[write]bool
	// plan, when set, makes the pass a Plan: each write is appended to it
	// instead of being sent and counts as a success; the pass runs on a
	// copy of the model and records no failure.
	plan *[]dataplane.Write
}

// dry reports whether the pass is a Plan.
func (st *applyState) dry() bool { return st.plan != nil }

// Apply makes the kernel's rules at the owned priorities equal to the
// desired set. It reads the kernel first on the first call, after
// QueueResync and after a failed read; then it adds the missing rules
// before deleting the unwanted ones (make before break) and replaces rules
// whose Invert or goto target changed. When nothing changed and no read is
// due it does no I/O at all. A nil ctx is context.Background().
//
// Failures are per rule. A failed read of the kernel writes nothing and
// returns the error. Otherwise a rule the kernel refuses does not stop the
// others, in its priority or another: they are written in the same Apply,
// and the refused rule is tried again on its own backoff (from 100 ms,
// doubling up to 30 s), not on the passes in between; declaring it anew or
// withdrawing it ends the backoff. The error then wraps
// dataplane.ErrPartial, so a dataplane.Loop reports the failed rules
// without backing the instance off. The result's RetryAfter asks for the
// next call when a failed rule is due for another attempt, or soon when
// the kernel changed under a write; it is zero otherwise (periodic resync
// is the caller's: a dataplane.Loop calls QueueResync every
// ResyncInterval).
func (r *Rules) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return dataplane.ApplyResult{}, fmt.Errorf("routerule: %s: %w", r.opt.name, err)
	}
	r.failed.Begin()
	if !r.resync && !r.dirty {
		return r.result(false), nil
	}
	resynced := r.resync
	if err := r.read(ctx); err != nil {
		return dataplane.ApplyResult{}, err
	}
	st := &applyState{seen: map[write]bool{}}
	r.converge(ctx, st)
	r.compact()
	if st.adds+st.deletes > 0 {
		level := slog.LevelDebug
		if resynced {
			level = slog.LevelInfo
		}
		r.opt.log.Log(ctx, level, "routerule: converged", "name", r.opt.name,
			"added", st.adds, "deleted", st.deletes, "rebuilt_priorities", st.rebuilds, "after_kernel_read", resynced)
	}
	if err := ctx.Err(); err != nil {
		r.resync = true
		return dataplane.ApplyResult{}, fmt.Errorf("routerule: %s: %w", r.opt.name, err)
	}
	r.writes += uint64(st.adds + st.deletes)
	r.failed.Retain(func(w write) bool { return st.seen[w] })
	if st.stale {
		r.resync = true
	}
	res := r.result(st.stale)
	if err := r.failed.Err(); err != nil {
		// Still dirty: the next Apply tries what is due.
		return res, err
	}
	r.dirty = false
	return res, nil
}

// result is the ApplyResult of the current Apply: the earliest retry due,
// or staleRetry when soon.
func (r *Rules) result(soon bool) dataplane.ApplyResult {
	after := r.failed.RetryAfter()
	if soon && (after == 0 || staleRetry < after) {
		after = staleRetry
	}
	return dataplane.ApplyResult{RetryAfter: after}
}

// read reads the kernel when a read is due (the first Apply, after
// QueueResync or a write that showed the model out of date); the model it
// loads must then be converged, so the instance is dirty.
func (r *Rules) read(ctx context.Context) error {
	if !r.resync {
		return nil
	}
	if err := r.load(ctx); err != nil {
		return err
	}
	r.dirty = true
	return nil
}

// load reads the kernel's rules of our family and rebuilds the model of
// our rules from it.
func (r *Rules) load(ctx context.Context) error {
	dump, err := r.opt.kernel.Rules(ctx, r.opt.family)
	if err != nil {
		return fmt.Errorf("routerule: %s: list rules: %w", r.opt.name, err)
	}
	groups := map[uint32][]*entry{}
	for i := range dump {
		k := fib.Stored(dump[i])
		if k.Family == r.opt.family && k.Protocol == kernel.ProtoKernel {
			if _, ok := r.opt.priorities[k.Priority]; ok {
				groups[k.Priority] = append(groups[k.Priority], &entry{k: k, kernels: true})
			}
			continue
		}
		if !r.owns(&k) {
			continue
		}
		e := &entry{k: k}
		e.rule, e.ok = r.parse(&k)
		groups[k.Priority] = append(groups[k.Priority], e)
	}
	r.groups = groups
	r.resync = false
	return nil
}

// converge brings every priority group to its desired rules.
func (r *Rules) converge(ctx context.Context, st *applyState) {
	want := map[uint32][]Rule{}
	for _, d := range r.desired {
		want[d.Priority] = append(want[d.Priority], d)
	}
	prios := slices.Collect(maps.Keys(want))
	for p := range r.groups {
		if _, ok := want[p]; !ok {
			prios = append(prios, p)
		}
	}
	slices.Sort(prios)
	for _, p := range prios {
		if ctx.Err() != nil {
			return
		}
		wants := want[p]
		sortRules(wants)
		r.syncGroup(ctx, p, wants, st)
	}
}

// present returns the entries of priority p that are still in the kernel.
func (r *Rules) present(p uint32) []*entry {
	var out []*entry
	for _, e := range r.groups[p] {
		if !e.gone && !e.kernels {
			out = append(out, e)
		}
	}
	return out
}

// syncGroup converges the rules of one priority. It first adds the missing
// rules that the kernel accepts next to the present ones, then deletes the
// unwanted ones, then adds the rest. When the kernel's wildcard matching
// would make a delete hit another rule of ours, or refuse an add, it
// rebuilds the group instead: every rule of ours at p is deleted in list
// order (each delete then hits exactly its rule) and the desired ones are
// added in an order the kernel accepts. A rule the kernel refuses, or that
// waits for its next attempt, is left as it is and the rest goes on; the
// group stops only when the model proved out of date.
func (r *Rules) syncGroup(ctx context.Context, p uint32, wants []Rule, st *applyState) {
	kept := map[ruleKey]bool{}
	var dels []*entry
	for _, e := range r.present(p) {
		if e.ok {
			k := e.rule.key()
			if d, ok := r.desired[k]; ok && d == e.rule && !kept[k] {
				kept[k] = true
				continue
			}
		}
		dels = append(dels, e)
	}
	var adds, later []Rule
	for _, w := range wants {
		if !kept[w.key()] && !r.waiting(r.addOf(w), st) {
			adds = append(adds, w)
		}
	}
	for _, w := range adds {
		if r.blocked(p, w) {
			later = append(later, w)
			continue
		}
		r.add(ctx, w, st)
	}
	for _, e := range dels {
		if r.waiting(deleteOf(e), st) {
			continue
		}
		if len(r.victims(p, e)) > 0 {
			r.rebuild(ctx, p, wants, st)
			return
		}
		if !r.del(ctx, e, st) {
			return
		}
	}
	for _, w := range later {
		if r.blocked(p, w) {
			r.rebuild(ctx, p, wants, st)
			return
		}
		r.add(ctx, w, st)
	}
}

// rebuild deletes every rule of ours at p, in list order, and adds wants.
// A rule that waits for its next attempt stays as it is; when the kernel's
// matching then makes the rest ambiguous, the group waits with it.
func (r *Rules) rebuild(ctx context.Context, p uint32, wants []Rule, st *applyState) {
	st.rebuilds++
	if !st.dry() {
		r.opt.log.InfoContext(ctx, "routerule: rebuilding a priority: the kernel's wildcard matching makes an in-place change ambiguous",
			"name", r.opt.name, "priority", p)
	}
	for _, e := range r.present(p) {
		if r.waiting(deleteOf(e), st) {
			continue
		}
		if len(r.victims(p, e)) > 0 {
			r.fail(deleteOf(e), &dataplane.ObjectError{Op: "delete", Name: describe(e), Reason: ErrAmbiguous,
				Detail: "an earlier rule of the same priority would be deleted instead"}, st)
			return
		}
		if !r.del(ctx, e, st) {
			return
		}
	}
	for _, w := range wants {
		if r.holds(p, w) {
			continue // its delete failed: it is still there
		}
		if r.waiting(r.addOf(w), st) {
			continue
		}
		if r.blocked(p, w) {
			r.fail(r.addOf(w), &dataplane.ObjectError{Op: "add", Name: w.String(), Reason: ErrAmbiguous,
				Detail: "the kernel would refuse it as a duplicate"}, st)
			continue
		}
		r.add(ctx, w, st)
	}
}

// holds reports whether w is one of our rules present at p.
func (r *Rules) holds(p uint32, w Rule) bool {
	return slices.ContainsFunc(r.present(p), func(e *entry) bool { return e.ok && e.rule == w })
}

// victims returns the present rules before e in its group that the
// kernel would delete instead of e: a delete request is e's rule, whose
// unset fields match anything.
func (r *Rules) victims(p uint32, e *entry) []*entry {
	var out []*entry
	for _, v := range r.groups[p] {
		if v == e {
			break
		}
		if !v.gone && fib.DeleteMatches(&e.k, &v.k) {
			out = append(out, v)
		}
	}
	return out
}

// blocked reports whether the kernel would refuse to add w because of a
// present rule at p.
func (r *Rules) blocked(p uint32, w Rule) bool {
	req := r.toKernel(w)
	for _, e := range r.groups[p] {
		if !e.gone && fib.Exists(&req, &e.k) {
			return true
		}
	}
	return false
}

// write identifies one write of a rule, for its backoff: an add of a
// desired rule, or a delete of a rule in the kernel.
type write struct {
	k   kernel.Rule
	del bool
}

// addOf is the write that adds the rule w.
func (r *Rules) addOf(w Rule) write { return write{k: r.toKernel(w)} }

// deleteOf is the write that deletes e.
func deleteOf(e *entry) write { return write{k: e.k, del: true} }

// waiting reports whether w failed and waits for its next attempt.
func (r *Rules) waiting(w write, st *applyState) bool {
	st.seen[w] = true
	return r.failed.Waiting(w)
}

// fail records the failure e of w and backs w off.
func (r *Rules) fail(w write, e *dataplane.ObjectError, st *applyState) {
	st.seen[w] = true
	if st.dry() {
		return
	}
	e.Driver, e.Kind = "routerule", kindRule
	r.failed.Fail(w, e)
	r.opt.log.Warn("routerule: rule write failed", "name", r.opt.name, "error", e, "failures", e.Attempts,
		"retry_in", e.RetryAt.Sub(r.failed.Now()))
}

// add adds w to the kernel and the model. A refusal is recorded and backs
// w off.
func (r *Rules) add(ctx context.Context, w Rule, st *applyState) {
	wr := r.addOf(w)
	if st.dry() {
		*st.plan = append(*st.plan, dataplane.Write{Op: dataplane.WriteAdd, Kind: kindRule, Object: w.String()})
		r.groups[w.Priority] = append(r.groups[w.Priority], &entry{k: wr.k, rule: w, ok: true})
		return
	}
	if err := r.opt.kernel.AddRule(ctx, wr.k); err != nil {
		if errors.Is(err, kernel.ErrExists) {
			st.stale = true // a rule added behind our back: read it
		}
		r.fail(wr, &dataplane.ObjectError{Op: "add", Name: w.String(), Reason: ErrRuleFailed, Err: err}, st)
		return
	}
	r.failed.Forget(wr)
	r.groups[w.Priority] = append(r.groups[w.Priority], &entry{k: wr.k, rule: w, ok: true})
	st.adds++
	r.opt.log.DebugContext(ctx, "routerule: added rule", "name", r.opt.name, "rule", w.String())
}

// del deletes e from the kernel, with e's rule as the request. It reports
// whether the group may go on: not when the rule was already gone (the
// model is out of date). A refusal is recorded and backs e off.
func (r *Rules) del(ctx context.Context, e *entry, st *applyState) bool {
	if st.dry() {
		*st.plan = append(*st.plan, dataplane.Write{Op: dataplane.WriteDelete, Kind: kindRule, Object: describe(e)})
		e.gone = true
		return true
	}
	err := r.opt.kernel.DeleteRule(ctx, e.k)
	switch {
	case err == nil:
		e.gone = true
		r.failed.Forget(deleteOf(e))
		st.deletes++
		r.opt.log.DebugContext(ctx, "routerule: deleted rule", "name", r.opt.name, "rule", describe(e))
		return true
	case errors.Is(err, kernel.ErrNotFound):
		// Already gone: the model is out of date. Stop this group and
		// read the kernel again soon.
		e.gone = true
		st.stale = true
		r.opt.log.InfoContext(ctx, "routerule: rule to delete was already gone; re-reading the kernel",
			"name", r.opt.name, "rule", describe(e))
		return false
	}
	r.fail(deleteOf(e), &dataplane.ObjectError{Op: "delete", Name: describe(e), Reason: ErrRuleFailed, Err: err}, st)
	return true
}

// compact drops deleted entries from the model.
func (r *Rules) compact() {
	for p, g := range r.groups {
		g = slices.DeleteFunc(g, func(e *entry) bool { return e.gone })
		if len(g) == 0 {
			delete(r.groups, p)
			continue
		}
		r.groups[p] = g
	}
}

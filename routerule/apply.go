//go:build linux

package routerule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/nlutil"
	"github.com/nodeplane/nodeplane/routerule/internal/fib"
)

// staleRetry is the RetryAfter that Apply asks for when a write showed that
// its view of the kernel was out of date (a rule to delete was already
// gone): the next Apply re-reads the kernel.
const staleRetry = time.Second

// entry is one of our rules in the kernel.
type entry struct {
	// k is the rule as the kernel holds it (action unknown for drop rules
	// read from a dump).
	k fib.Rule
	// rule is its canonical form, when ok: a rule this package can
	// express. Other rules of ours are deleted.
	rule Rule
	ok   bool
	// gone is set once the rule was deleted.
	gone bool
}

// owns reports whether a kernel rule is ours: at an owned priority, and a
// lookup of an owned table, a goto, or a rule without a table (blackhole and
// the other drop actions, which a dump does not tell apart). The kernel's
// own rules (protocol kernel: lookup local, main and default) never are,
// whatever the priorities and tables owned: without them the host does not
// route.
func (r *Rules) owns(k fib.Rule) bool {
	if k.Family != r.opt.nlFamily || k.Protocol == unix.RTPROT_KERNEL {
		return false
	}
	if _, ok := r.opt.priorities[k.Priority]; !ok {
		return false
	}
	if k.Action == fib.ActionToTable {
		_, ok := r.opt.tables[k.Table]
		return ok
	}
	return true
}

// parse returns the canonical Rule for a kernel rule of ours, or false when
// it uses attributes this package does not express (TOS, ports, UID range,
// suppressors…) or is not valid as a Rule. The kernel keeps host bits in a
// rule's prefixes (a rule added by hand) but matches as if they were
// clear: such a rule is the one with clear host bits.
func (r *Rules) parse(k fib.Rule) (Rule, bool) {
	if k.Tos != 0 || k.HasFlow || k.TunID != 0 || k.IPProto != 0 || k.UID.Set ||
		k.Sport != (fib.PortRange{}) || k.Dport != (fib.PortRange{}) ||
		k.SuppressPrefixlen != -1 || k.SuppressIfgroup != -1 {
		return Rule{}, false
	}
	out := Rule{
		Priority: k.Priority, Src: k.Src.Masked(), Dst: k.Dst.Masked(), Mark: k.Mark, Mask: k.Mask,
		Invert: k.Invert, IIF: k.IIF, OIF: k.OIF,
	}
	switch k.Action {
	case fib.ActionToTable:
		out.Action = ActionLookup{Table: k.Table}
	case fib.ActionGoto:
		out.Action = ActionGoto{Priority: k.Target}
	case fib.ActionBlackhole, fib.ActionUnknown:
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

// toNetlink returns the netlink request that adds a canonical rule.
func (r *Rules) toNetlink(rule Rule) *netlink.Rule {
	n := netlink.NewRule()
	n.Family = r.opt.nlFamily
	n.Priority = int(rule.Priority)
	if rule.Src.IsValid() {
		n.Src = &net.IPNet{IP: rule.Src.Addr().AsSlice(), Mask: net.CIDRMask(rule.Src.Bits(), rule.Src.Addr().BitLen())}
	}
	if rule.Dst.IsValid() {
		n.Dst = &net.IPNet{IP: rule.Dst.Addr().AsSlice(), Mask: net.CIDRMask(rule.Dst.Bits(), rule.Dst.Addr().BitLen())}
	}
	n.Mark = rule.Mark
	if rule.Mark != 0 || rule.Mask != 0 {
		m := rule.Mask
		n.Mask = &m
	}
	n.Invert = rule.Invert
	n.IifName, n.OifName = rule.IIF, rule.OIF
	switch a := rule.Action.(type) {
	case ActionLookup:
		n.Table = int(a.Table)
		n.Type = fib.ActionToTable
	case ActionGoto:
		n.Goto = int(a.Priority)
		n.Type = fib.ActionGoto
	case ActionBlackhole:
		n.Type = fib.ActionBlackhole
	}
	return n
}

// describe names a kernel entry for logs and errors.
func describe(e *entry) string {
	if e.ok {
		return e.rule.String()
	}
	d := e.k.Dump()
	return fmt.Sprintf("%d: %v (attributes routerule does not manage)", e.k.Priority, d)
}

// applyState collects what one Apply did.
type applyState struct {
	now                     time.Time
	adds, deletes, rebuilds int
	// failed counts the rules tried in this Apply that failed, waiting
	// those that wait for their next attempt; errs holds the first
	// maxReported of their errors.
	failed, waiting int
	errs            []error
	// stale is set when a write showed the model out of date (a rule to
	// delete already gone, a rule to add already there).
	stale bool
	// seen holds the writes this Apply made or held back; the backoff of
	// any other is forgotten.
	seen map[write]bool
}

// maxReported is how many rule errors an Apply's error keeps.
const maxReported = 16

// fail records a rule that failed in this Apply.
func (st *applyState) fail(err error) {
	st.failed++
	st.report(err)
}

// wait records a rule that failed before and waits for its next attempt.
func (st *applyState) wait(err error) {
	st.waiting++
	st.report(err)
}

func (st *applyState) report(err error) {
	if len(st.errs) < maxReported {
		st.errs = append(st.errs, err)
	}
}

// Apply makes the kernel's rules at the owned priorities equal to the
// desired set. It reads the kernel first on the first call, after QueueResync
// or a failed read, and every RefreshInterval; then it adds the missing rules
// before deleting the unwanted ones (make before break) and replaces rules
// whose Invert or goto target changed. When nothing changed and no read is
// due it does no netlink I/O at all.
//
// Failures are per rule. A failed read of the kernel writes nothing and
// returns the error. Otherwise a rule the kernel refuses does not stop the
// others, in its priority or another: they are written in the same Apply,
// and the refused rule is tried again on its own backoff (from 100 ms,
// doubling up to 30 s), not on the passes in between; declaring it anew or
// withdrawing it ends the backoff. The error then wraps
// dataplane.ErrPartial, so a dataplane.Loop reports the failed rules
// without backing the instance off. The result's RetryAfter is the time
// until the next periodic refresh (zero when it is off), or shorter when a
// failed rule is due for another attempt or the kernel changed under a
// write.
func (r *Rules) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	if ctx == nil {
		return dataplane.ApplyResult{}, errors.New("routerule: Apply with a nil context")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return dataplane.ApplyResult{}, err
	}
	now := r.opt.clk.Now()
	if r.opt.refresh > 0 && r.synced && !now.Before(r.nextRefresh) {
		r.resync = true
	}
	if !r.resync && !r.dirty {
		return r.result(now, false), nil
	}
	resynced := r.resync
	if r.resync {
		if err := r.load(ctx, now); err != nil {
			return dataplane.ApplyResult{}, err
		}
	}
	st := &applyState{now: now, seen: map[write]bool{}}
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
	for w := range r.retries {
		if !st.seen[w] {
			delete(r.retries, w)
		}
	}
	if st.stale {
		r.resync = true
	}
	res := r.result(now, st.stale)
	if st.failed+st.waiting > 0 {
		// Still dirty: the next Apply tries what is due.
		return res, fmt.Errorf("routerule: %s: %w", r.opt.name,
			&dataplane.PartialError{Failed: st.failed, Waiting: st.waiting, Errs: st.errs})
	}
	r.dirty = false
	return res, nil
}

// result is the ApplyResult of an Apply at now.
func (r *Rules) result(now time.Time, soon bool) dataplane.ApplyResult {
	var after time.Duration
	consider := func(d time.Duration) {
		if d > 0 && (after == 0 || d < after) {
			after = d
		}
	}
	if r.opt.refresh > 0 {
		consider(max(r.nextRefresh.Sub(now), time.Nanosecond))
	}
	if soon {
		consider(staleRetry)
	}
	for _, rt := range r.retries {
		consider(rt.Due.Sub(now))
	}
	return dataplane.ApplyResult{RetryAfter: after}
}

// load dumps the kernel's rules of our family and rebuilds the model of our
// rules from it.
func (r *Rules) load(ctx context.Context, now time.Time) error {
	dump, err := nlutil.RetryDump(ctx, nlutil.DefaultDumpAttempts, func() ([]netlink.Rule, error) {
		return r.opt.handle.RuleList(r.opt.nlFamily)
	})
	if err != nil {
		return fmt.Errorf("routerule: %s: list rules: %w", r.opt.name, err)
	}
	groups := map[uint32][]*entry{}
	for _, raw := range dump {
		k := fib.FromDump(raw)
		if !r.owns(k) {
			continue
		}
		e := &entry{k: k}
		e.rule, e.ok = r.parse(k)
		groups[k.Priority] = append(groups[k.Priority], e)
	}
	r.groups = groups
	r.resync = false
	r.synced = true
	r.nextRefresh = now.Add(r.opt.refresh)
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
		if !e.gone {
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
		if !kept[w.key()] && !r.waiting(addOf(r.toNetlink(w)), st) {
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
	r.opt.log.InfoContext(ctx, "routerule: rebuilding a priority: the kernel's wildcard matching makes an in-place change ambiguous",
		"name", r.opt.name, "priority", p)
	for _, e := range r.present(p) {
		if r.waiting(deleteOf(e), st) {
			continue
		}
		if len(r.victims(p, e)) > 0 {
			st.fail(fmt.Errorf("delete rule %s: an earlier rule of the same priority would be deleted instead", describe(e)))
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
		if r.waiting(addOf(r.toNetlink(w)), st) {
			continue
		}
		if r.blocked(p, w) {
			st.fail(fmt.Errorf("add rule %s: the kernel would refuse it as a duplicate", w))
			continue
		}
		r.add(ctx, w, st)
	}
}

// holds reports whether w is one of our rules present at p.
func (r *Rules) holds(p uint32, w Rule) bool {
	return slices.ContainsFunc(r.present(p), func(e *entry) bool { return e.ok && e.rule == w })
}

// deleteRequest is the kernel's view of the delete request for e, with
// action a.
func deleteRequest(e *entry, a uint8) (*netlink.Rule, fib.Rule) {
	tmpl := e.k.Dump()
	if a != fib.ActionGoto {
		tmpl.Type = a
	}
	req, err := fib.FromRequest(&tmpl, false)
	if err != nil {
		// Dump never mixes families, so this cannot happen.
		req = e.k
	}
	req.Action = a
	return &tmpl, req
}

// victims returns the present rules before e in its group that the
// kernel would delete instead of e.
func (r *Rules) victims(p uint32, e *entry) []*entry {
	_, req := deleteRequest(e, e.k.Action)
	var out []*entry
	for _, v := range r.groups[p] {
		if v == e {
			break
		}
		if !v.gone && fib.DeleteMatches(req, v.k) {
			out = append(out, v)
		}
	}
	return out
}

// blocked reports whether the kernel would refuse to add w because of a
// present rule at p.
func (r *Rules) blocked(p uint32, w Rule) bool {
	req, err := fib.FromRequest(r.toNetlink(w), true)
	if err != nil {
		return false
	}
	for _, e := range r.groups[p] {
		if !e.gone && fib.Exists(req, e.k) {
			return true
		}
	}
	return false
}

// write identifies one write of a rule, for its backoff: an add of a
// desired rule, or a delete of a rule in the kernel.
type write struct {
	k   fib.Rule
	del bool
}

// addOf is the write that adds the rule n.
func addOf(n *netlink.Rule) write {
	k, err := fib.FromRequest(n, true)
	if err != nil {
		k = fib.Rule{} // cannot happen: toNetlink never mixes families
	}
	return write{k: k}
}

// deleteOf is the write that deletes e.
func deleteOf(e *entry) write { return write{k: e.k, del: true} }

// waiting reports whether w failed and waits for its next attempt; it
// reports the last failure again.
func (r *Rules) waiting(w write, st *applyState) bool {
	st.seen[w] = true
	b, ok := r.retries[w]
	if ok && b.Waiting(st.now) {
		st.wait(b.Err)
		return true
	}
	return false
}

// failed records the kernel's refusal of w and backs it off.
func (r *Rules) failed(w write, err error, st *applyState) {
	b := r.retries[w].Failed(dataplane.Backoff{}, st.now, err)
	r.retries[w] = b
	st.fail(err)
	r.opt.log.Warn("routerule: rule write failed", "name", r.opt.name, "error", err, "failures", b.Failures,
		"retry_in", b.Due.Sub(st.now))
}

// add adds w to the kernel and the model. A refusal is recorded and backs
// w off.
func (r *Rules) add(ctx context.Context, w Rule, st *applyState) {
	n := r.toNetlink(w)
	wr := addOf(n)
	if err := r.opt.handle.RuleAdd(n); err != nil {
		if errors.Is(err, unix.EEXIST) {
			st.stale = true // a rule added behind our back: read it
		}
		r.failed(wr, fmt.Errorf("add rule %s: %w", w, err), st)
		return
	}
	delete(r.retries, wr)
	r.groups[w.Priority] = append(r.groups[w.Priority], &entry{k: wr.k, rule: w, ok: true})
	st.adds++
	r.opt.log.DebugContext(ctx, "routerule: added rule", "name", r.opt.name, "rule", w.String())
}

// del deletes e from the kernel. A drop rule read from a dump has an
// unknown action: each drop action is tried until one matches. It reports
// whether the group may go on: not when the rule was already gone (the
// model is out of date). A refusal is recorded and backs e off.
func (r *Rules) del(ctx context.Context, e *entry, st *applyState) bool {
	actions := []uint8{e.k.Action}
	if e.k.Action == fib.ActionUnknown {
		actions = fib.DropActions
	}
	for i, a := range actions {
		tmpl, _ := deleteRequest(e, a)
		err := r.opt.handle.RuleDel(tmpl)
		if err == nil {
			e.gone = true
			delete(r.retries, deleteOf(e))
			st.deletes++
			r.opt.log.DebugContext(ctx, "routerule: deleted rule", "name", r.opt.name, "rule", describe(e))
			return true
		}
		if errors.Is(err, unix.ENOENT) {
			if i < len(actions)-1 {
				continue
			}
			// Already gone: the model is out of date. Stop this group
			// and read the kernel again soon.
			e.gone = true
			st.stale = true
			r.opt.log.InfoContext(ctx, "routerule: rule to delete was already gone; re-reading the kernel",
				"name", r.opt.name, "rule", describe(e))
			return false
		}
		r.failed(deleteOf(e), fmt.Errorf("delete rule %s: %w", describe(e), err), st)
		return true
	}
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

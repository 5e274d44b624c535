package nftables

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/nftables/userdata"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/nfnl"
)

// A Table says what its next Apply would write, and what it holds.
var (
	_ dataplane.Planner = (*Table)(nil)
	_ dataplane.Stater  = (*Table)(nil)
)

// The kinds of a Plan's writes besides those of a failing object: the
// table itself, and one rule of a chain whose rules change one by one.
const (
	kindTable dataplane.ObjectKind = "table"
	kindRule  dataplane.ObjectKind = "rule"
)

// Plan implements dataplane.Planner: the writes the next Apply would make,
// in the order of its transactions, without writing. It reads the kernel
// where Apply would (the ruleset generation when QueueResync, a post-write
// recheck or a retry is due; the table when the Table has no picture of
// it, and that read then serves the next Apply) and decides with Apply's
// own planner, as if the kernel took every request: the writes are the
// table's creation ("table", also its deletion when nothing is declared or
// for a rebuild), chains ("chain": created with their rules, deleted, or
// a base chain's policy replaced), rules ("rule": each rule added, "chain
// comment", those of a new chain too, or deleted, "chain handle n"; the
// deletion of a chain takes its rules), named sets ("set": created or
// deleted; a shape change is both) and elements ("element", "set key :
// verdict"; a changed verdict is a deletion and an addition). An object waiting for its retry, or whose
// declaration cannot be written, is not written and not listed. A nil ctx
// is context.Background().
func (t *Table) Plan(ctx context.Context) (dataplane.Plan, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	plan := dataplane.Plan{Driver: t.name}
	now := t.ledger.Begin()
	t.due(now)
	if t.idle() {
		return plan, nil
	}
	if err := ctx.Err(); err != nil {
		return plan, err
	}
	s, err := t.socket()
	if err != nil {
		return plan, err
	}
	if err := t.refresh(s); err != nil {
		return plan, err
	}
	rebuild := t.rebuildDue()
	if !t.needsPlan(rebuild) {
		return plan, nil
	}
	d := t.decide(rebuild, true)
	p := &planner{t: t, s: s, k: d.k, holds: d.holds, probe: map[string]bool{}, prog: d.prog, full: d.full, scope: d.scope, rebuild: rebuild, now: now, dry: true}
	main, chunks, err := p.plan()
	if err != nil {
		return plan, err
	}
	for i := range main.msgs {
		m := &main.msgs[i]
		switch {
		case m.write == nil:
		case m.write.Kind == KindElement:
			for j := range m.elems {
				plan.Writes = append(plan.Writes, dataplane.Write{Op: m.write.Op, Kind: KindElement, Object: m.elems[j].text()})
			}
		default:
			plan.Writes = append(plan.Writes, *m.write)
		}
	}
	for _, c := range chunks {
		for j := range c {
			plan.Writes = append(plan.Writes, dataplane.Write{Op: dataplane.WriteAdd, Kind: KindElement, Object: c[j].text()})
		}
	}
	return plan, nil
}

// note records, for a dry planner, the Write of the request x began last.
func (p *planner) note(x *txn, op dataplane.WriteOp, kind dataplane.ObjectKind, obj, detail string) {
	if p.dry {
		x.msgs[len(x.msgs)-1].write = &dataplane.Write{Op: op, Kind: kind, Object: obj, Detail: detail}
	}
}

// holdBack holds an object back for the rest of the plan because what it
// uses will not be written; Apply records it as refused (a dry planner
// records nothing).
func (p *planner) holdBack(obj, detail string) {
	if !p.dry {
		p.t.fail(obj, holdContent, ErrRefused, detail, nil, p.now)
	}
	p.holds[obj] = holdContent
}

// tableText is the table as a Plan names it: "ip np".
func (p *planner) tableText() string { return familyName(p.t.opts.Family) + " " + p.t.opts.Name }

// text is the element as a Plan names it: "set key", and " : verdict" in
// a verdict map.
func (e *elemAdd) text() string {
	s := e.set + " " + e.spec.formatKey(e.key)
	if e.data != "" {
		s += " : " + verdictText(e.data)
	}
	return s
}

// verdictText is an encoded verdict as nft writes it: "accept", "jump c".
func verdictText(d string) string { return decodeVerdict(d).String() }

// chainText is a declared chain as a Plan names it: its name and, for a
// base chain, its type, hook, priority and policy.
func chainText(name string, d *chainDecl) string {
	if d.base == nil {
		return name
	}
	return baseText(name, d.base.typ, d.base.num, d.base.priority, policyCode(d.base.policy))
}

// kchainText is a kernel chain as chainText names a declared one.
func kchainText(name string, kc *kchain) string {
	if kc.hook == nil {
		return name
	}
	return baseText(name, kc.typ, kc.hook.Num, kc.hook.Priority, kc.policy)
}

func baseText(name, typ string, hook uint32, priority int32, policy uint32) string {
	return fmt.Sprintf("%s { type %s hook %s priority %d policy %s }", name, typ, hookName(hook), priority, policyName(policy))
}

// hookName is the name of a hook's kernel number.
func hookName(num uint32) string {
	switch num {
	case nfnl.HookPrerouting:
		return "prerouting"
	case nfnl.HookInput:
		return "input"
	case nfnl.HookForward:
		return "forward"
	case nfnl.HookOutput:
		return "output"
	case nfnl.HookPostrouting:
		return "postrouting"
	}
	return fmt.Sprintf("hook%d", num)
}

// policyName is the name of a policy's kernel code.
func policyName(code uint32) string {
	if code == nfnl.PolicyDrop {
		return PolicyDrop.String()
	}
	return PolicyAccept.String()
}

// ruleText is a rule's comment, which names it: the hash prefix, its hash
// and its own comments.
func ruleText(udata []byte) string {
	c, _ := userdata.GetString(udata, userdata.TypeComment)
	return c
}

// String is the set's shape as nft writes it: "type addr . inet_service
// flags interval", and " : verdict" for a verdict map.
func (sp *setSpec) String() string {
	fields := make([]string, len(sp.fields))
	for i, f := range sp.fields {
		fields[i] = f.String()
	}
	s := "type " + strings.Join(fields, " . ")
	if sp.verdict {
		s += " : verdict"
	}
	if sp.interval {
		s += " flags interval"
	}
	return s
}

// State implements dataplane.Stater: the chains (with their rules of
// ours), sets and elements the table holds in the kernel, how they differ
// from what is declared (Drift: a programmed chain missing, of another
// shape or with other rules; a chain not programmed; a set missing, of
// another shape or not declared; an element missing, unwanted or with
// another verdict), and the objects failing (the ledger's errors). It
// reads the kernel when Apply would (see Plan), else it reports the
// picture of the last Apply. It writes nothing. A nil ctx is
// context.Background().
func (t *Table) State(ctx context.Context) (dataplane.State, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st := dataplane.State{Driver: t.name}
	k, err := t.picture(ctx)
	if err != nil {
		return st, err
	}
	prog, _, _ := t.programmed()
	for name, kc := range k.chains {
		st.Owned = append(st.Owned, dataplane.Object{Kind: KindChain, Text: kchainText(name, kc)})
		for _, r := range kc.rules {
			if r.hash != "" {
				st.Owned = append(st.Owned, dataplane.Object{Kind: kindRule, Text: name + " " + t.opts.HashPrefix + r.hash})
			}
		}
		if !prog[name] {
			st.Drift = append(st.Drift, dataplane.Drift{Kind: KindChain, Name: name, Have: kchainText(name, kc)})
		}
	}
	for name := range prog {
		d, kc := t.chains[name], k.chains[name]
		want := fmt.Sprintf("%s, %d rules", chainText(name, d), len(d.rules))
		switch {
		case kc == nil:
			st.Drift = append(st.Drift, dataplane.Drift{Kind: KindChain, Name: name, Want: want})
		case kchainText(name, kc) != chainText(name, d) || !sameHashes(kc.rules, d.rules):
			have := fmt.Sprintf("%s, %d rules", kchainText(name, kc), len(kc.rules))
			if have == want {
				have += " (others)"
			}
			st.Drift = append(st.Drift, dataplane.Drift{Kind: KindChain, Name: name, Want: want, Have: have})
		}
	}
	for name := range k.sets {
		t.setState(&st, name)
	}
	for name := range t.sets {
		if k.sets[name] == nil {
			t.setState(&st, name)
		}
	}
	st.Failing = t.ledger.Errors()
	dataplane.SortState(&st)
	return st, nil
}

// picture returns the kernel picture, after reading the kernel where the
// next Apply would (see Plan). The caller holds t.mu.
func (t *Table) picture(ctx context.Context) (*kstate, error) {
	t.due(t.opts.Clock.Now())
	if t.kern != nil && !t.verify {
		return t.kern, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := t.socket()
	if err != nil {
		return nil, err
	}
	if err := t.refresh(s); err != nil {
		return nil, err
	}
	return t.kern, nil
}

// setState adds to st what the kernel picture holds of set name (the set
// and its elements) and how it differs from the declared set. The caller
// holds t.mu, and the Table has a picture.
func (t *Table) setState(st *dataplane.State, name string) {
	d, ks := t.sets[name], t.kern.sets[name]
	if ks != nil {
		st.Owned = append(st.Owned, dataplane.Object{Kind: KindSet, Text: name})
		for key, data := range ks.elems {
			st.Owned = append(st.Owned, dataplane.Object{Kind: KindElement, Text: t.elemText(name, key, data)})
		}
	}
	switch {
	case d == nil && ks == nil:
		return
	case d == nil:
		st.Drift = append(st.Drift, dataplane.Drift{Kind: KindSet, Name: name, Have: name})
		return
	case ks == nil:
		st.Drift = append(st.Drift, dataplane.Drift{Kind: KindSet, Name: name, Want: d.spec.String()})
		return
	case !d.spec.matchesKernel(&ks.nl):
		st.Drift = append(st.Drift, dataplane.Drift{Kind: KindSet, Name: name, Want: d.spec.String(), Have: "another shape"})
		return
	}
	written := d.written()
	for key, want := range written {
		if have, ok := ks.elems[key]; !ok || have != want {
			w := dataplane.Drift{Kind: KindElement, Name: name + " " + d.spec.formatKey(key), Want: t.elemText(name, key, want)}
			if ok {
				w.Have = t.elemText(name, key, have)
			}
			st.Drift = append(st.Drift, w)
		}
	}
	for key, have := range ks.elems {
		if _, ok := written[key]; !ok {
			st.Drift = append(st.Drift, dataplane.Drift{Kind: KindElement, Name: name + " " + d.spec.formatKey(key), Have: t.elemText(name, key, have)})
		}
	}
}

// sameHashes reports whether a kernel chain holds exactly the declared
// rules, in order.
func sameHashes(k []krule, d []rendered) bool {
	if len(k) != len(d) {
		return false
	}
	for i := range k {
		if k[i].hash != d[i].hash {
			return false
		}
	}
	return true
}

// elemText is an element of set as State names it: as in a Plan for a
// declared set, its key in hex for another.
func (t *Table) elemText(set, key, data string) string {
	if d := t.sets[set]; d != nil {
		return (&elemAdd{set: set, spec: &d.spec, key: key, data: data}).text()
	}
	s := fmt.Sprintf("%s %x", set, key)
	if data != "" {
		s += " : " + verdictText(data)
	}
	return s
}

package iptables

import (
	"context"
	"strings"

	"github.com/nodeplane/nodeplane/dataplane"
)

// A Table says what its next Apply would write and what it holds.
var (
	_ dataplane.Planner = (*Table)(nil)
	_ dataplane.Stater  = (*Table)(nil)
)

// Plan returns the writes of the restore transaction the next Apply would
// run, without running it: per owned chain added ("+ chain np-a (3
// rules)"), replaced whole ("~", with the rule counts) or deleted ("-"),
// and per group of our rules in a built-in chain ("rule INPUT top" for
// the InsertRules group, "rule INPUT bottom" for the AppendRules one)
// added, changed or removed (a rule of ours that no group declares any
// more counts in the top group when no foreign rule comes before it, else
// in the bottom one). It decides with Apply's own code: it reads the
// table when Apply would (the first time, after QueueResync, when a
// recheck or a retry is due; that read then serves the Apply), leaves out
// what Apply would hold back (objects waiting for their retry, those whose
// declaration cannot be written, those that jump to a foreign chain or
// match an ip set the kernel lacks) and counts the transaction a success.
// It runs no restore and records no failure. It implements
// dataplane.Planner. A nil ctx is context.Background().
func (t *Table) Plan(ctx context.Context) (dataplane.Plan, error) {
	ctx = orBackground(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	out := dataplane.Plan{Driver: t.name}
	now := t.ledger.Begin()
	work, err := t.prepare(ctx, now)
	if err != nil || !work {
		return out, err
	}
	d := &decision{now: now, dry: true}
	if err := t.start(ctx, d); err != nil {
		return dataplane.Plan{}, err
	}
	p, err := t.decide(ctx, d)
	if err != nil {
		return dataplane.Plan{}, err
	}
	out.Writes = p.writes()
	return out, nil
}

// State returns the objects of the Table the kernel holds (its owned
// chains, kind "chain", and the groups of our rules in built-in chains,
// kind "rule", named as in Plan), every difference between them and the
// declared state (also those the next Apply leaves for later: an object
// waiting for its retry or whose declaration cannot be written), and the
// failing objects. It reads the table when Plan would, else reports the
// picture of the last read and writes. It writes nothing. It implements
// dataplane.Stater. A nil ctx is context.Background().
func (t *Table) State(ctx context.Context) (dataplane.State, error) {
	ctx = orBackground(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.prepare(ctx, t.ledger.Begin()); err != nil {
		return dataplane.State{}, err
	}
	s := dataplane.State{Driver: t.name, Failing: t.ledger.Errors()}
	kt := t.kernel
	for name, kc := range kt.chains {
		switch {
		case strings.HasPrefix(name, t.opts.ChainPrefix):
			s.Owned = append(s.Owned, dataplane.Object{Kind: kindChain, Text: name})
		case t.builtin[name] && kc.holdsOurs():
			var front, back ruleList
			if h := t.hooks[name]; h != nil {
				front, back = h.insert, h.append
			}
			var in [2]bool
			for _, g := range ourGroups(kc, hashIndex(&front), hashIndex(&back)) {
				if g >= 0 {
					in[g] = true
				}
			}
			for g, ok := range in {
				if ok {
					s.Owned = append(s.Owned, dataplane.Object{Kind: kindRule, Text: name + groupNames[g]})
				}
			}
		}
	}
	prog, _ := t.programmed(kt)
	s.Drift = t.plan(kt, prog, planScope{full: true}, nil, true).drift()
	dataplane.SortState(&s)
	return s, nil
}

// hashIndex returns the position of each rule of l by its hash.
func hashIndex(l *ruleList) map[string]int {
	m := make(map[string]int, l.len())
	for i := range l.len() {
		m[l.hash(i)] = i
	}
	return m
}

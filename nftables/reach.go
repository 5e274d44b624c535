package nftables

import (
	"fmt"
	"slices"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/nfcore"
)

// What is programmed: a regular chain is programmed while a programmed
// chain's rule jumps or goes to it, a verdict-map element jumps or goes
// to it, or it is forced; base chains always are. A full walk
// (programmed, on nfcore.Reach) computes it from the declarations; between two plans, reachDelta updates the last
// plan's result with what changed since, in time proportional to the
// change, keeping for each chain the count of rules of programmed chains
// that jump to it (refs). Both find the same chains, and reachDelta gives
// up (the plan walks the whole table) wherever the two could differ:
// objects that cannot be written, before or after.

// mapEdge is a verdict map whose elements started jumping to a chain: the
// chains that dispatch through the map now jump to it.
type mapEdge struct{ set, chain string }

// ruleTargets returns the chains a declared chain's rules jump or go to
// (nil for no chain).
func ruleTargets(d *chainDecl) []string {
	if d == nil {
		return nil
	}
	var out []string
	for i := range d.rules {
		if tg := d.rules[i].target; tg != "" {
			out = append(out, tg)
		}
	}
	return out
}

// regular reports whether name is a declared regular chain.
func (t *Table) regular(name string) bool {
	c := t.chains[name]
	return c != nil && c.base == nil
}

// isRoot reports whether a declared chain is programmed whatever jumps to
// it: a base chain, a forced chain, one a verdict-map element jumps to.
func (t *Table) isRoot(name string) bool {
	c := t.chains[name]
	return c != nil && (c.base != nil || c.force || t.vmapTargets[name] > 0)
}

// declChanging records, before a chain's declaration changes, the targets
// it had as of the last plan (the first change since counts).
func (t *Table) declChanging(name string) {
	if _, ok := t.oldTargets[name]; !ok {
		t.oldTargets[name] = ruleTargets(t.chains[name])
	}
	t.structChanged = true
}

// programmed returns the chains to program — the base chains, the chains
// reached from them through jumps and verdict maps, the forced chains and
// those verdict-map elements jump to — with the count of rules of
// programmed chains that jump to each chain, and the objects whose
// declaration cannot be written: a chain with a jump to a chain not
// declared (ErrUnknownChain) or whose jump closes a loop (ErrChainLoop),
// and a verdict-map element that jumps to a chain not declared. Such a
// chain is still programmed (it keeps its kernel content). The walk is
// nfcore.Reach, the one both netfilter backends decide with; its roots
// are the base and forced chains, then the chains verdict maps jump to.
func (t *Table) programmed() (map[string]bool, map[string]int, map[string]*dataplane.ObjectError) {
	refs := make(map[string]int, len(t.chains))
	broken := map[string]*dataplane.ObjectError{}
	breaks := func(obj string, reason error, format string, a ...any) {
		if broken[obj] == nil {
			broken[obj] = t.objectError(obj, reason, fmt.Sprintf(format, a...), nil)
		}
	}
	for name, targets := range t.mapTargets {
		if len(targets) == 0 {
			continue
		}
		for k, d := range t.sets[name].written() {
			if c := verdictChain(d); c != "" && !t.regular(c) {
				breaks(objElem(name, k), ErrUnknownChain, "it jumps to %s, which the table does not declare", c)
			}
		}
	}
	var roots []string
	for _, name := range sortedKeys(t.chains) {
		if c := t.chains[name]; c.base != nil || c.force {
			roots = append(roots, name)
		}
	}
	for _, name := range sortedKeys(t.vmapTargets) {
		if t.regular(name) && !t.chains[name].force {
			roots = append(roots, name)
		}
	}
	g := nfcore.Graph{
		// A rule's target, or the declared chains of the verdict map it
		// dispatches through (an element jumping to a chain not declared
		// is broken above, not followed).
		Targets: func(dst []string, name string) []string {
			c := t.chains[name]
			for i := range c.rules {
				if r := &c.rules[i]; r.target != "" {
					dst = append(dst, r.target)
				} else if r.vmap != "" {
					dst = slices.Grow(dst, len(t.mapTargets[r.vmap]))
					for _, target := range sortedKeys(t.mapTargets[r.vmap]) {
						if t.regular(target) {
							dst = append(dst, target)
						}
					}
				}
			}
			return dst
		},
		Declared: t.regular,
		Size:     len(t.chains),
		// refs counts the rules of programmed chains that jump to each.
		Visit: func(name string) {
			c := t.chains[name]
			for i := range c.rules {
				if tg := c.rules[i].target; tg != "" {
					refs[tg]++
				}
			}
		},
	}
	prog := nfcore.Reach(g, roots, func(b nfcore.Break) {
		if b.Reason == nfcore.BreakLoop {
			breaks(objChain(b.Chain), ErrChainLoop, "its jump to %s closes a loop", b.Target)
		} else {
			breaks(objChain(b.Chain), ErrUnknownChain, "it jumps to %s, which the table does not declare", b.Target)
		}
	})
	return prog, refs, broken
}

// reachJournal records reachDelta's changes to prog and refs, to undo them
// when it gives up.
type reachJournal struct {
	t       *Table
	entries []reachEntry
}

type reachEntry struct {
	name string
	prog bool // a change of prog (else of refs)
	was  int
}

func (j *reachJournal) setProg(name string, v bool) {
	was := 0
	if j.t.prog[name] {
		was = 1
	}
	j.entries = append(j.entries, reachEntry{name: name, prog: true, was: was})
	if v {
		j.t.prog[name] = true
	} else {
		delete(j.t.prog, name)
	}
}

func (j *reachJournal) ref(name string, delta int) {
	j.entries = append(j.entries, reachEntry{name: name, was: j.t.refs[name]})
	if n := j.t.refs[name] + delta; n != 0 {
		j.t.refs[name] = n
	} else {
		delete(j.t.refs, name)
	}
}

func (j *reachJournal) undo() {
	for i := len(j.entries) - 1; i >= 0; i-- {
		e := j.entries[i]
		switch {
		case e.prog && e.was == 1:
			j.t.prog[e.name] = true
		case e.prog:
			delete(j.t.prog, e.name)
		case e.was != 0:
			j.t.refs[e.name] = e.was
		default:
			delete(j.t.refs, e.name)
		}
	}
}

// flipped returns the chains whose programmed status the journal changed.
func (j *reachJournal) flipped() []string {
	first := map[string]bool{}
	for _, e := range j.entries {
		if _, seen := first[e.name]; e.prog && !seen {
			first[e.name] = e.was == 1
		}
	}
	var out []string
	for name, was := range first {
		if j.t.prog[name] != was {
			out = append(out, name)
		}
	}
	return out
}

// reachDelta updates the programmed chains of the last plan (t.prog, and
// t.refs) with the changes declared since, and returns the chains whose
// programmed status changed. ok is false, and nothing is changed, when it
// cannot tell (no plan before, objects that could not be written before
// or would not be now: a jump to a chain not declared, a loop) and the
// whole table must be walked.
func (t *Table) reachDelta() (flipped []string, ok bool) {
	if t.needWalk || t.prog == nil || t.refs == nil || len(t.broken) > 0 {
		return nil, false
	}
	j := &reachJournal{t: t}
	defer func() {
		if !ok {
			j.undo()
		}
	}()
	cand := make([]string, 0, 2*len(t.oldTargets)+len(t.rootsChanged))
	for _, name := range sortedKeys(t.oldTargets) {
		if t.prog[name] {
			for _, tg := range t.oldTargets[name] {
				j.ref(tg, -1)
				cand = append(cand, tg)
			}
			j.setProg(name, false)
		}
		cand = append(cand, name)
	}
	cand = append(cand, sortedKeys(t.rootsChanged)...)
	onPath := map[string]bool{}
	var activate func(name string) bool
	activate = func(name string) bool {
		j.setProg(name, true)
		onPath[name] = true
		c := t.chains[name]
		for i := range c.rules {
			r := &c.rules[i]
			var targets []string
			switch {
			case r.target != "":
				if !t.regular(r.target) {
					return false
				}
				j.ref(r.target, 1)
				targets = []string{r.target}
			case r.vmap != "":
				targets = sortedKeys(t.mapTargets[r.vmap])
			}
			for _, tg := range targets {
				switch {
				case onPath[tg] || !t.regular(tg):
					return false
				case !t.prog[tg] && r.target != "":
					if !activate(tg) {
						return false
					}
				case t.reaches(tg, func(x string) bool { return x == name }):
					return false // a loop through chains programmed before
				}
			}
		}
		delete(onPath, name)
		return true
	}
	for _, name := range cand {
		if t.chains[name] != nil && !t.prog[name] && (t.isRoot(name) || t.refs[name] > 0) {
			if !activate(name) {
				return nil, false
			}
		}
	}
	// A map that jumps to one more chain makes the chains dispatching
	// through it jump there: a loop if that chain leads back to one.
	for _, e := range t.newMapEdges {
		if t.mapTargets[e.set][e.chain] == 0 || !t.prog[e.chain] {
			continue
		}
		if t.reaches(e.chain, func(x string) bool { return t.prog[x] && usesMap(t.chains[x], e.set) }) {
			return nil, false
		}
	}
	for len(cand) > 0 {
		name := cand[len(cand)-1]
		cand = cand[:len(cand)-1]
		if !t.prog[name] || t.isRoot(name) || t.refs[name] > 0 {
			continue
		}
		j.setProg(name, false)
		for _, tg := range ruleTargets(t.chains[name]) {
			j.ref(tg, -1)
			cand = append(cand, tg)
		}
	}
	// A programmed rule still jumping to a chain no longer declared cannot
	// be written.
	for name := range t.oldTargets {
		if t.refs[name] > 0 && !t.regular(name) {
			return nil, false
		}
	}
	return j.flipped(), true
}

// usesMap reports whether a chain's rules dispatch through verdict map set.
func usesMap(c *chainDecl, set string) bool {
	return c != nil && slices.ContainsFunc(c.rules, func(r rendered) bool { return r.vmap == set })
}

// reaches reports whether a programmed chain from which is, or leads to, a
// chain for which match holds, through the rules' jumps and the verdict
// maps they dispatch through.
func (t *Table) reaches(from string, match func(string) bool) bool {
	seen := map[string]bool{}
	stack := []string{from}
	for len(stack) > 0 {
		name := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[name] {
			continue
		}
		seen[name] = true
		if match(name) {
			return true
		}
		c := t.chains[name]
		if c == nil || !t.prog[name] {
			continue
		}
		for i := range c.rules {
			r := &c.rules[i]
			if r.target != "" {
				stack = append(stack, r.target)
			} else if r.vmap != "" {
				for tg := range t.mapTargets[r.vmap] {
					stack = append(stack, tg)
				}
			}
		}
	}
	return false
}

package iptables

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// What declaring costs: each rule is rendered once, straight into the
// restore-input text kept for its chain (one string per chain, not per
// rule). Declaring a chain again with the same rules renders and compares
// it, and changes nothing: no allocation, no hashing, nothing for Apply to
// do. Hashes are computed by Apply, while its iptables-save runs (in a
// goroutine that Apply always waits for). Between reads, when only some
// chains or built-in-chain groups changed and no jump target, forced
// chain or chain set did, Apply compares and writes just those, so
// changing one rule of a big table costs little more than the one restore
// line.

// ruleList is a list of rules rendered for writing: an owned chain, or one
// group of our rules in a built-in chain.
type ruleList struct {
	// text is the rendered rules, concatenated; every rules[i].body is a
	// substring of it, so a list holds one string however many rules it
	// has.
	text  string
	rules []renderedRule
	// targets are the chains the rules jump to, sorted, without
	// duplicates.
	targets []string
	// sets are the ip sets the rules match, sorted, without duplicates.
	sets []string
	// hashes holds HashLength bytes per rule once hashed is set. Hashing
	// waits for Apply, which does it while iptables-save runs.
	hashes string
	hashed bool
}

func (l *ruleList) len() int          { return len(l.rules) }
func (l *ruleList) hash(i int) string { return l.hashes[i*HashLength : (i+1)*HashLength] }

// ensureHashed computes the list's hashes for chain and salt, unless
// done.
func (l *ruleList) ensureHashed(chain, salt string) {
	if !l.hashed {
		l.hashes, l.hashed = chainHashes(chain, salt, l.rules), true
	}
}

// renderScratch is working space for rendering rules, reused through
// scratchPool so that declaring rules allocates only what the Table keeps.
type renderScratch struct {
	st ruleRender
	// buf holds the text of the lists being rendered.
	buf []byte
	// rules are the rendered rules (offsets into buf), targets the jump
	// targets and sets the matched ip sets of the lists being rendered.
	rules   []ruleSpan
	targets []string
	sets    []string
	// lists are the lists rendered, in order.
	lists []listSpan
	// changes and seen are working space of SetChains.
	changes []chainChange
	seen    map[string]struct{}
}

// chainChange is a chain that SetChains replaces.
type chainChange struct {
	name  string
	chain *desiredChain
}

// ruleSpan is one rendered rule in renderScratch.buf.
type ruleSpan struct {
	start, end, cut int
}

// listSpan is one rendered list in a renderScratch.
type listSpan struct {
	textStart, textEnd     int
	rulesStart, rulesEnd   int
	targetStart, targetEnd int
	setStart, setEnd       int
}

// maxPooledScratch, maxPooledChanges and maxPooledSeen bound what a pooled
// scratch keeps: the text of one list (usually one chain), and the changed
// chains and the names seen by one SetChains.
const (
	maxPooledScratch = 1 << 20
	maxPooledChanges = 1 << 12
	maxPooledSeen    = 256
)

var scratchPool = sync.Pool{New: func() any { return new(renderScratch) }}

// getScratch returns an empty scratch from the pool.
func getScratch() *renderScratch {
	sc := scratchPool.Get().(*renderScratch)
	sc.resetLists()
	sc.changes = sc.changes[:0]
	return sc
}

// resetLists forgets the rendered lists.
func (sc *renderScratch) resetLists() {
	sc.buf, sc.rules, sc.targets, sc.sets, sc.lists = sc.buf[:0], sc.rules[:0], sc.targets[:0], sc.sets[:0], sc.lists[:0]
}

// putScratch returns sc to the pool, unless it grew too big to keep.
func putScratch(sc *renderScratch) {
	if cap(sc.buf) > maxPooledScratch || cap(sc.changes) > maxPooledChanges {
		return
	}
	clear(sc.targets[:cap(sc.targets)])
	clear(sc.sets[:cap(sc.sets)])
	clear(sc.changes[:cap(sc.changes)])
	if len(sc.seen) > maxPooledSeen {
		sc.seen = nil // clear would keep its room
	}
	clear(sc.seen)
	scratchPool.Put(sc)
}

// renderList renders the rules of chain, an owned chain or (at.chain set)
// a built-in chain of at.table, for version v into sc, and returns the
// list's index in sc.lists. A rule of a chain that jumps to that chain
// itself is a loop, refused at once.
func (sc *renderScratch) renderList(chain string, at placement, rules []netfilter.Rule, v ipfamily.Family) (int, error) {
	ls := listSpan{textStart: len(sc.buf), rulesStart: len(sc.rules), targetStart: len(sc.targets), setStart: len(sc.sets)}
	for i, r := range rules {
		start := len(sc.buf)
		b, cut, err := appendRestore(sc.buf, r, v, at, &sc.st)
		if err != nil {
			return 0, fmt.Errorf("%w, in rule %d of chain %s", err, i+1, chain)
		}
		sc.buf = b
		if target := r.JumpTarget(); target != "" {
			if target == chain {
				return 0, errs.Also(errRulef("rule %d of chain %s jumps to its own chain", i+1, chain), ErrChainLoop)
			}
			sc.targets = append(sc.targets, target)
		}
		for _, m := range r.Matches {
			if m, ok := m.(netfilter.MatchSet); ok {
				sc.sets = append(sc.sets, m.Name)
			}
		}
		if b := sc.buf[start:]; bytes.IndexByte(b, '\n') >= 0 || bytes.IndexByte(b, '\r') >= 0 || bytes.IndexByte(b, 0) >= 0 {
			return 0, errRulef("rule %d of chain %s renders a line break", i+1, chain)
		}
		sc.rules = append(sc.rules, ruleSpan{start: start, end: len(sc.buf), cut: cut})
	}
	targets := sc.targets[ls.targetStart:]
	slices.Sort(targets)
	sc.targets = append(sc.targets[:ls.targetStart], slices.Compact(targets)...)
	sets := sc.sets[ls.setStart:]
	slices.Sort(sets)
	sc.sets = append(sc.sets[:ls.setStart], slices.Compact(sets)...)
	ls.textEnd, ls.rulesEnd, ls.targetEnd, ls.setEnd = len(sc.buf), len(sc.rules), len(sc.targets), len(sc.sets)
	sc.lists = append(sc.lists, ls)
	return len(sc.lists) - 1, nil
}

// same reports whether list i of sc renders exactly as l: same rules, same
// text, same targets and sets (and so, for the same chain and salt, the same
// hashes).
func (sc *renderScratch) same(i int, l *ruleList) bool {
	ls := sc.lists[i]
	if l == nil || string(sc.buf[ls.textStart:ls.textEnd]) != l.text ||
		ls.rulesEnd-ls.rulesStart != len(l.rules) ||
		!slices.Equal(sc.targets[ls.targetStart:ls.targetEnd], l.targets) ||
		!slices.Equal(sc.sets[ls.setStart:ls.setEnd], l.sets) {
		return false
	}
	for j, r := range sc.rules[ls.rulesStart:ls.rulesEnd] {
		if o := l.rules[j]; r.end-r.start != len(o.body) || r.cut != o.cut {
			return false
		}
	}
	return true
}

// list returns list i of sc as a ruleList the Table keeps (not hashed
// yet): one string for the text, one slice for the rules.
func (sc *renderScratch) list(i int) ruleList {
	ls := sc.lists[i]
	l := ruleList{text: string(sc.buf[ls.textStart:ls.textEnd])}
	if n := ls.rulesEnd - ls.rulesStart; n > 0 {
		l.rules = make([]renderedRule, n)
		for j, r := range sc.rules[ls.rulesStart:ls.rulesEnd] {
			l.rules[j] = renderedRule{body: l.text[r.start-ls.textStart : r.end-ls.textStart], cut: r.cut}
		}
	}
	if ls.targetEnd > ls.targetStart {
		l.targets = slices.Clone(sc.targets[ls.targetStart:ls.targetEnd])
	}
	if ls.setEnd > ls.setStart {
		l.sets = slices.Clone(sc.sets[ls.setStart:ls.setEnd])
	}
	return l
}

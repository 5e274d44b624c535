package iptables

import (
	"bytes"
	"sort"
	"strconv"

	"github.com/nodeplane/nodeplane/dataplane"
)

// restoreWriter builds one restore transaction, noting which object each
// line belongs to.
type restoreWriter struct {
	buf   bytes.Buffer
	lines int
	runs  []lineRun
	// needsSave: see restorePlan.
	needsSave bool
}

// lineRun is a run of input lines that belong to one object: from input
// line first (1-based, counting the table line) to the next run's first.
// hold is what leaves those lines out of the next transaction.
type lineRun struct {
	first int
	name  string
	hold  hold
}

// hold is how much of an object's change a plan leaves out, keeping the
// kernel's version: an object that failed waits for its retry, an object
// whose declaration cannot be written, and every object but those tried
// alone while looking for the one the kernel refused.
type hold uint8

// The holds, each leaving out more than the one before.
const (
	holdNone hold = iota
	// holdDelete keeps an unwanted owned chain (flushed) instead of
	// deleting it.
	holdDelete
	// holdContent keeps an owned chain's rules as they are (one that does
	// not exist is created empty, so that jumps to it stay valid), our
	// rules in a built-in chain as they are, an unwanted chain untouched.
	holdContent
	// holdAll leaves an object untouched: an owned chain is not even
	// created.
	holdAll
)

// own makes the next lines belong to the object name, left out by h.
func (w *restoreWriter) own(name string, h hold) {
	if n := len(w.runs); n > 0 && w.runs[n-1].name == name && w.runs[n-1].hold == h {
		return
	}
	w.runs = append(w.runs, lineRun{first: w.lines + 2, name: name, hold: h})
}

// line writes one command line made of parts.
func (w *restoreWriter) line(parts ...string) {
	for _, p := range parts {
		w.buf.WriteString(p)
	}
	w.buf.WriteByte('\n')
	w.lines++
}

// rule writes "<cmd> <chain> [<index> ]<rule with hash>".
func (w *restoreWriter) rule(cmd, chain string, index int, r renderedRule, prefix, hash string) {
	w.buf.WriteString(cmd)
	w.buf.WriteByte(' ')
	w.buf.WriteString(chain)
	w.buf.WriteByte(' ')
	if index > 0 {
		w.buf.WriteString(strconv.Itoa(index))
		w.buf.WriteByte(' ')
	}
	r.writeWithHash(&w.buf, prefix, hash)
	w.buf.WriteByte('\n')
	w.lines++
}

// planScope says what plan looks at.
type planScope struct {
	// full plans everything: new chains are declared, unwanted owned
	// chains removed, every programmed chain and built-in chain compared.
	full bool
	// chains and hooks are, when not full, the programmed owned chains
	// (sorted) and the built-in chains (in table order) whose declaration
	// changed since the kernel picture was last in sync; nothing else can
	// differ.
	chains, hooks []string
}

// kernelDelta is how a plan changes the kernel picture once its restore
// succeeded: chains to set and chains that are gone.
type kernelDelta struct {
	set  map[string]*kernelChain
	gone []string
}

// apply changes kt by d.
func (kt *kernelTable) apply(d kernelDelta) {
	for name, kc := range d.set {
		kt.chains[name] = kc
	}
	for _, name := range d.gone {
		delete(kt.chains, name)
	}
}

// restorePlan is a restore transaction and what it does.
type restorePlan struct {
	// input is nil when nothing differs; lines counts its command lines.
	input []byte
	lines int
	// delta is how the kernel picture changes once input is committed.
	delta kernelDelta
	// runs says which object each line of input belongs to.
	runs []lineRun
	// inUse are the unwanted owned chains kept (flushed) because foreign
	// rules jump to them.
	inUse []string
	// needsSave says that input deletes a rule of ours in a built-in chain
	// whose text the picture lacks (an in-process read cannot see it):
	// input must not be written; read with iptables-save and plan again.
	needsSave bool
	// objs are the objects input writes, in its order; only when the
	// plan was asked to describe them.
	objs []objectWrite
}

// objectWrite is one object a plan writes: what it does to it and the
// object as declared (want) and as the kernel has it (have), in words.
type objectWrite struct {
	op         dataplane.WriteOp
	kind       dataplane.ObjectKind
	name       string
	want, have string
}

// writes returns the plan's objects as a Plan's Writes.
func (p *restorePlan) writes() []dataplane.Write {
	out := make([]dataplane.Write, len(p.objs))
	for i, o := range p.objs {
		detail := o.want
		switch o.op {
		case dataplane.WriteDelete:
			detail = "was " + o.have
		case dataplane.WriteReplace:
			detail += ", was " + o.have
		}
		out[i] = dataplane.Write{Op: o.op, Kind: o.kind, Object: o.name, Detail: detail}
	}
	return out
}

// drift returns the plan's objects as a State's Drift.
func (p *restorePlan) drift() []dataplane.Drift {
	out := make([]dataplane.Drift, len(p.objs))
	for i, o := range p.objs {
		out[i] = dataplane.Drift{Kind: o.kind, Name: o.name, Want: o.want, Have: o.have}
		switch o.op {
		case dataplane.WriteAdd:
			out[i].Have = ""
		case dataplane.WriteDelete:
			out[i].Want = ""
		}
	}
	return out
}

// kindRule is the kind of a group of our rules in a built-in chain in a
// Plan; an owned chain is of kind "chain" (kindChain).
const kindRule dataplane.ObjectKind = "rule"

// describe notes that the plan writes the object of kind named name with
// op, from have to want. The plan calls it only when asked to describe
// its writes (Apply does not pay for the texts).
func (p *restorePlan) describe(op dataplane.WriteOp, kind dataplane.ObjectKind, name, want, have string) {
	p.objs = append(p.objs, objectWrite{op: op, kind: kind, name: name, want: want, have: have})
}

// rules says how many rules: "1 rule", "3 rules".
func rules(n int) string {
	if n == 1 {
		return "1 rule"
	}
	return strconv.Itoa(n) + " rules"
}

// owner returns the object input line n belongs to and the hold that
// leaves the line out; "" for the table line and COMMIT.
func (p *restorePlan) owner(n int) (string, hold) {
	if n < 2 || n > p.lines+1 {
		return "", holdNone
	}
	i := sort.Search(len(p.runs), func(i int) bool { return p.runs[i].first > n }) - 1
	if i < 0 {
		return "", holdNone
	}
	return p.runs[i].name, p.runs[i].hold
}

// objects returns, in input order, the owned chains to program and the
// built-in chains with lines in input, restricted to set unless it is nil:
// the objects to try alone when the kernel refuses the transaction without
// naming a line. Unwanted chains are never tried alone (their deletion
// waits for the jumps to them to go).
func (p *restorePlan) objects(set []string, prog, builtin map[string]bool) []string {
	var in map[string]bool
	if set != nil {
		in = make(map[string]bool, len(set))
		for _, name := range set {
			in[name] = true
		}
	}
	seen := map[string]bool{}
	var out []string
	for i, r := range p.runs {
		end := p.lines + 2
		if i+1 < len(p.runs) {
			end = p.runs[i+1].first
		}
		if end == r.first || seen[r.name] || !prog[r.name] && !builtin[r.name] || in != nil && !in[r.name] {
			continue
		}
		seen[r.name] = true
		out = append(out, r.name)
	}
	return out
}

// plan computes the restore transaction that turns kt into the declared
// state, given the owned chains to program and what to hold back, and how
// the kernel picture changes once it succeeds. It returns a nil input
// when nothing differs. kt is not modified. A full scope compares
// everything; a narrow one only what it names (the result is the same
// when nothing else differs).
//
// The transaction is ordered so that every line is valid where it stands:
// new chains are declared first (a declaration flushes an existing chain,
// so only chains that do not exist yet are declared); then owned chains are
// edited in place (-R for changed rules, -D from the end for surplus ones,
// -A for new ones), so unchanged rules keep their counters; then our rules
// in built-in chains are deleted by their full text and inserted or
// appended; unwanted owned chains are flushed and deleted last, once
// nothing of ours refers to them.
//
// With describe set, the plan also lists its writes per object (see
// Table.Plan): an owned chain added, replaced whole or deleted, with its
// rule counts; a group of our rules in a built-in chain ("INPUT top" for
// the InsertRules group, "INPUT bottom" for the AppendRules one) added,
// changed or removed.
func (t *Table) plan(kt *kernelTable, prog map[string]bool, scope planScope, holds map[string]hold, describe bool) *restorePlan {
	p := &restorePlan{delta: kernelDelta{set: make(map[string]*kernelChain)}}
	hp := t.opts.HashPrefix
	names, hooks := scope.chains, scope.hooks
	if scope.full {
		names, hooks = sortedKeys(prog), tableChains[t.opts.Table]
	}

	// Size the buffer for the chains that will be written in full.
	size := 64
	for _, name := range names {
		if kc := kt.chains[name]; kc == nil || kc.hashes != t.desired[name].hashes {
			size += len(t.desired[name].text) + t.desired[name].len()*(len(name)+len(hp)+HashLength+32)
		}
	}
	for _, name := range hooks {
		if h := t.hooks[name]; h != nil {
			size += len(h.insert.text) + len(h.append.text) + (h.insert.len()+h.append.len())*(len(name)+len(hp)+HashLength+48)
		}
	}
	w := &restoreWriter{}
	w.buf.Grow(size)
	w.buf.WriteString("*" + t.opts.Table + "\n")

	// New owned chains.
	for _, name := range names {
		if kt.chains[name] == nil && holds[name] < holdAll {
			w.own(name, holdAll)
			w.line(":", name, " - [0:0]")
		}
	}
	// Owned chains to program.
	for _, name := range names {
		d := t.desired[name]
		kc := kt.chains[name]
		switch holds[name] {
		case holdAll:
			continue
		case holdContent:
			if kc == nil {
				p.delta.set[name] = &kernelChain{} // declared empty above
				if describe {
					p.describe(dataplane.WriteAdd, kindChain, name, "empty: its rules are held back", "")
				}
			}
			continue
		}
		w.own(name, holdContent)
		if kc == nil {
			for i, r := range d.rules {
				w.rule("-A", name, 0, r, hp, d.hash(i))
			}
			p.delta.set[name] = &kernelChain{hashes: d.hashes}
			if describe {
				p.describe(dataplane.WriteAdd, kindChain, name, rules(d.len()), "")
			}
			continue
		}
		if kc.hashes == d.hashes {
			continue
		}
		if describe {
			p.describe(dataplane.WriteReplace, kindChain, name, rules(d.len()), rules(kc.rules()))
		}
		p.delta.set[name] = &kernelChain{hashes: d.hashes, foreignRefs: kc.foreignRefs}
		have, want := kc.rules(), d.len()
		for i := 0; i < min(have, want); i++ {
			if kc.hashes[i*HashLength:(i+1)*HashLength] != d.hash(i) {
				w.rule("-R", name, i+1, d.rules[i], hp, d.hash(i))
			}
		}
		for i := have - 1; i >= want; i-- {
			w.line("-D ", name, " ", strconv.Itoa(i+1))
		}
		for i := have; i < want; i++ {
			w.rule("-A", name, 0, d.rules[i], hp, d.hash(i))
		}
	}

	// Our rules in built-in chains.
	for _, name := range hooks {
		if holds[name] != holdNone {
			continue
		}
		kc := kt.chains[name]
		if kc == nil {
			kc = &kernelChain{}
		}
		var front, back ruleList
		if h := t.hooks[name]; h != nil {
			front, back = h.insert, h.append
		}
		w.own(name, holdContent)
		if nk := t.planHook(w, name, kc, &front, &back, p, describe); nk != kt.chains[name] {
			p.delta.set[name] = nk
		}
	}

	// Owned chains in the kernel that are no longer wanted: deleted, or
	// flushed and kept while foreign rules jump to them (deleting them
	// would fail the whole transaction).
	if scope.full {
		var gone []string
		for _, name := range sortedKeys(kt.chains) {
			kc := kt.chains[name]
			h := holds[name]
			if t.builtin[name] || prog[name] || h >= holdContent {
				continue
			}
			if kc.rules() > 0 {
				w.own(name, holdAll)
				w.line("-F ", name)
			}
			if kc.foreignRefs > 0 || h == holdDelete {
				if kc.foreignRefs > 0 && h == holdNone {
					p.inUse = append(p.inUse, name)
				}
				if kc.rules() > 0 {
					p.delta.set[name] = &kernelChain{foreignRefs: kc.foreignRefs}
					if describe {
						p.describe(dataplane.WriteReplace, kindChain, name, "flushed and kept while foreign rules jump to it", rules(kc.rules()))
					}
				}
				continue
			}
			gone = append(gone, name)
		}
		for _, name := range gone {
			w.own(name, holdDelete)
			w.line("-X ", name)
			if describe {
				p.describe(dataplane.WriteDelete, kindChain, name, "", rules(kt.chains[name].rules()))
			}
		}
		p.delta.gone = gone
	}

	if w.lines == 0 {
		return p
	}
	w.buf.WriteString("COMMIT\n")
	p.input, p.lines, p.runs, p.needsSave = w.buf.Bytes(), w.lines, w.runs, w.needsSave
	return p
}

// planHook writes the edits of one built-in chain: our rules must be front
// (at the top, in order), then the foreign rules in their order, then back
// (at the bottom, in order). A rule's hash tells which rule of front or
// back it is (hashes depend on the position in the group), so every rule
// of ours already where it belongs is kept, with its counters: a front
// rule in the leading run of our rules, a back rule in the trailing run,
// each run in order. Every other rule of ours is deleted by its full text,
// which is immune to other writers moving rules; the missing rules are
// inserted at their place (or appended), so changing one rule rewrites
// just that rule. Foreign rules are never touched. It returns the chain as
// it will be after the write (the same chain when nothing changes). With
// describe set it notes in p each group it writes (see describeHook).
func (t *Table) planHook(w *restoreWriter, chain string, kc *kernelChain, front, back *ruleList, p *restorePlan, describe bool) *kernelChain {
	n := kc.rules()
	hp := t.opts.HashPrefix
	keptFront := make(map[int]int, front.len()) // front index → kernel index
	keptBack := make(map[int]int, back.len())   // back index → kernel index
	kept := make([]bool, n)

	// A hash of ours present twice (another writer copied a rule) makes
	// deletion by text ambiguous: delete every copy and start over.
	seen := make(map[string]bool, n)
	dup := false
	foreign := 0
	for i := 0; i < n; i++ {
		if h := kc.hash(i); h != "" {
			dup = dup || seen[h]
			seen[h] = true
		} else {
			foreign++
		}
	}
	lastBack := -1 // highest back index kept
	inFront, inBack := hashIndex(front), hashIndex(back)
	if !dup {
		// The leading run of our rules, up to the first back rule.
		end, lastFront := 0, -1
		for ; end < n && kc.hash(end) != ""; end++ {
			if _, ok := inBack[kc.hash(end)]; ok {
				break
			}
			if k, ok := inFront[kc.hash(end)]; ok && k > lastFront {
				keptFront[k], kept[end], lastFront = end, true, k
			}
		}
		// The trailing run, after the leading one.
		start := n
		for start > end && kc.hash(start-1) != "" {
			start--
		}
		for i := start; i < n; i++ {
			if j, ok := inBack[kc.hash(i)]; ok && j > lastBack {
				keptBack[j], kept[i], lastBack = i, true, j
			}
		}
	}

	// written counts the lines of each group (0: front, 1: back), for
	// describe.
	var written [2]int
	changed := false
	for i := 0; i < n; i++ {
		if !kept[i] && kc.hash(i) != "" {
			w.needsSave = w.needsSave || kc.texts[i] == ""
			w.line("-D ", chain, " ", kc.texts[i])
			changed = true
		}
	}
	var hashes bytes.Buffer
	texts := make([]string, 0, front.len()+foreign+back.len())
	add := func(h, text string) {
		hashes.WriteString(h)
		texts = append(texts, text)
	}
	// Front: once the others are deleted, the kept rules are the first,
	// in order; inserting the missing ones in order puts each at its
	// index.
	for k := 0; k < front.len(); k++ {
		h := front.hash(k)
		if i, ok := keptFront[k]; ok {
			add(h, kc.texts[i])
			continue
		}
		w.rule("-I", chain, k+1, front.rules[k], hp, h)
		add(h, front.rules[k].withHash(hp, h))
		changed = true
		written[0]++
	}
	for i := 0; i < n; i++ {
		if kc.hash(i) == "" {
			add(string(zeroHash[:]), "")
		}
	}
	// Back: the kept rules are the last, in order; a missing one before
	// the last kept one is inserted at its place, the others appended.
	for j := 0; j < back.len(); j++ {
		h := back.hash(j)
		if i, ok := keptBack[j]; ok {
			add(h, kc.texts[i])
			continue
		}
		if j < lastBack {
			w.rule("-I", chain, front.len()+foreign+j+1, back.rules[j], hp, h)
		} else {
			w.rule("-A", chain, 0, back.rules[j], hp, h)
		}
		add(h, back.rules[j].withHash(hp, h))
		changed = true
		written[1]++
	}
	if !changed {
		return kc
	}
	if describe {
		describeHook(p, chain, kc, kept, inFront, inBack, written, [2]int{front.len(), back.len()})
	}
	return &kernelChain{hashes: hashes.String(), texts: texts}
}

// describeHook notes in p the groups of our rules in the built-in chain
// that a plan writes: a group whose rule it inserts or appends, or whose
// rule of ours in the kernel it deletes (one not kept; see ourGroup).
// want is the groups' declared sizes.
func describeHook(p *restorePlan, chain string, kc *kernelChain, kept []bool, inFront, inBack map[string]int, written, want [2]int) {
	var have [2]int
	for i, g := range ourGroups(kc, inFront, inBack) {
		if g < 0 {
			continue
		}
		have[g]++
		if !kept[i] {
			written[g]++
		}
	}
	for g := range 2 {
		name := chain + groupNames[g]
		switch {
		case written[g] == 0:
		case want[g] == 0:
			p.describe(dataplane.WriteDelete, kindRule, name, "", rules(have[g]))
		case have[g] == 0:
			p.describe(dataplane.WriteAdd, kindRule, name, rules(want[g]), "")
		default:
			p.describe(dataplane.WriteReplace, kindRule, name, rules(want[g]), rules(have[g]))
		}
	}
}

// groupNames name the groups of our rules in a built-in chain after the
// chain's name: the InsertRules group (0) and the AppendRules one (1).
var groupNames = [2]string{" top", " bottom"}

// ourGroups returns, for each rule of kc, the group of our rules it
// belongs to (0: front, 1: back), or -1 for a foreign rule: the group
// whose rule it is, by its hash (inFront, inBack), else the front group
// when no foreign rule comes before it, else the back one.
func ourGroups(kc *kernelChain, inFront, inBack map[string]int) []int {
	out := make([]int, kc.rules())
	leading := true
	for i := range out {
		h := kc.hash(i)
		switch _, front := inFront[h]; {
		case h == "":
			out[i], leading = -1, false
		case front:
			out[i] = 0
		default:
			if _, back := inBack[h]; back || !leading {
				out[i] = 1
			}
		}
	}
	return out
}

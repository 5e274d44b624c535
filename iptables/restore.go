package iptables

import (
	"bytes"
	"strconv"
)

// restoreWriter builds one restore transaction.
type restoreWriter struct {
	buf   bytes.Buffer
	lines int
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

// plan computes the restore input that turns kt into the declared state,
// given the owned chains to program, and how the kernel picture changes
// once it succeeds. It returns a nil input when nothing differs. kt is not
// modified. A full scope compares everything; a narrow one only what it
// names (the result is the same when nothing else differs).
//
// The transaction is ordered so that every line is valid where it stands:
// new chains are declared first (a declaration flushes an existing chain,
// so only chains that do not exist yet are declared); then owned chains are
// edited in place (-R for changed rules, -D from the end for surplus ones,
// -A for new ones), so unchanged rules keep their counters; then our rules
// in built-in chains are deleted by their full text and inserted or
// appended; unwanted owned chains are flushed and deleted last, once
// nothing of ours refers to them.
func (t *Table) plan(kt *kernelTable, prog map[string]bool, scope planScope) (input []byte, lines int, delta kernelDelta) {
	delta.set = make(map[string]*kernelChain)
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
		if kt.chains[name] == nil {
			w.line(":", name, " - [0:0]")
		}
	}
	// Owned chains to program.
	for _, name := range names {
		d := t.desired[name]
		kc := kt.chains[name]
		if kc == nil {
			for i, r := range d.rules {
				w.rule("-A", name, 0, r, hp, d.hash(i))
			}
			delta.set[name] = &kernelChain{hashes: d.hashes}
			continue
		}
		if kc.hashes == d.hashes {
			continue
		}
		delta.set[name] = &kernelChain{hashes: d.hashes, foreignRefs: kc.foreignRefs}
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
		kc := kt.chains[name]
		if kc == nil {
			kc = &kernelChain{}
		}
		var front, back ruleList
		if h := t.hooks[name]; h != nil {
			if t.opts.InsertMode == InsertModeInsert {
				front, back = h.insert, h.append
			} else {
				back = ruleList{
					rules:  append(append([]renderedRule(nil), h.insert.rules...), h.append.rules...),
					hashes: h.insert.hashes + h.append.hashes,
				}
			}
		}
		if nk := t.planHook(w, name, kc, &front, &back); nk != kt.chains[name] {
			delta.set[name] = nk
		}
	}

	// Owned chains in the kernel that are no longer wanted.
	if scope.full {
		var gone []string
		for _, name := range sortedKeys(kt.chains) {
			kc := kt.chains[name]
			if t.builtin[name] || prog[name] {
				continue
			}
			if kc.rules() > 0 {
				w.line("-F ", name)
			}
			if kc.foreignRefs > 0 {
				t.opts.Logger.Warn("keeping an unwanted chain (flushed) because foreign rules jump to it", "chain", name, "references", kc.foreignRefs)
				if kc.rules() > 0 {
					delta.set[name] = &kernelChain{foreignRefs: kc.foreignRefs}
				}
				continue
			}
			gone = append(gone, name)
		}
		for _, name := range gone {
			w.line("-X ", name)
		}
		delta.gone = gone
	}

	if w.lines == 0 {
		return nil, 0, delta
	}
	w.buf.WriteString("COMMIT\n")
	return w.buf.Bytes(), w.lines, delta
}

// planHook writes the edits of one built-in chain: our rules must be front
// (at the top, in order), then the foreign rules in their order, then back
// (at the bottom, in order). Rules of ours already where they belong are
// kept: a front rule in the leading run of our rules at its own index, a
// back rule in the trailing run at its own offset from the run's first back
// rule. Every other rule of ours is deleted by its full text, which is
// immune to other writers moving rules; missing front rules are inserted at
// their index, missing back rules inserted among or appended after the kept
// ones. Foreign rules are never touched. It returns the chain as it will be
// after the write (the same chain when nothing changes).
func (t *Table) planHook(w *restoreWriter, chain string, kc *kernelChain, front, back *ruleList) *kernelChain {
	n := kc.rules()
	hp := t.opts.HashPrefix
	keep := make([]bool, n)

	// A hash of ours present twice (another writer copied a rule) makes
	// deletion by text ambiguous: delete every copy and start over.
	seen := make(map[string]bool, n)
	dup := false
	for i := 0; i < n; i++ {
		if h := kc.hash(i); h != "" {
			dup = dup || seen[h]
			seen[h] = true
		}
	}
	foreign := 0
	for i := 0; i < n; i++ {
		if kc.hash(i) == "" {
			foreign++
		}
	}
	lastFront := -1
	keptBack := -1 // highest back index kept
	if !dup {
		for i := 0; i < n && kc.hash(i) != ""; i++ {
			if i < front.len() && kc.hash(i) == front.hash(i) {
				keep[i] = true
				lastFront = i
			}
		}
		// The trailing run of our rules, after the kept front rules.
		start := n
		for start > lastFront+1 && kc.hash(start-1) != "" {
			start--
		}
		inBack := make(map[string]int, back.len())
		for j := 0; j < back.len(); j++ {
			inBack[back.hash(j)] = j
		}
		for start < n {
			if _, ok := inBack[kc.hash(start)]; ok {
				break
			}
			start++
		}
		for i := start; i < n; i++ {
			if j := i - start; j < back.len() && kc.hash(i) == back.hash(j) {
				keep[i] = true
				keptBack = j
			}
		}
	}

	changed := false
	for i := 0; i < n; i++ {
		if !keep[i] && kc.hash(i) != "" {
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
	// Front: kept rules sit at their index once the others are deleted;
	// insert the missing ones in order.
	for k := 0; k < front.len(); k++ {
		if k <= lastFront && keep[k] { // a kept front rule matches its index
			add(front.hash(k), kc.texts[k])
			continue
		}
		text := front.rules[k].withHash(hp, front.hash(k))
		w.rule("-I", chain, k+1, front.rules[k], hp, front.hash(k))
		add(front.hash(k), text)
		changed = true
	}
	for i := 0; i < n; i++ {
		if kc.hash(i) == "" {
			hashes.Write(zeroHash[:])
			texts = append(texts, "")
		}
	}
	// Back: kept rules are at the end; missing ones before the last kept
	// one are inserted at their place, the rest appended.
	kept := make(map[string]string, back.len())
	for i := 0; i < n; i++ {
		if keep[i] && i > lastFront {
			kept[kc.hash(i)] = kc.texts[i]
		}
	}
	for j := 0; j < back.len(); j++ {
		h := back.hash(j)
		if text, ok := kept[h]; ok {
			add(h, text)
			continue
		}
		text := back.rules[j].withHash(hp, h)
		if j < keptBack {
			w.rule("-I", chain, front.len()+foreign+j+1, back.rules[j], hp, h)
		} else {
			w.rule("-A", chain, 0, back.rules[j], hp, h)
		}
		add(h, text)
		changed = true
	}
	if !changed {
		return kc
	}
	return &kernelChain{hashes: hashes.String(), texts: texts}
}

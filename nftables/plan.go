// Size: the planner that turns desired and kernel tables into nf_tables transactions: sets, elements, chains and rule diffs, whose order depends on each other.

package nftables

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/kernel"
)

// maxElemPayload bounds the elements of one element request: a netlink
// attribute holds at most 64 KiB.
const maxElemPayload = 60 << 10

// planner builds the transactions of one round of an Apply.
type planner struct {
	t     *Table
	s     kernel.NFTablesSocket
	k     *kstate
	holds map[string]hold
	probe map[string]bool
	prog  map[string]bool
	full  bool
	// scope are the chains to plan when not full.
	scope   map[string]bool
	rebuild bool
	now     time.Time
	// dry: the planner plans for Plan, which sends nothing: it records
	// each request's Write (note) and records no refusal in the ledger.
	dry bool

	// Requests by step, in the order the transaction carries them:
	// references exist before they are used and go after what uses them.
	table, delRules, delElems, flush, delSets, delChains, newSets, newChains, newRules txn
	adds                                                                               []elemAdd
	post                                                                               []func(k *kstate)
}

// elemAdd is one element to add (or delete).
type elemAdd struct {
	set   string
	spec  *setSpec
	key   string
	data  string
	probe bool
}

// obj is the element's object key.
func (e *elemAdd) obj() string { return objElem(e.set, e.key) }

// plan computes the transactions that make the kernel match the declared
// state: the main one and, when the element additions exceed a
// transaction's share, the element additions of the further ones, in
// chunks of ElementsPerTransaction that elemTxn encodes (the writer
// encodes each while the kernel processes the one before). Kernel picture
// updates to make once they commit are in main.post.
func (p *planner) plan() (main *txn, chunks [][]elemAdd, err error) {
	t := p.t
	if len(t.sets) == 0 && len(p.prog) == 0 {
		// Nothing is to be in the table: it goes (or is not made).
		main = newTxn(64)
		if p.k.table || p.rebuild {
			st := main.begin(t.fam, nfnl.MsgDestroyTable, 0, "table", holdNone)
			main.w.Str(nfnl.TableName, t.opts.Name)
			main.w.End(st)
			p.note(main, dataplane.WriteDelete, kindTable, p.tableText(), "")
			main.post = append(main.post, func(k *kstate) { *k = *newKstate() })
		}
		return main, nil, nil
	}
	if p.rebuild {
		p.table.begin(t.fam, nfnl.MsgDestroyTable, 0, "table", holdNone)
		p.table.w.Str(nfnl.TableName, t.opts.Name)
		p.table.w.End(p.table.msgs[len(p.table.msgs)-1].start)
		p.note(&p.table, dataplane.WriteDelete, kindTable, p.tableText(), "to rebuild it whole")
	}
	if !p.k.table || p.k.flags != 0 {
		st := p.table.begin(t.fam, nfnl.MsgNewTable, nfnl.FlagCreate, "table", holdNone)
		tb := nfnl.Table{Name: t.opts.Name}
		tb.Append(&p.table.w, false)
		p.table.w.End(st)
		if p.k.table && !p.rebuild {
			p.note(&p.table, dataplane.WriteReplace, kindTable, p.tableText(), fmt.Sprintf("flags 0, was %#x", p.k.flags))
		} else {
			p.note(&p.table, dataplane.WriteAdd, kindTable, p.tableText(), "")
		}
		p.post = append(p.post, func(k *kstate) { k.table, k.flags = true, 0 })
	}
	for _, name := range p.setNames() {
		p.set(name)
	}
	for _, name := range p.chainNames() {
		if err := p.chain(name); err != nil {
			return nil, nil, err
		}
	}
	// Sets go after the rules that use them and before the chains their
	// elements jump to.
	steps := []*txn{&p.table, &p.delRules, &p.delElems, &p.flush, &p.delSets, &p.delChains, &p.newSets, &p.newChains}
	per := t.opts.ElementsPerTransaction
	adds := p.adds
	first := min(len(adds), per)
	size := p.newRules.w.Len() + p.elemsSize(adds[:first])
	for _, x := range steps {
		size += x.w.Len()
	}
	main = newTxn(size)
	for _, x := range steps {
		main.appendTx(x)
	}
	p.elemMsgs(main, nfnl.MsgNewSetElem, adds[:first])
	main.elems = first
	main.appendTx(&p.newRules)
	// Structural updates first: the element updates need their sets.
	main.post = append(p.post, main.post...)
	for i := first; i < len(adds); i += per {
		chunks = append(chunks, adds[i:min(i+per, len(adds))])
	}
	return main, chunks, nil
}

// elemTxn returns a transaction adding the elements of chunk.
func (p *planner) elemTxn(chunk []elemAdd) *txn {
	x := newTxn(p.elemsSize(chunk))
	p.elemMsgs(x, nfnl.MsgNewSetElem, chunk)
	x.elems = len(chunk)
	return x
}

// elemsSize bounds the bytes of the element requests elemMsgs writes for
// es, so that their buffer is allocated once.
func (p *planner) elemsSize(es []elemAdd) int {
	n, msgs := 0, 1
	for i := range es {
		e := &es[i]
		n += elemSize(e)
		switch {
		case e.probe:
			msgs += 2 // its own request, and a new one after it
		case i > 0 && e.set != es[i-1].set:
			msgs++
		}
	}
	msgs += n / maxElemPayload
	// Per request: header, table, set (at most 31 characters) and the
	// elements' nest.
	over := nfnl.HdrLen + nfnl.GenLen + attrLen(len(p.t.opts.Name)+1) + attrLen(32) + 4
	return n + msgs*over
}

// attrLen is the length of an attribute of n bytes of payload.
func attrLen(n int) int { return (4 + n + 3) &^ 3 }

// elemSize is the length of the kernel elements appendKernelElems writes
// for e.
func elemSize(e *elemAdd) int {
	sp := e.spec
	key := 4 + attrLen(sp.klen) // the key's nest and value
	n := 4 + key                // the element's nest
	switch {
	case sp.interval && sp.concat():
		n += key // the key's end
	case sp.interval:
		n = 2 * (n + attrLen(4)) // the first key and the end, with flags
	}
	if e.data != "" {
		n += 4 + 4 + attrLen(4) // data and verdict nests, code
		if c := verdictChain(e.data); c != "" {
			n += attrLen(len(c) + 1)
		}
	}
	return n
}

// appendTx appends y's requests to x.
func (x *txn) appendTx(y *txn) {
	base := x.w.Len()
	x.w.Raw(y.w.B)
	for _, m := range y.msgs {
		m.start += base
		x.msgs = append(x.msgs, m)
	}
	x.post = append(x.post, y.post...)
}

// setNames returns the sets to plan, in order.
func (p *planner) setNames() []string {
	names := map[string]bool{}
	if p.full {
		for n := range p.t.sets {
			names[n] = true
		}
		for n := range p.k.sets {
			names[n] = true
		}
	} else {
		for n := range p.t.changedSets {
			names[n] = true
		}
	}
	return sortedKeys(names)
}

// chainNames returns the chains to plan, in order.
func (p *planner) chainNames() []string {
	names := map[string]bool{}
	if p.full {
		for n := range p.prog {
			names[n] = true
		}
		for n := range p.k.chains {
			names[n] = true
		}
	} else {
		names = p.scope
	}
	return sortedKeys(names)
}

// set plans one set: its creation, deletion or shape change, and its
// elements.
func (p *planner) set(name string) {
	t := p.t
	d, ks := t.sets[name], p.k.sets[name]
	obj := objSet(name)
	h := p.holds[obj]
	if d == nil {
		if ks == nil || h != holdNone {
			return
		}
		p.delSet(name, holdDelete)
		return
	}
	if h != holdNone {
		return // the kernel keeps its version of the set, elements and all
	}
	all := p.full && !p.t.synced || d.all
	if ks != nil && !d.spec.matchesKernel(&ks.nl) {
		p.delSet(name, holdContent)
		ks = nil
	}
	written := d.written()
	if ks == nil {
		nl := d.spec.nl(t.opts.Name, name)
		nl.ID = t.nextID() // the kernel wants one for every new set
		st := p.newSets.begin(t.fam, nfnl.MsgNewSet, nfnl.FlagCreate, obj, holdContent)
		nl.Append(&p.newSets.w, false)
		p.newSets.w.End(st)
		p.note(&p.newSets, dataplane.WriteAdd, KindSet, name, d.spec.String())
		n := len(written) // the elements it will hold, so that its map does not grow
		p.post = append(p.post, func(k *kstate) { k.sets[name] = &kset{nl: nl, elems: make(map[string]string, n)} })
		ks = &kset{}
		all = true
	}
	var dels []elemAdd
	// check plans key, whose declared data is want when wok.
	check := func(key, want string, wok bool) {
		if len(p.holds) > 0 && p.holds[objElem(name, key)] != holdNone {
			return
		}
		if c := verdictChain(want); wok && c != "" && len(p.holds) > 0 && p.absentChain(c) {
			p.holdBack(objElem(name, key), "it jumps to chain "+c+", which is not written")
			return
		}
		have, hok := ks.elems[key]
		if wok && hok && want == have {
			return
		}
		probe := len(p.probe) > 0 && p.probe[objElem(name, key)]
		if hok {
			dels = append(dels, elemAdd{set: name, spec: &d.spec, key: key, data: have, probe: probe})
		}
		if wok {
			p.adds = append(p.adds, elemAdd{set: name, spec: &d.spec, key: key, data: want, probe: probe})
		}
	}
	first := len(p.adds)
	if all {
		if len(ks.elems) == 0 {
			p.adds = slices.Grow(p.adds, len(written))
		}
		for key, want := range written {
			check(key, want, true)
		}
		for key := range ks.elems {
			if _, ok := written[key]; !ok {
				check(key, "", false)
			}
		}
	} else {
		for key := range d.changed {
			want, wok := written[key]
			check(key, want, wok)
		}
	}
	if d.spec.interval && d.spec.concat() {
		// The kernel checks a new element of concatenated ranges against
		// those before it only, by whether its first or last key falls in
		// one: which element of an overlapping pair is refused, if any,
		// depends on their order, which the maps above draw at random. In
		// the order of their keys (first keys, field by field) the outcome
		// is the same every time, and an element contained in another
		// comes after it, so that it is the one refused.
		slices.SortFunc(p.adds[first:], func(a, b elemAdd) int { return strings.Compare(a.key, b.key) })
	}
	if len(dels) > 0 {
		p.elemMsgs(&p.delElems, nfnl.MsgDelSetElem, dels)
	}
}

// delSet deletes a set.
func (p *planner) delSet(name string, h hold) {
	st := p.delSets.begin(p.t.fam, nfnl.MsgDelSet, 0, objSet(name), h)
	p.delSets.w.Str(nfnl.SetTable, p.t.opts.Name)
	p.delSets.w.Str(nfnl.SetName, name)
	p.delSets.w.End(st)
	detail := ""
	if h == holdContent {
		detail = "to create it with its declared shape"
	}
	p.note(&p.delSets, dataplane.WriteDelete, KindSet, name, detail)
	p.post = append(p.post, func(k *kstate) { delete(k.sets, name) })
}

// elemMsgs writes element requests for es (of one or more sets, grouped),
// as few as fit, one element per request for those being probed, and the
// picture's update for when they commit.
func (p *planner) elemMsgs(x *txn, typ uint16, es []elemAdd) {
	flags := uint16(0)
	add := typ == nfnl.MsgNewSetElem
	if add {
		flags = nfnl.FlagCreate
	}
	if len(es) > 0 {
		x.post = append(x.post, func(k *kstate) {
			var s *kset
			for i := range es {
				e := &es[i]
				if i == 0 || e.set != es[i-1].set {
					s = k.sets[e.set]
				}
				switch {
				case s == nil:
				case add:
					s.elems[e.key] = e.data
				default:
					delete(s.elems, e.key)
				}
			}
		})
	}
	offs := make([]uint32, len(es)) // the elements' offsets, of all requests
	for i := 0; i < len(es); {
		first, set := i, es[i].set
		start := x.begin(p.t.fam, typ, flags, "", holdContent)
		l := nfnl.ElemList{Table: p.t.opts.Name, Set: set}
		l.AppendHeader(&x.w)
		n := x.w.Open(nfnl.ElemListElems)
		for ; i < len(es) && es[i].set == set && x.w.NestLen(n) < maxElemPayload; i++ {
			e := &es[i]
			if e.probe && i > first {
				break
			}
			offs[i] = uint32(x.w.Len() - start)
			appendKernelElems(&x.w, e.key, e.spec.klen, e.spec.interval, e.spec.concat(), e.data)
			if e.probe {
				i++
				break
			}
		}
		x.w.Close(n)
		x.w.End(start)
		m := &x.msgs[len(x.msgs)-1]
		m.elems, m.offs = es[first:i:i], offs[first:i:i]
		if add {
			p.note(x, dataplane.WriteAdd, KindElement, "", "")
		} else {
			p.note(x, dataplane.WriteDelete, KindElement, "", "")
		}
	}
}

// desired returns a chain's declaration if it is to be programmed.
func (p *planner) desired(name string) *chainDecl {
	if !p.prog[name] {
		return nil
	}
	return p.t.chains[name]
}

// chain plans one chain: its creation, deletion, shape, policy and rules.
func (p *planner) chain(name string) error {
	t := p.t
	d, kc := p.desired(name), p.k.chains[name]
	obj := objChain(name)
	h := p.holds[obj]
	if d == nil {
		if kc == nil || h != holdNone || p.replacingHeld(kc) {
			return nil
		}
		p.delChain(name, holdDelete)
		return nil
	}
	if h == holdNone {
		if missing := p.missingRef(d); missing != "" {
			p.holdBack(obj, "it uses "+missing+", which is not written")
			h = holdContent
		}
	}
	if h != holdNone {
		if kc == nil && h == holdContent {
			p.newChain(name, d, false)
		}
		return nil
	}
	if kc != nil && !sameShape(kc, d) {
		p.delChain(name, holdContent)
		kc = nil
	}
	if kc == nil {
		p.newChain(name, d, true)
		return nil
	}
	if d.base != nil && kc.policy != policyCode(d.base.policy) {
		st := p.newChains.begin(t.fam, nfnl.MsgNewChain, 0, obj, holdContent)
		pol := policyCode(d.base.policy)
		c := nfnl.Chain{Table: t.opts.Name, Name: name, Policy: &pol}
		c.Append(&p.newChains.w, false)
		p.newChains.w.End(st)
		p.note(&p.newChains, dataplane.WriteReplace, KindChain, name, "policy "+d.base.policy.String()+", was "+policyName(kc.policy))
		p.post = append(p.post, func(k *kstate) { k.chains[name].policy = pol })
	}
	return p.diffRules(name, d, kc)
}

// replacingHeld reports whether kc, a chain no longer declared, is a base
// chain at the hook of a declared base chain held back: it stays until
// that one is written (a table written when a hook had two base chains,
// one for InsertRules and one for AppendRules, keeps them until the one
// that replaces them is in), so that the hook is never left without our
// rules.
func (p *planner) replacingHeld(kc *kchain) bool {
	if kc.hook == nil {
		return false
	}
	for h := range p.t.hooks {
		if hookNum(h) == kc.hook.Num && p.desired(BaseChain(h)) != nil && p.holds[objChain(BaseChain(h))] != holdNone {
			return true
		}
	}
	return false
}

// missingRef returns what a chain's rules use that will not exist in the
// kernel after this round, as the kernel's picture and the objects held
// back tell at plan time — a set not written with its declared shape, a
// chain whose creation was refused — or "": such a chain is held back
// (keeping its kernel rules) instead of being sent for the kernel to
// refuse.
func (p *planner) missingRef(d *chainDecl) string {
	for i := range d.rules {
		r := &d.rules[i]
		if r.target != "" && p.absentChain(r.target) {
			return "chain " + r.target
		}
		for _, s := range append(slices.Clip(r.sets), r.vmap) {
			if s == "" || p.holds[objSet(s)] == holdNone {
				continue
			}
			ks, ds := p.k.sets[s], p.t.sets[s]
			if ks == nil || ds == nil || !ds.spec.matchesKernel(&ks.nl) {
				return "set " + s
			}
		}
	}
	return ""
}

// absentChain reports whether a chain will be missing from the kernel
// after this round: not there, and its creation held back.
func (p *planner) absentChain(name string) bool {
	return p.k.chains[name] == nil && p.holds[objChain(name)] == holdDelete
}

// sameShape reports whether the kernel's chain is the declared one's kind:
// regular, or a base chain of the same hook, priority and type.
func sameShape(kc *kchain, d *chainDecl) bool {
	if d.base == nil || kc.hook == nil {
		return d.base == nil && kc.hook == nil
	}
	return kc.hook.Num == d.base.num && kc.hook.Priority == d.base.priority && kc.typ == d.base.typ
}

func policyCode(p Policy) uint32 {
	if p == PolicyDrop {
		return nfnl.PolicyDrop
	}
	return nfnl.PolicyAccept
}

// delChain deletes a chain: its rules first (in a request before every
// chain deletion, so that jumps between deleted chains go first), then the
// chain.
func (p *planner) delChain(name string, h hold) {
	t := p.t
	obj := objChain(name)
	st := p.flush.begin(t.fam, nfnl.MsgDelRule, 0, obj, h)
	p.flush.w.Str(nfnl.RuleTable, t.opts.Name)
	p.flush.w.Str(nfnl.RuleChain, name)
	p.flush.w.End(st)
	st = p.delChains.begin(t.fam, nfnl.MsgDelChain, 0, obj, h)
	c := nfnl.Chain{Table: t.opts.Name, Name: name}
	c.Append(&p.delChains.w, false)
	p.delChains.w.End(st)
	detail := ""
	if h == holdContent {
		detail = "to create it with its declared hook, priority and type"
	}
	p.note(&p.delChains, dataplane.WriteDelete, KindChain, name, detail)
	p.post = append(p.post, func(k *kstate) { delete(k.chains, name) })
}

// newChain creates a chain, with its rules unless it is created empty to
// stand in for content held back.
func (p *planner) newChain(name string, d *chainDecl, withRules bool) {
	t := p.t
	obj := objChain(name)
	h := holdContent
	if !withRules {
		h = holdDelete // its creation refused: it stays absent
	}
	st := p.newChains.begin(t.fam, nfnl.MsgNewChain, nfnl.FlagCreate, obj, h)
	c := nfnl.Chain{Table: t.opts.Name, Name: name}
	kc := &kchain{handles: true}
	if d.base != nil {
		pol := policyCode(d.base.policy)
		c.Hook = &nfnl.Hook{Num: d.base.num, Priority: d.base.priority}
		c.Type, c.Policy = d.base.typ, &pol
		kc.hook, kc.typ, kc.policy = c.Hook, c.Type, pol
	}
	c.Append(&p.newChains.w, false)
	p.newChains.w.End(st)
	if p.dry {
		detail := ""
		if !withRules {
			detail = "empty: its rules are held back"
		}
		p.note(&p.newChains, dataplane.WriteAdd, KindChain, chainText(name, d), detail)
	}
	if withRules {
		for i := range d.rules {
			p.newRule(name, &d.rules[i], 0, 0, true) // at the end, in order
			kc.rules = append(kc.rules, krule{hash: d.rules[i].hash})
		}
		kc.handles = len(d.rules) == 0
	}
	p.post = append(p.post, func(k *kstate) { k.chains[name] = kc })
}

// newRule adds a rule to chain: after the rule with handle after, or the
// one of this transaction with ID afterID, or at the top when appendAfter
// is false. It returns the new rule's ID.
func (p *planner) newRule(chain string, r *rendered, after uint64, afterID uint32, appendAfter bool) uint32 {
	t := p.t
	x := &p.newRules
	obj := objChain(chain)
	ids := make([]uint32, len(r.anon))
	for i, a := range r.anon {
		ids[i] = t.nextID()
		flags := uint32(nfnl.SetAnonymous | nfnl.SetConstant)
		if a.interval {
			flags |= nfnl.SetInterval
		}
		st := x.begin(t.fam, nfnl.MsgNewSet, nfnl.FlagCreate, obj, holdContent)
		s := nfnl.Set{Table: t.opts.Name, Name: "__set%d", Flags: flags, KeyType: a.keyType, KeyLen: a.keyLen, ID: ids[i]}
		s.Append(&x.w, false)
		x.w.End(st)
		st = x.begin(t.fam, nfnl.MsgNewSetElem, nfnl.FlagCreate, obj, holdContent)
		l := nfnl.ElemList{Table: t.opts.Name, Set: "__set%d", SetID: ids[i]}
		l.AppendHeader(&x.w)
		n := x.w.Open(nfnl.ElemListElems)
		x.w.Raw(a.elems)
		x.w.Close(n)
		x.w.End(st)
	}
	exprs := r.exprs
	if len(ids) > 0 {
		exprs = slices.Clone(exprs)
		for i, at := range r.idAt {
			binary.BigEndian.PutUint32(exprs[at:], ids[i])
		}
	}
	id := t.nextID()
	flags := uint16(nfnl.FlagCreate)
	if appendAfter {
		flags |= nfnl.FlagAppend
	}
	st := x.begin(t.fam, nfnl.MsgNewRule, flags, obj, holdContent)
	nr := nfnl.Rule{Table: t.opts.Name, Chain: chain, Position: after, Exprs: exprs, UserData: r.udata, ID: id}
	if after == 0 {
		nr.PositionID = afterID
	}
	nr.Append(&x.w)
	x.w.End(st)
	if p.dry {
		p.note(x, dataplane.WriteAdd, kindRule, chain+" "+ruleText(r.udata), "")
	}
	return id
}

// delRule deletes a rule by handle (its hash is "" for a rule not ours).
func (p *planner) delRule(chain string, handle uint64, hash string) {
	st := p.delRules.begin(p.t.fam, nfnl.MsgDelRule, 0, objChain(chain), holdContent)
	r := nfnl.Rule{Table: p.t.opts.Name, Chain: chain, Handle: handle}
	r.Append(&p.delRules.w)
	p.delRules.w.End(st)
	if p.dry {
		detail := "not ours"
		if hash != "" {
			detail = "hash " + hash
		}
		p.note(&p.delRules, dataplane.WriteDelete, kindRule, fmt.Sprintf("%s handle %d", chain, handle), detail)
	}
}

// diffRules writes the difference between a chain's kernel rules and its
// declared ones: the kernel rules that are in the declared order the
// longest stay (with their counters), the others go, and the missing ones
// are inserted at their places.
func (p *planner) diffRules(name string, d *chainDecl, kc *kchain) error {
	want := make(map[string]int, len(d.rules))
	for i := range d.rules {
		want[d.rules[i].hash] = i
	}
	for attempt := 0; ; attempt++ {
		seq := make([]int, len(kc.rules))
		used := make([]bool, len(d.rules))
		for j, r := range kc.rules {
			seq[j] = -1
			if i, ok := want[r.hash]; ok && r.hash != "" && !used[i] {
				seq[j], used[i] = i, true
			}
		}
		keep := lis(seq)
		kept := 0
		for _, k := range keep {
			if k {
				kept++
			}
		}
		if kept == len(d.rules) && kept == len(kc.rules) {
			return nil
		}
		// Handles of the kept rules, by declared index.
		handle := make([]uint64, len(d.rules))
		isKept := make([]bool, len(d.rules))
		needHandles := false
		for j, r := range kc.rules {
			if keep[j] {
				handle[seq[j]], isKept[seq[j]] = r.handle, true
			} else if r.handle == 0 {
				needHandles = true
			}
		}
		for i := 1; i < len(d.rules); i++ {
			if !isKept[i] && isKept[i-1] && handle[i-1] == 0 {
				needHandles = true
			}
		}
		if needHandles {
			if attempt > 0 {
				return fmt.Errorf("%w: rules of chain %s have no handles after a read", ErrRead, name)
			}
			rules, err := p.t.readChainRules(p.s, name)
			if err != nil {
				return err
			}
			kc.rules, kc.handles = rules, true
			continue
		}
		for j, r := range kc.rules {
			if !keep[j] {
				p.delRule(name, r.handle, r.hash)
			}
		}
		var ids []uint32
		if len(d.rules) > 0 {
			ids = make([]uint32, len(d.rules))
		}
		rules := make([]krule, len(d.rules))
		handles := true
		for i := range d.rules {
			rules[i] = krule{handle: handle[i], hash: d.rules[i].hash}
			if isKept[i] {
				continue
			}
			handles = false
			switch {
			case i == 0:
				ids[i] = p.newRule(name, &d.rules[i], 0, 0, false)
			case isKept[i-1]:
				ids[i] = p.newRule(name, &d.rules[i], handle[i-1], 0, true)
			default:
				ids[i] = p.newRule(name, &d.rules[i], 0, ids[i-1], true)
			}
		}
		p.post = append(p.post, func(k *kstate) {
			if c := k.chains[name]; c != nil {
				c.rules, c.handles = rules, handles
			}
		})
		return nil
	}
}

// lis marks a longest strictly increasing subsequence of the non-negative
// entries of seq.
func lis(seq []int) []bool {
	keep := make([]bool, len(seq))
	var tails []int // indices into seq of the smallest tail of each length
	prev := make([]int, len(seq))
	for j, v := range seq {
		if v < 0 {
			continue
		}
		k := sort.Search(len(tails), func(i int) bool { return seq[tails[i]] >= v })
		if k > 0 {
			prev[j] = tails[k-1]
		} else {
			prev[j] = -1
		}
		if k == len(tails) {
			tails = append(tails, j)
		} else {
			tails[k] = j
		}
	}
	if len(tails) == 0 {
		return keep
	}
	for j := tails[len(tails)-1]; j >= 0; j = prev[j] {
		keep[j] = true
	}
	return keep
}

// nextID returns a fresh ID for a set or rule of a transaction.
func (t *Table) nextID() uint32 {
	t.ids++
	if t.ids == 0 {
		t.ids = 1
	}
	return t.ids
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// objName splits an object key into kind and name for errors; elements
// are named by set and formatted key.
func (t *Table) objName(key string) (dataplane.ObjectKind, string) {
	kind, rest, _ := strings.Cut(key, "\x00")
	switch kind {
	case "c":
		return KindChain, rest
	case "s":
		return KindSet, rest
	}
	set, k, _ := strings.Cut(rest, "\x00")
	if d := t.sets[set]; d != nil {
		return KindElement, set + " " + d.spec.formatKey(k)
	}
	return KindElement, set + " " + fmt.Sprintf("%x", k)
}

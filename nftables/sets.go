package nftables

import (
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/netfilter"
)

// SetSets declares sets and verdict maps with their full content,
// replacing what was declared for them before; the next Apply writes only
// the elements that changed. A set whose shape (key, Interval, Verdict)
// changes is deleted and created anew by the next Apply, in the same
// transaction as the rules using it; a shape change of a set that declared
// rules use is refused (ErrSetInUse): change the rules first. Bad input (a
// name, a key type, an element that does not fit, an address of the other
// family) is an error and nothing changes.
func (t *Table) SetSets(sets ...Set) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	type change struct {
		name string
		d    *setDecl
	}
	var changes []change
	seen := map[string]bool{}
	for i := range sets {
		s := &sets[i]
		sp, err := newSpec(s, t.opts.Family)
		if err != nil {
			return err
		}
		if seen[s.Name] {
			return fmt.Errorf("%w: set %s", ErrDuplicate, s.Name)
		}
		seen[s.Name] = true
		if old := t.sets[s.Name]; old != nil && !old.spec.equal(&sp) {
			if users := t.setUsers(s.Name); len(users) > 0 {
				return fmt.Errorf("%w: %s changes shape while chains %v use it", ErrSetInUse, s.Name, users)
			}
		}
		d := &setDecl{spec: sp, elems: make(map[string]string, len(s.Elements))}
		var buf []byte
		for j, e := range s.Elements {
			var k, data string
			k, data, buf, err = t.encodeElement(&sp, s.Name, e, false, buf[:0])
			if err != nil {
				return fmt.Errorf("%w (element %d)", err, j)
			}
			d.elems[k] = data
		}
		if err := d.canonicalize(s.Name); err != nil {
			return err
		}
		changes = append(changes, change{s.Name, d})
	}
	for _, ch := range changes {
		old := t.sets[ch.name]
		if old != nil && old.spec.equal(&ch.d.spec) {
			t.updateElements(ch.name, old, ch.d.elems, ch.d.canon)
			continue
		}
		if old != nil {
			t.forgetElements(ch.name)
			if old.spec.verdict {
				t.countTargets(ch.name, old.written(), -1)
			}
		}
		ch.d.all = true
		t.sets[ch.name] = ch.d
		if ch.d.spec.verdict {
			t.countTargets(ch.name, ch.d.written(), 1)
		}
		t.setChanged(ch.name)
	}
	return nil
}

// setChanged records that a set (or its elements) changed.
func (t *Table) setChanged(name string) {
	t.changedSets[name] = struct{}{}
	t.retryNow(objSet(name))
	t.dirty = true
}

// forgetElements forgets the failures of a set's elements, when the set
// goes or is declared with another shape: the elements that failed are no
// longer declared.
func (t *Table) forgetElements(set string) {
	prefix := objElem(set, "")
	for obj := range t.held {
		if strings.HasPrefix(obj, prefix) {
			t.retryNow(obj)
		}
	}
}

// setUsers returns the declared chains whose rules use set name.
func (t *Table) setUsers(name string) []string {
	var users []string
	for cname, c := range t.chains {
		for i := range c.rules {
			r := &c.rules[i]
			if r.vmap == name || contains(r.sets, name) {
				users = append(users, cname)
				break
			}
		}
	}
	return users
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// encodeElement validates an element for a set and encodes it; keyOnly
// ignores the verdict (an element to delete). The key is encoded in buf
// (returned for the next element): the key string is its one allocation.
func (t *Table) encodeElement(sp *setSpec, set string, e Element, keyOnly bool, buf []byte) (key, data string, _ []byte, err error) {
	buf, err = sp.encodeKey(buf, e.Key)
	if err != nil {
		return "", "", buf, t.elemErr(set, e, err)
	}
	switch {
	case keyOnly:
	case sp.verdict:
		data, err = encodeVerdict(e.Verdict)
		if c := verdictChain(data); err == nil && c != "" {
			err = t.checkTarget(c)
		}
		if err != nil {
			return "", "", buf, t.elemErr(set, e, err)
		}
	case e.Verdict != nil:
		return "", "", buf, t.elemErr(set, e, fmt.Errorf("a verdict in a set that is not a verdict map"))
	}
	return string(buf), data, buf, nil
}

func (t *Table) elemErr(set string, e Element, err error) error {
	var b []byte
	for i, v := range e.Key {
		if i > 0 {
			b = append(b, " . "...)
		}
		b = append(b, v.String()...)
	}
	out := fmt.Errorf("%w %s %s: %s", ErrInvalidElement, set, b, err)
	var also []error
	for _, s := range []error{netfilter.ErrWrongFamily, netfilter.ErrInvalidChainName, ErrNotOwned} {
		if errors.Is(err, s) {
			also = append(also, s)
		}
	}
	return errs.Also(out, also...)
}

// canonicalize computes the written elements of a one-field interval set.
func (d *setDecl) canonicalize(name string) error {
	if !d.spec.interval || d.spec.concat() {
		d.canon = nil
		return nil
	}
	c, err := canonicalRanges(d.spec.klen, d.elems, !d.spec.verdict)
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrInvalidElement, name, err)
	}
	d.canon = c
	return nil
}

// updateElements makes set old hold elems (and, for a one-field interval
// set, the written canon), recording the keys that changed.
func (t *Table) updateElements(name string, old *setDecl, elems, canon map[string]string) {
	before := old.written()
	after := elems
	if canon != nil {
		after = canon
	}
	changed := false
	mark := func(k string) {
		if old.changed == nil {
			old.changed = map[string]struct{}{}
		}
		old.changed[k] = struct{}{}
		t.retryNow(objElem(name, k))
		changed = true
	}
	for k, d := range after {
		if b, ok := before[k]; !ok || b != d {
			mark(k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			mark(k)
		}
	}
	if !changed {
		old.elems = elems
		old.canon = canon
		return
	}
	if old.spec.verdict {
		t.countTargets(name, before, -1)
		t.countTargets(name, after, 1)
	}
	old.elems, old.canon = elems, canon
	t.setChanged(name)
}

// countTargets adds delta to the count of verdict-map elements that jump
// to each chain of elems, elements of set; a chain that gains its first
// or loses its last such element changes what is programmed, and a map
// that starts jumping to a chain adds jumps from the chains that dispatch
// through it.
func (t *Table) countTargets(set string, elems map[string]string, delta int) {
	for _, d := range elems {
		c := verdictChain(d)
		if c == "" {
			continue
		}
		n := t.vmapTargets[c] + delta
		if n <= 0 {
			delete(t.vmapTargets, c)
		} else {
			t.vmapTargets[c] = n
		}
		m := t.mapTargets[set]
		if m == nil {
			m = map[string]int{}
			t.mapTargets[set] = m
		}
		pm := m[c] + delta
		if pm <= 0 {
			delete(m, c)
			if len(m) == 0 {
				delete(t.mapTargets, set)
			}
		} else {
			m[c] = pm
		}
		if !t.regular(c) {
			// An element that cannot be written comes or goes.
			t.structChanged, t.needWalk = true, true
		}
		if n <= 0 || n == delta {
			t.rootsChanged[c] = struct{}{}
			t.structChanged = true
		}
		switch {
		case pm == delta && delta > 0:
			t.newMapEdges = append(t.newMapEdges, mapEdge{set, c})
			t.structChanged = true
		case pm <= 0:
			t.structChanged = true // a loop through it may be gone
		}
	}
}

// RemoveSets forgets sets and verdict maps: the next Apply deletes them.
// Names not declared are ignored. A set that declared rules use is an
// error (ErrSetInUse) and nothing changes.
func (t *Table) RemoveSets(names ...string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range names {
		if users := t.setUsers(n); len(users) > 0 {
			return fmt.Errorf("%w: %s is used by chains %v", ErrSetInUse, n, users)
		}
	}
	for _, n := range names {
		if d, ok := t.sets[n]; ok {
			t.forgetElements(n)
			t.countTargets(n, d.written(), -1)
			delete(t.sets, n)
			t.structChanged = true
			t.setChanged(n)
		}
	}
	return nil
}

// AddElements adds elements to a declared set or verdict map (an element
// already there takes the new verdict); the next Apply writes only them.
// A set not declared is ErrUnknownSet; an element that does not fit is an
// error and nothing changes.
func (t *Table) AddElements(set string, elems ...Element) error {
	return t.changeElements(set, elems, true)
}

// DeleteElements removes elements (by key; verdicts are ignored) from a
// declared set or verdict map; keys not in it are ignored.
func (t *Table) DeleteElements(set string, elems ...Element) error {
	return t.changeElements(set, elems, false)
}

func (t *Table) changeElements(set string, elems []Element, add bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.sets[set]
	if d == nil {
		return fmt.Errorf("%w %q", ErrUnknownSet, set)
	}
	type kv struct{ k, d string }
	enc := make([]kv, 0, len(elems))
	var buf []byte
	for i, e := range elems {
		var k, data string
		var err error
		k, data, buf, err = t.encodeElement(&d.spec, set, e, !add, buf[:0])
		if err != nil {
			return fmt.Errorf("%w (element %d)", err, i)
		}
		enc = append(enc, kv{k, data})
	}
	if d.canon != nil {
		// A one-field interval set: merge again.
		nd := &setDecl{spec: d.spec, elems: maps.Clone(d.elems)}
		for _, e := range enc {
			if add {
				nd.elems[e.k] = e.d
			} else {
				delete(nd.elems, e.k)
			}
		}
		if err := nd.canonicalize(set); err != nil {
			return err
		}
		t.updateElements(set, d, nd.elems, nd.canon)
		return nil
	}
	changed := false
	for _, e := range enc {
		old, ok := d.elems[e.k]
		switch {
		case add && (!ok || old != e.d):
			if d.spec.verdict {
				if ok {
					t.countTargets(set, map[string]string{e.k: old}, -1)
				}
				t.countTargets(set, map[string]string{e.k: e.d}, 1)
			}
			d.elems[e.k] = e.d
		case !add && ok:
			if d.spec.verdict {
				t.countTargets(set, map[string]string{e.k: old}, -1)
			}
			delete(d.elems, e.k)
		default:
			continue
		}
		if d.changed == nil {
			d.changed = map[string]struct{}{}
		}
		d.changed[e.k] = struct{}{}
		t.retryNow(objElem(set, e.k))
		changed = true
	}
	if changed {
		t.setChanged(set)
	}
	return nil
}

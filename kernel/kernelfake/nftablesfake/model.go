package nftablesfake

import (
	"bytes"
	"maps"
	"slices"
	"syscall"

	"github.com/google/nftables/userdata"

	"github.com/nodeplane/nodeplane/internal/nfnl"
)

// tkey names a table: family and name.
type tkey struct {
	family uint8
	name   string
}

// state is the whole of one namespace's nf_tables: what a transaction
// works on a copy of.
type state struct {
	tables map[tkey]*table
	order  []tkey // creation order
}

type table struct {
	name   string
	family uint8
	flags  uint32
	handle uint64
	chains []*chain // creation order
	sets   []*set   // creation order
}

type chain struct {
	name   string
	handle uint64
	hook   *nfnl.Hook
	typ    string
	policy uint32
	rules  []*rule
}

type rule struct {
	handle uint64
	exprs  []byte
	udata  []byte
	// jumps are the chains its verdicts jump or go to; sets the named sets
	// it looks up; anon its anonymous sets.
	jumps []string
	sets  []string
	anon  []string
}

type set struct {
	name   string
	handle uint64
	nl     nfnl.Set
	anon   bool
	// elems by ekey (key, key end and interval-end flag).
	elems map[string]*elem
}

type elem struct {
	key, keyEnd []byte
	flags       uint32
	data        []byte
	verdict     *nfnl.Verdict
}

// ekey is an element's identity in its set.
func ekey(e *nfnl.Elem) string {
	k := string(e.Key) + "\x00" + string(e.KeyEnd)
	if e.Flags&nfnl.ElemIntervalEnd != 0 {
		k += "\x01"
	}
	return k
}

func newState() *state { return &state{tables: map[tkey]*table{}} }

// clone returns a copy of s whose tables can be changed without touching
// s: tables, chains, sets and element maps are copied; rules, which a
// transaction never changes in place, are shared.
func (s *state) clone() *state {
	c := &state{tables: make(map[tkey]*table, len(s.tables)), order: slices.Clone(s.order)}
	for k, t := range s.tables {
		c.tables[k] = t.clone()
	}
	return c
}

func (t *table) clone() *table {
	c := *t
	c.chains = make([]*chain, len(t.chains))
	for i, ch := range t.chains {
		cc := *ch
		cc.rules = slices.Clone(ch.rules)
		c.chains[i] = &cc
	}
	c.sets = make([]*set, len(t.sets))
	for i, st := range t.sets {
		cs := *st
		cs.elems = maps.Clone(st.elems)
		c.sets[i] = &cs
	}
	return &c
}

// table returns the table family name, or nil.
func (s *state) table(family uint8, name string) *table { return s.tables[tkey{family, name}] }

// addTable creates table family name in s with the namespace's next table
// handle.
func (n *Namespace) addTable(s *state, family uint8, name string, flags uint32) {
	n.tableHandle++
	k := tkey{family, name}
	s.tables[k] = &table{name: name, family: family, flags: flags, handle: n.tableHandle}
	s.order = append(s.order, k)
}

// deleteTable deletes table k and everything in it.
func (s *state) deleteTable(k tkey) {
	delete(s.tables, k)
	s.order = slices.DeleteFunc(s.order, func(x tkey) bool { return x == k })
}

func (t *table) chain(name string) *chain {
	for _, c := range t.chains {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (t *table) set(name string) *set {
	for _, s := range t.sets {
		if s.name == name {
			return s
		}
	}
	return nil
}

// chainUse counts the references to a chain: jumps of rules and verdicts
// of map elements.
func (t *table) chainUse(name string) int {
	n := 0
	for _, c := range t.chains {
		for _, r := range c.rules {
			for _, j := range r.jumps {
				if j == name {
					n++
				}
			}
		}
	}
	for _, s := range t.sets {
		for _, e := range s.elems {
			if e.verdict != nil && e.verdict.Chain == name {
				n++
			}
		}
	}
	return n
}

// setUse counts the rules that look a set up.
func (t *table) setUse(name string) int {
	n := 0
	for _, c := range t.chains {
		for _, r := range c.rules {
			n += count(r.sets, name) + count(r.anon, name)
		}
	}
	return n
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// removeRule drops a rule and its anonymous sets.
func (t *table) removeRule(c *chain, i int) {
	r := c.rules[i]
	c.rules = slices.Delete(c.rules, i, i+1)
	for _, a := range r.anon {
		t.sets = slices.DeleteFunc(t.sets, func(s *set) bool { return s.name == a })
	}
}

// deleteChain flushes chain i, then deletes it unless something still
// jumps to it (EBUSY; the chain is left flushed).
func (t *table) deleteChain(i int) syscall.Errno {
	c := t.chains[i]
	for len(c.rules) > 0 {
		t.removeRule(c, len(c.rules)-1)
	}
	if t.chainUse(c.name) > 0 {
		return syscall.EBUSY
	}
	t.chains = slices.Delete(t.chains, i, i+1)
	return 0
}

// deleteSet deletes set i unless a rule looks it up (EBUSY).
func (t *table) deleteSet(i int) syscall.Errno {
	if t.setUse(t.sets[i].name) > 0 {
		return syscall.EBUSY
	}
	t.sets = slices.Delete(t.sets, i, i+1)
	return 0
}

// jumpTarget reports whether a verdict may jump or go to chain name: it
// must exist (ENOENT) and be a regular chain (EOPNOTSUPP).
func (t *table) jumpTarget(name string) syscall.Errno {
	switch c := t.chain(name); {
	case c == nil:
		return syscall.ENOENT
	case c.hook != nil:
		return syscall.EOPNOTSUPP
	}
	return 0
}

// comment returns a rule's comment (from its user data), or "".
func (r *rule) comment() string {
	c, _ := userdata.GetString(r.udata, userdata.TypeComment)
	return c
}

// hookOK reports whether a base chain of type typ may sit at hook num with
// priority prio, as the kernel checks it.
func hookOK(typ string, num uint32, prio int32) syscall.Errno {
	switch typ {
	case "filter":
		return 0
	case "nat":
		if num == nfnl.HookForward {
			return syscall.EOPNOTSUPP
		}
		if prio <= -200 {
			return syscall.EOPNOTSUPP
		}
		return 0
	case "route":
		if num != nfnl.HookOutput {
			return syscall.EOPNOTSUPP
		}
		return 0
	}
	return syscall.ENOENT
}

// policyOK checks a chain request's policy (nil when it has none) for a
// base chain (base) or a regular one, which takes none (EOPNOTSUPP).
func policyOK(policy *uint32, base bool) syscall.Errno {
	switch {
	case policy == nil:
		return 0
	case !base:
		return syscall.EOPNOTSUPP
	case *policy > nfnl.PolicyAccept:
		return syscall.EINVAL
	}
	return 0
}

// sameShape reports whether a new set's attributes match an existing one.
func sameShape(a, b *nfnl.Set) bool {
	return a.Flags == b.Flags && a.KeyLen == b.KeyLen && a.KeyType == b.KeyType &&
		a.DataType == b.DataType && slices.Equal(a.Fields, b.Fields)
}

// elemsSorted returns a set's elements in key order.
func (s *set) elemsSorted() []*elem {
	out := slices.Collect(maps.Values(s.elems))
	slices.SortFunc(out, func(a, b *elem) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		if c := bytes.Compare(a.keyEnd, b.keyEnd); c != 0 {
			return c
		}
		return int(a.flags) - int(b.flags)
	})
	return out
}

package nftablesfake

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"

	"github.com/nodeplane/nodeplane/internal/nfnl"
)

// Families of tables, as the Admin and inspection methods take them.
const (
	// IPv4 is the ip family.
	IPv4 uint8 = nfnl.FamilyIPv4
	// IPv6 is the ip6 family.
	IPv6 uint8 = nfnl.FamilyIPv6
)

// Rule is a rule as Rules shows it.
type Rule struct {
	// Handle is the kernel's handle of the rule.
	Handle uint64
	// Comment is the rule's comment (from its user data).
	Comment string
	// Jumps are the chains its verdicts jump or go to; Sets the named sets
	// it looks up.
	Jumps, Sets []string
}

// Chain is a chain as Chains shows it.
type Chain struct {
	// Name is the chain's name.
	Name string
	// Base is set for a base chain, with its Hook number, Priority, Type
	// and Policy (0 drop, 1 accept).
	Base     bool
	Hook     uint32
	Priority int32
	Type     string
	Policy   uint32
	// Rules are its rules, in order.
	Rules []Rule
}

// Tables lists the tables of a family (0: every family) as "ip NAME" or
// "ip6 NAME", in creation order.
func (n *Namespace) Tables(family uint8) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, k := range n.st.order {
		if family == 0 || k.family == family {
			out = append(out, familyName(k.family)+" "+k.name)
		}
	}
	return out
}

func familyName(f uint8) string {
	switch f {
	case nfnl.FamilyIPv4:
		return "ip"
	case nfnl.FamilyIPv6:
		return "ip6"
	case nfnl.FamilyINet:
		return "inet"
	}
	return fmt.Sprintf("family%d", f)
}

// Chains returns the chains of a table in creation order, or nil when it
// does not exist.
func (n *Namespace) Chains(family uint8, table string) []Chain {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.st.table(family, table)
	if t == nil {
		return nil
	}
	out := make([]Chain, 0, len(t.chains))
	for _, c := range t.chains {
		ch := Chain{Name: c.name}
		if c.hook != nil {
			ch.Base, ch.Hook, ch.Priority, ch.Type, ch.Policy = true, c.hook.Num, c.hook.Priority, c.typ, c.policy
		}
		for _, r := range c.rules {
			ch.Rules = append(ch.Rules, Rule{Handle: r.handle, Comment: r.comment(), Jumps: slices.Clone(r.jumps), Sets: slices.Clone(r.sets)})
		}
		out = append(out, ch)
	}
	return out
}

// Sets returns the names of a table's named sets, in creation order.
func (n *Namespace) Sets(family uint8, table string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.st.table(family, table)
	if t == nil {
		return nil
	}
	var out []string
	for _, s := range t.sets {
		if !s.anon {
			out = append(out, s.name)
		}
	}
	return out
}

// Elements returns a set's elements, formatted as nft prints them when
// the set's type is known ("10.0.0.1 . tcp . 80 : goto svc"; a one-field
// interval set's raw bounds as "10.0.0.0" and "11.0.0.0 [end]"), sorted.
func (n *Namespace) Elements(family uint8, table, set string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.st.table(family, table)
	if t == nil {
		return nil
	}
	s := t.set(set)
	if s == nil {
		return nil
	}
	var out []string
	for _, e := range s.elemsSorted() {
		out = append(out, formatElem(s, e))
	}
	return out
}

// formatElem formats an element for Elements and Dump.
func formatElem(s *set, e *elem) string {
	text := formatKey(s, e.key)
	if e.keyEnd != nil {
		text += "-" + formatKey(s, e.keyEnd)
	}
	if e.flags&nfnl.ElemIntervalEnd != 0 {
		text += " [end]"
	}
	if v := e.verdict; v != nil {
		text += " : " + v.String()
	} else if e.data != nil {
		text += fmt.Sprintf(" : %x", e.data)
	}
	return text
}

// formatKey formats a key by the set's key type: the concatenated types
// of nft's datatypes (address, protocol, port, mark, interface), else hex.
func formatKey(s *set, k []byte) string {
	var types []uint32
	for t := s.nl.KeyType; t != 0; t >>= nfnl.TypeBits {
		types = append([]uint32{t & (1<<nfnl.TypeBits - 1)}, types...)
	}
	concat := len(s.nl.Fields) > 1
	var parts []string
	off := 0
	for _, t := range types {
		var n int
		switch t {
		case nfnl.DataTypeIPv4, nfnl.DataTypeMark:
			n = 4
		case nfnl.DataTypeIPv6, nfnl.DataTypeIfname:
			n = 16
		case nfnl.DataTypeProto:
			n = 1
		case nfnl.DataTypePort:
			n = 2
		default:
			return fmt.Sprintf("%x", k)
		}
		if off+n > len(k) {
			return fmt.Sprintf("%x", k)
		}
		f := k[off : off+n]
		switch t {
		case nfnl.DataTypeIPv4, nfnl.DataTypeIPv6:
			a, _ := netip.AddrFromSlice(f)
			parts = append(parts, a.String())
		case nfnl.DataTypeMark:
			parts = append(parts, fmt.Sprintf("0x%08x", binary.NativeEndian.Uint32(f)))
		case nfnl.DataTypeIfname:
			parts = append(parts, fmt.Sprintf("%q", strings.TrimRight(string(f), "\x00")))
		case nfnl.DataTypeProto:
			switch f[0] {
			case 6:
				parts = append(parts, "tcp")
			case 17:
				parts = append(parts, "udp")
			default:
				parts = append(parts, fmt.Sprint(f[0]))
			}
		case nfnl.DataTypePort:
			parts = append(parts, fmt.Sprint(binary.BigEndian.Uint16(f)))
		}
		if concat {
			n = (n + 3) &^ 3
		}
		off += n
	}
	return strings.Join(parts, " . ")
}

// Dump returns every table as text, for test failure messages and golden
// tests: tables in creation order, each with its sets (and elements) and
// chains (hook, priority, type, policy) with their rules by handle,
// comment, jumps and sets.
func (n *Namespace) Dump() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var b strings.Builder
	for _, k := range n.st.order {
		t := n.st.tables[k]
		fmt.Fprintf(&b, "table %s %s", familyName(k.family), k.name)
		if t.flags != 0 {
			fmt.Fprintf(&b, " flags %#x", t.flags)
		}
		b.WriteString("\n")
		for _, s := range t.sets {
			if s.anon {
				continue
			}
			fmt.Fprintf(&b, "  set %s flags %#x keylen %d\n", s.name, s.nl.Flags, s.nl.KeyLen)
			for _, e := range s.elemsSorted() {
				fmt.Fprintf(&b, "    %s\n", formatElem(s, e))
			}
		}
		for _, c := range t.chains {
			fmt.Fprintf(&b, "  chain %s", c.name)
			if c.hook != nil {
				pol := "accept"
				if c.policy == nfnl.PolicyDrop {
					pol = "drop"
				}
				fmt.Fprintf(&b, " { type %s hook %d priority %d policy %s }", c.typ, c.hook.Num, c.hook.Priority, pol)
			}
			b.WriteString("\n")
			for _, r := range c.rules {
				fmt.Fprintf(&b, "    [%d]", r.handle)
				for _, j := range r.jumps {
					fmt.Fprintf(&b, " jump %s", j)
				}
				for _, s := range r.sets {
					fmt.Fprintf(&b, " @%s", s)
				}
				if len(r.anon) > 0 {
					fmt.Fprintf(&b, " anonymous sets %d", len(r.anon))
				}
				fmt.Fprintf(&b, " %q\n", r.comment())
			}
		}
	}
	return b.String()
}

// Admin is a view of the namespace for changes made behind the Table's
// back, as an administrator or another agent would make them: each is a
// committed transaction of its own (the generation grows), neither counted
// nor refused by the failure hooks.
type Admin struct{ n *Namespace }

// Admin returns the namespace's Admin view.
func (n *Namespace) Admin() Admin { return Admin{n} }

// change runs fn on a copy of the state and commits it when fn succeeds.
func (a Admin) change(fn func(s *state) error) error {
	n := a.n
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.st.clone()
	if err := fn(s); err != nil {
		return err
	}
	n.st = s
	n.gen++
	return nil
}

func (a Admin) table(s *state, family uint8, name string) (*table, error) {
	t := s.table(family, name)
	if t == nil {
		return nil, fmt.Errorf("nftablesfake: no table %s %s: %w", familyName(family), name, syscall.ENOENT)
	}
	return t, nil
}

// AddTable creates a table (another agent's) if it does not exist.
func (a Admin) AddTable(family uint8, name string) error {
	return a.change(func(s *state) error {
		if s.table(family, name) == nil {
			a.n.addTable(s, family, name, 0)
		}
		return nil
	})
}

// DeleteTable deletes a table and everything in it.
func (a Admin) DeleteTable(family uint8, name string) error {
	return a.change(func(s *state) error {
		if _, err := a.table(s, family, name); err != nil {
			return err
		}
		s.deleteTable(tkey{family, name})
		return nil
	})
}

// SetTableFlags sets a table's flags (1: dormant).
func (a Admin) SetTableFlags(family uint8, name string, flags uint32) error {
	return a.change(func(s *state) error {
		t, err := a.table(s, family, name)
		if err != nil {
			return err
		}
		t.flags = flags
		return nil
	})
}

// AddChain adds a regular chain.
func (a Admin) AddChain(family uint8, table, name string) error {
	return a.addChain(family, table, &chain{name: name})
}

// AddBaseChain adds a base chain of type typ ("filter", "nat", "route") at
// hook (nfnl.HookInput…) with priority and the accept policy.
func (a Admin) AddBaseChain(family uint8, table, name, typ string, hook uint32, priority int32) error {
	return a.addChain(family, table, &chain{name: name, typ: typ, hook: &nfnl.Hook{Num: hook, Priority: priority}, policy: nfnl.PolicyAccept})
}

func (a Admin) addChain(family uint8, table string, c *chain) error {
	return a.change(func(s *state) error {
		t, err := a.table(s, family, table)
		if err != nil {
			return err
		}
		if t.chain(c.name) != nil {
			return fmt.Errorf("nftablesfake: chain %s exists: %w", c.name, syscall.EEXIST)
		}
		c.handle = a.n.hgenNext(t.handle)
		t.chains = append(t.chains, c)
		return nil
	})
}

// DeleteChain deletes a chain and its rules, as `nft delete chain` does
// after a flush; a chain something jumps to is EBUSY.
func (a Admin) DeleteChain(family uint8, table, name string) error {
	return a.change(func(s *state) error {
		t, err := a.table(s, family, table)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(t.chains, func(c *chain) bool { return c.name == name })
		if i < 0 {
			return fmt.Errorf("nftablesfake: no chain %s: %w", name, syscall.ENOENT)
		}
		if e := t.deleteChain(i); e != 0 {
			return fmt.Errorf("nftablesfake: chain %s in use: %w", name, e)
		}
		return nil
	})
}

// AddRule appends a rule that accepts every packet, with comment, to a
// chain (a foreign rule).
func (a Admin) AddRule(family uint8, table, chain, comment string) error {
	return a.addRule(family, table, chain, "", comment)
}

// AddJumpRule appends a rule that jumps to chain target of the same table,
// with comment, to a chain (a foreign rule): target cannot be deleted
// while it stands (EBUSY).
func (a Admin) AddJumpRule(family uint8, table, chain, target, comment string) error {
	return a.addRule(family, table, chain, target, comment)
}

// addRule appends a foreign rule that jumps to target, or accepts for "".
func (a Admin) addRule(family uint8, table, chain, target, comment string) error {
	return a.change(func(s *state) error {
		t, err := a.table(s, family, table)
		if err != nil {
			return err
		}
		c := t.chain(chain)
		if c == nil {
			return fmt.Errorf("nftablesfake: no chain %s: %w", chain, syscall.ENOENT)
		}
		var w nfnl.Writer
		r := &rule{handle: a.n.hgenNext(t.handle)}
		if target == "" {
			appendVerdictExpr(&w, nfnl.VerdictAccept, "")
		} else {
			if t.chain(target) == nil {
				return fmt.Errorf("nftablesfake: no chain %s: %w", target, syscall.ENOENT)
			}
			appendVerdictExpr(&w, nfnl.VerdictJump, target)
			r.jumps = []string{target}
		}
		r.exprs = w.B
		if comment != "" {
			r.udata = commentData(comment)
		}
		c.rules = append(c.rules, r)
		return nil
	})
}

// appendVerdictExpr appends an immediate expression that sets the verdict
// code (jumping or going to chain, for a jump or goto).
func appendVerdictExpr(w *nfnl.Writer, code int32, chain string) {
	n := w.Open(nfnl.ListElem)
	w.Str(nfnl.ExprName, "immediate")
	d := w.Open(nfnl.ExprData)
	w.U32(nfnl.ImmediateDreg, nfnl.RegVerdict)
	data := w.Open(nfnl.ImmediateData)
	v := w.Open(nfnl.DataVerdict)
	w.U32(nfnl.VerdictCode, uint32(code))
	if chain != "" {
		w.Str(nfnl.VerdictChain, chain)
	}
	w.Close(v)
	w.Close(data)
	w.Close(d)
	w.Close(n)
}

// commentData is a rule's user data holding comment, as nft writes it.
func commentData(comment string) []byte {
	udata := append([]byte{0, byte(len(comment) + 1)}, comment...)
	return append(udata, 0)
}

// DeleteRule deletes the rule at index i (0-based) of a chain.
func (a Admin) DeleteRule(family uint8, table, chain string, i int) error {
	return a.change(func(s *state) error {
		t, err := a.table(s, family, table)
		if err != nil {
			return err
		}
		c := t.chain(chain)
		if c == nil || i < 0 || i >= len(c.rules) {
			return fmt.Errorf("nftablesfake: no rule %d in chain %s: %w", i, chain, syscall.ENOENT)
		}
		t.removeRule(c, i)
		return nil
	})
}

// DeleteElement deletes the i-th element (0-based, in Elements' order) of
// a set.
func (a Admin) DeleteElement(family uint8, table, set string, i int) error {
	return a.change(func(s *state) error {
		t, err := a.table(s, family, table)
		if err != nil {
			return err
		}
		st := t.set(set)
		if st == nil {
			return fmt.Errorf("nftablesfake: no set %s: %w", set, syscall.ENOENT)
		}
		es := st.elemsSorted()
		if i < 0 || i >= len(es) {
			return fmt.Errorf("nftablesfake: no element %d in set %s: %w", i, set, syscall.ENOENT)
		}
		for k, e := range st.elems {
			if e == es[i] {
				delete(st.elems, k)
			}
		}
		return nil
	})
}

// DeleteSet deletes a set that no rule uses.
func (a Admin) DeleteSet(family uint8, table, name string) error {
	return a.change(func(s *state) error {
		t, err := a.table(s, family, table)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(t.sets, func(x *set) bool { return x.name == name })
		if i < 0 {
			return fmt.Errorf("nftablesfake: no set %s: %w", name, syscall.ENOENT)
		}
		if e := t.deleteSet(i); e != 0 {
			return fmt.Errorf("nftablesfake: set %s in use: %w", name, e)
		}
		return nil
	})
}

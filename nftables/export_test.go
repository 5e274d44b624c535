package nftables

import "fmt"

// OpenSocket opens a socket as a Table does, for the tests of package
// nftables_test.
var OpenSocket = openSocket

// PendingAfterRead reads the kernel as a restarted Table would and returns
// how many requests the Table would write to make it match the declared
// state (0: it matches), and an error for objects that cannot be written.
func PendingAfterRead(t *Table) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.socket()
	if err != nil {
		return 0, err
	}
	k, err := t.read(s)
	if err != nil {
		return 0, err
	}
	prog, _, broken := t.programmed()
	now := t.opts.Clock.Now()
	p := &planner{t: t, s: s, k: k, holds: t.holds(broken, true), probe: map[string]bool{}, prog: prog, full: true, now: now}
	main, chunks, err := p.plan()
	if err != nil {
		return 0, err
	}
	n := len(main.msgs)
	for _, c := range chunks {
		n += len(p.elemTxn(c).msgs)
	}
	if len(broken) > 0 {
		return n, fmt.Errorf("objects that cannot be written: %v", broken)
	}
	return n, nil
}

// CheckProgrammed compares the Table's view of what is programmed and of
// the objects that cannot be written, as its last plan left it, with a
// walk of the whole declared state.
func CheckProgrammed(t *Table) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	prog, refs, broken := t.programmed()
	for n, c := range refs {
		if prog[n] && t.refs[n] != c {
			return fmt.Errorf("chain %s: %d rules of programmed chains jump to it, the Table counts %d", n, c, t.refs[n])
		}
	}
	chains, rules := 0, 0
	for n := range prog {
		if c := t.chains[n]; c != nil {
			chains++
			rules += len(c.rules)
		}
	}
	if st := t.WorkStats(); st.Chains != chains || st.Rules != rules {
		return fmt.Errorf("Stats counts %d chains and %d rules, the programmed chains have %d and %d", st.Chains, st.Rules, chains, rules)
	}
	for n := range prog {
		if !t.prog[n] {
			return fmt.Errorf("chain %s is programmed but the Table does not know it", n)
		}
	}
	for n := range t.prog {
		if !prog[n] {
			return fmt.Errorf("the Table programs chain %s, which nothing reaches", n)
		}
	}
	for o, e := range broken {
		if t.broken[o] == nil {
			return fmt.Errorf("%v: the Table does not know", e)
		}
	}
	for o, e := range t.broken {
		if broken[o] == nil {
			return fmt.Errorf("%v: the Table holds it, a full walk does not", e)
		}
	}
	return nil
}

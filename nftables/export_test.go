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
	prog, broken := t.programmed()
	now := t.opts.Clock.Now()
	p := &planner{t: t, s: s, k: k, holds: t.holds(now, broken), probe: map[string]bool{}, prog: prog, full: true, now: now}
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

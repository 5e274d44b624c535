// Size: an in-memory nf_tables: one transaction engine for tables, chains, rules, sets and elements, with the kernel's checks.

package nftablesfake

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/kernel"
)

// Namespace is an in-memory nf_tables of one network namespace, for tests:
// it implements kernel.NFTables and answers a Table's netlink conversation
// as the kernel does. kernelfake.Namespace holds one (its NFTables). It is safe for
// concurrent use.
type Namespace struct {
	mu  sync.Mutex
	st  *state
	gen uint32
	// tableHandle and hgen allocate handles as the kernel does: tables from
	// one counter, everything in a table from the table's own, never given
	// back when a transaction aborts.
	tableHandle uint64
	hgen        map[uint64]uint64

	failTx    int
	failTxErr syscall.Errno
	failDumps int
	refuse    func(Request) syscall.Errno

	transactions, committed, requests, dumps int
	queueLimit                               int
}

// New returns an empty namespace: no tables.
func New() *Namespace {
	return &Namespace{st: newState(), hgen: map[uint64]uint64{}, gen: 1, queueLimit: 4 << 20}
}

var _ kernel.NFTables = (*Namespace)(nil)

// OpenNFTablesSocket returns a socket to the fake's nf_tables.
func (n *Namespace) OpenNFTablesSocket() (kernel.NFTablesSocket, error) {
	return &socket{n: n}, nil
}

// Request describes one request of a transaction (or one element of an
// element request) to a Refuse hook.
type Request struct {
	// Op is the request: "newtable", "deltable", "newchain", "delchain",
	// "newrule", "delrule", "newset", "delset", "newsetelem" or
	// "delsetelem".
	Op string
	// Family is the table's family (2 for ip, 10 for ip6).
	Family uint8
	// Table, Chain and Set name what the request is about, where it has
	// them.
	Table, Chain, Set string
	// Comment is a new rule's comment (its user data).
	Comment string
	// Key is an element's key (element requests are asked about one
	// element at a time).
	Key []byte
}

// Refuse makes every request (and every element of an element request)
// for which fn returns an errno fail with it, as the kernel refuses what
// it does not take; the transaction then aborts as a whole, and the
// refusal names the request (and the element). Nil removes the hook.
func (n *Namespace) Refuse(fn func(Request) syscall.Errno) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.refuse = fn
}

// FailTransactions makes the next count transactions fail as a whole with
// errno (EIO when 0), the failure naming no request of the transaction.
func (n *Namespace) FailTransactions(count int, errno syscall.Errno) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if errno == 0 {
		errno = syscall.EIO
	}
	n.failTx, n.failTxErr = count, errno
}

// FailDumps makes the next count dump requests fail with EIO.
func (n *Namespace) FailDumps(count int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failDumps = count
}

// Counts says how many transactions were sent, how many the fake
// committed, how many requests they carried (committed or not) and how
// many dumps were asked for, since New or ResetCounts.
func (n *Namespace) Counts() (transactions, committed, requests, dumps int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.transactions, n.committed, n.requests, n.dumps
}

// ResetCounts sets the counts to zero.
func (n *Namespace) ResetCounts() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.transactions, n.committed, n.requests, n.dumps = 0, 0, 0, 0
}

// Generation returns the ruleset generation: it grows by one with every
// committed transaction (and every Admin change).
func (n *Namespace) Generation() uint32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.gen
}

// socket is a fake NETLINK_NETFILTER socket.
type socket struct {
	n        *Namespace
	mu       sync.Mutex
	queue    [][]byte
	queued   int
	overflow bool
	closed   bool
}

func (s *socket) Send(b []byte) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("nftablesfake: send on a closed socket: %w", syscall.EBADF)
	}
	out, err := s.n.serve(b)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range out {
		if s.queued+len(d) > s.n.limit() {
			s.overflow = true
			continue
		}
		s.queue = append(s.queue, d)
		s.queued += len(d)
	}
	return nil
}

func (n *Namespace) limit() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.queueLimit
}

// SetQueueLimit sets how many bytes of answers a socket queues before the
// rest are lost (the receive queue overflows: the next Receive fails with
// ENOBUFS). The default is 4 MiB.
func (n *Namespace) SetQueueLimit(bytes int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.queueLimit = bytes
}

func (s *socket) Receive(b []byte, block bool) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overflow {
		s.overflow = false
		return 0, fmt.Errorf("nftablesfake: answers lost: %w", syscall.ENOBUFS)
	}
	if len(s.queue) == 0 {
		if block {
			return 0, fmt.Errorf("nftablesfake: receive would block for ever: %w", syscall.EAGAIN)
		}
		return 0, nil
	}
	d := s.queue[0]
	s.queue = s.queue[1:]
	s.queued -= len(d)
	if len(d) > len(b) {
		return 0, fmt.Errorf("nftablesfake: datagram of %d bytes truncated to %d", len(d), len(b))
	}
	return copy(b, d), nil
}

func (s *socket) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// maxDatagram is how much a dump packs into one datagram.
const maxDatagram = 32 << 10

// serve processes one datagram and returns the datagrams of answers.
func (n *Namespace) serve(b []byte) ([][]byte, error) {
	var msgs []nfnl.Msg
	if err := nfnl.ForEachMsg(b, func(m *nfnl.Msg) error {
		msgs = append(msgs, *m)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("nftablesfake: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var out [][]byte
	var w nfnl.Writer
	for i := 0; i < len(msgs); i++ {
		m := &msgs[i]
		if m.Type == nfnl.BatchBegin {
			j := i + 1
			for j < len(msgs) && msgs[j].Type != nfnl.BatchEnd {
				j++
			}
			if j == len(msgs) {
				return nil, fmt.Errorf("nftablesfake: batch without end")
			}
			w.Reset()
			n.transaction(&w, m, msgs[i+1:j])
			if w.Len() > 0 {
				out = append(out, slices.Clone(w.B))
			}
			i = j
			continue
		}
		out = append(out, n.query(m)...)
	}
	return out, nil
}

// txState is a transaction in progress.
type txState struct {
	st      *state
	setIDs  map[uint32]string // per table: IDs of new sets
	ruleIDs map[uint32]*rule
	// mutated: the transaction changes something (the kernel commits, and
	// the generation moves, only then).
	mutated bool
	req     int
	// anon are the anonymous sets it created, with the request that did.
	anon []anonNew
}

type anonNew struct {
	table tkey
	name  string
	req   int
}

// transaction processes one batch; refusals are appended to w.
func (n *Namespace) transaction(w *nfnl.Writer, begin *nfnl.Msg, reqs []nfnl.Msg) {
	n.transactions++
	n.requests += len(reqs)
	if n.failTx > 0 {
		n.failTx--
		w.AppendError(begin.Raw, 0, -int32(n.failTxErr), 0)
		return
	}
	tx := &txState{st: n.st.clone(), setIDs: map[uint32]string{}, ruleIDs: map[uint32]*rule{}}
	failed, loop := false, false
	hgen0 := maps.Clone(n.hgen)
	for i := range reqs {
		m := &reqs[i]
		tx.req = i
		errno, off := n.apply(tx, m)
		if errno != 0 {
			failed = true
			loop = loop || errno == syscall.EMLINK
			w.AppendError(m.Raw, 0, -int32(errno), off)
		}
	}
	if loop {
		// The kernel finds a loop when it validates the transaction, then
		// processes it again to find the rule that closes it: every handle
		// the batch took, it takes twice.
		for th, h := range n.hgen {
			n.hgen[th] = h + (h - hgen0[th])
		}
	}
	// An anonymous set no rule of the transaction binds is refused.
	for _, a := range tx.anon {
		if t := tx.st.tables[a.table]; t != nil && t.set(a.name) != nil && t.setUse(a.name) == 0 {
			failed = true
			w.AppendError(reqs[a.req].Raw, 0, -int32(syscall.EINVAL), 0)
		}
	}
	if failed || !tx.mutated {
		return
	}
	n.st = tx.st
	n.gen++
	n.committed++
}

// hgenNext allocates a handle in the table with handle th.
func (n *Namespace) hgenNext(th uint64) uint64 {
	n.hgen[th]++
	return n.hgen[th]
}

// missing is the errno of deleting what does not exist: none for a
// destroy request, ENOENT for a delete.
func missing(destroy bool) syscall.Errno {
	if destroy {
		return 0
	}
	return syscall.ENOENT
}

func (n *Namespace) refused(r Request) syscall.Errno {
	if n.refuse == nil {
		return 0
	}
	return n.refuse(r)
}

// apply applies one request to the transaction's state and returns the
// kernel's errno and, for an element, the offset of its attribute.
func (n *Namespace) apply(tx *txState, m *nfnl.Msg) (syscall.Errno, uint32) {
	op := m.Type & 0xff
	if m.Type>>8 != nfnl.SubsysNFTables {
		return syscall.EINVAL, 0
	}
	switch op {
	case nfnl.MsgNewTable:
		tb, err := nfnl.ParseTable(m.Data)
		if err != nil || tb.Name == "" {
			return syscall.EINVAL, 0
		}
		if e := n.refused(Request{Op: "newtable", Family: m.Family, Table: tb.Name}); e != 0 {
			return e, 0
		}
		if t := tx.st.table(m.Family, tb.Name); t != nil {
			if m.Flags&nfnl.FlagExcl != 0 {
				return syscall.EEXIST, 0
			}
			if t.flags != tb.Flags {
				t.flags, tx.mutated = tb.Flags, true
			}
			return 0, 0
		}
		tx.mutated = true
		n.addTable(tx.st, m.Family, tb.Name, tb.Flags)
		return 0, 0
	case nfnl.MsgDelTable, nfnl.MsgDestroyTable:
		tb, err := nfnl.ParseTable(m.Data)
		if err != nil {
			return syscall.EINVAL, 0
		}
		if e := n.refused(Request{Op: "deltable", Family: m.Family, Table: tb.Name}); e != 0 {
			return e, 0
		}
		if tx.st.table(m.Family, tb.Name) == nil {
			return missing(op == nfnl.MsgDestroyTable), 0
		}
		tx.st.deleteTable(tkey{m.Family, tb.Name})
		tx.mutated = true
		return 0, 0
	case nfnl.MsgNewChain:
		return n.newChain(tx, m)
	case nfnl.MsgDelChain, nfnl.MsgDestroyChain:
		return n.delChain(tx, m, op == nfnl.MsgDestroyChain)
	case nfnl.MsgNewRule:
		return n.newRule(tx, m)
	case nfnl.MsgDelRule, nfnl.MsgDestroyRule:
		return n.delRule(tx, m, op == nfnl.MsgDestroyRule)
	case nfnl.MsgNewSet:
		return n.newSet(tx, m)
	case nfnl.MsgDelSet, nfnl.MsgDestroySet:
		return n.delSet(tx, m, op == nfnl.MsgDestroySet)
	case nfnl.MsgNewSetElem, nfnl.MsgDelSetElem, nfnl.MsgDestroySetElem:
		return n.setElems(tx, m, op == nfnl.MsgNewSetElem, op == nfnl.MsgDestroySetElem)
	}
	return syscall.EOPNOTSUPP, 0
}

func (n *Namespace) newChain(tx *txState, m *nfnl.Msg) (syscall.Errno, uint32) {
	c, err := nfnl.ParseChain(m.Data)
	if err != nil || c.Name == "" || len(c.Name) >= nfnl.NameMaxLen {
		return syscall.EINVAL, 0
	}
	t := tx.st.table(m.Family, c.Table)
	if t == nil {
		return syscall.ENOENT, 0
	}
	if e := n.refused(Request{Op: "newchain", Family: m.Family, Table: c.Table, Chain: c.Name}); e != 0 {
		return e, 0
	}
	if old := t.chain(c.Name); old != nil {
		if m.Flags&nfnl.FlagExcl != 0 {
			return syscall.EEXIST, 0
		}
		if c.Hook != nil && (old.hook == nil || *old.hook != *c.Hook) {
			return syscall.EEXIST, 0
		}
		if e := policyOK(c.Policy, old.hook != nil); e != 0 {
			return e, 0
		}
		if c.Policy != nil {
			old.policy = *c.Policy
		}
		tx.mutated = true // the kernel commits an update even when nothing changes
		return 0, 0
	}
	nc := &chain{name: c.Name}
	if c.Hook != nil {
		typ := c.Type
		if typ == "" {
			typ = "filter"
		}
		if c.Hook.Num > nfnl.HookPostrouting {
			return syscall.EOPNOTSUPP, 0
		}
		if e := hookOK(typ, c.Hook.Num, c.Hook.Priority); e != 0 {
			return e, 0
		}
		h := *c.Hook
		nc.hook, nc.typ, nc.policy = &h, typ, nfnl.PolicyAccept
	}
	if e := policyOK(c.Policy, c.Hook != nil); e != 0 {
		return e, 0
	}
	if c.Policy != nil {
		nc.policy = *c.Policy
	}
	nc.handle = n.hgenNext(t.handle)
	t.chains = append(t.chains, nc)
	tx.mutated = true
	return 0, 0
}

func (n *Namespace) delChain(tx *txState, m *nfnl.Msg, destroy bool) (syscall.Errno, uint32) {
	c, err := nfnl.ParseChain(m.Data)
	if err != nil {
		return syscall.EINVAL, 0
	}
	t := tx.st.table(m.Family, c.Table)
	if t == nil {
		return syscall.ENOENT, 0
	}
	i := slices.IndexFunc(t.chains, func(x *chain) bool { return x.name == c.Name || c.Name == "" && x.handle == c.Handle })
	if i < 0 {
		return missing(destroy), 0
	}
	if e := n.refused(Request{Op: "delchain", Family: m.Family, Table: c.Table, Chain: t.chains[i].name}); e != 0 {
		return e, 0
	}
	if e := t.deleteChain(i); e != 0 {
		return e, 0
	}
	tx.mutated = true
	return 0, 0
}

// exprRefs returns the chains a rule's verdicts jump to and the sets it
// looks up (by name, and by ID for sets of the transaction).
func exprRefs(exprs []byte) (jumps, sets []string, ids []uint32, err error) {
	err = nfnl.WalkExprs(exprs, func(name string, data []byte) error {
		switch name {
		case "immediate":
			v, ok, err := nfnl.ImmediateVerdict(data)
			if err != nil {
				return err
			}
			if ok && (v.Code == nfnl.VerdictJump || v.Code == nfnl.VerdictGoto) {
				jumps = append(jumps, v.Chain)
			}
		case "lookup":
			l, err := nfnl.ParseLookup(data)
			if err != nil {
				return err
			}
			if l.SetID != 0 && strings.Contains(l.Set, "%d") {
				ids = append(ids, l.SetID)
			} else {
				sets = append(sets, l.Set)
			}
		}
		return nil
	})
	return jumps, sets, ids, err
}

// reaches reports whether chain from leads to chain to through jumps and
// verdict maps (from itself included).
func reaches(t *table, from, to string, seen map[string]bool) bool {
	if from == to {
		return true
	}
	if seen[from] {
		return false
	}
	seen[from] = true
	c := t.chain(from)
	if c == nil {
		return false
	}
	for _, r := range c.rules {
		for _, j := range r.jumps {
			if reaches(t, j, to, seen) {
				return true
			}
		}
		for _, sname := range r.sets {
			if s := t.set(sname); s != nil {
				for _, e := range s.elems {
					if e.verdict != nil && e.verdict.Chain != "" && reaches(t, e.verdict.Chain, to, seen) {
						return true
					}
				}
			}
		}
	}
	return false
}

func (n *Namespace) newRule(tx *txState, m *nfnl.Msg) (syscall.Errno, uint32) {
	r, err := nfnl.ParseRule(m.Data)
	if err != nil {
		return syscall.EINVAL, 0
	}
	t := tx.st.table(m.Family, r.Table)
	if t == nil {
		return syscall.ENOENT, 0
	}
	c := t.chain(r.Chain)
	if c == nil {
		return syscall.ENOENT, 0
	}
	// The kernel gives the rule its handle here: a rule refused from now on
	// has used one.
	nr := &rule{handle: n.hgenNext(t.handle), exprs: slices.Clone(r.Exprs), udata: slices.Clone(r.UserData)}
	if len(r.UserData) > nfnl.UserDataMaxLen {
		return syscall.EINVAL, 0
	}
	if e := n.refused(Request{Op: "newrule", Family: m.Family, Table: r.Table, Chain: r.Chain, Comment: nr.comment()}); e != 0 {
		return e, 0
	}
	jumps, sets, ids, err := exprRefs(r.Exprs)
	if err != nil {
		return syscall.EINVAL, 0
	}
	for _, j := range jumps {
		if e := t.jumpTarget(j); e != 0 {
			return e, 0
		}
		if reaches(t, j, c.name, map[string]bool{}) {
			return syscall.EMLINK, 0
		}
	}
	for _, s := range sets {
		if t.set(s) == nil {
			return syscall.ENOENT, 0
		}
	}
	for _, id := range ids {
		name, ok := tx.setIDs[id]
		if !ok || t.set(name) == nil {
			return syscall.ENOENT, 0
		}
		nr.anon = append(nr.anon, name)
	}
	nr.jumps, nr.sets = jumps, sets
	after := m.Flags&nfnl.FlagAppend != 0
	at := 0 // insert before index at
	switch {
	case r.Position != 0 || r.PositionID != 0:
		if at = tx.position(c, &r); at < 0 {
			return syscall.ENOENT, 0
		}
		if after {
			at++
		}
	case after:
		at = len(c.rules)
	}
	c.rules = slices.Insert(c.rules, at, nr)
	if r.ID != 0 {
		tx.ruleIDs[r.ID] = nr
	}
	tx.mutated = true
	return 0, 0
}

// position returns the index in c of the rule a new rule r goes next to:
// the one with handle r.Position, or else the transaction's rule with ID
// r.PositionID; -1 when c has no such rule.
func (tx *txState) position(c *chain, r *nfnl.Rule) int {
	if r.Position != 0 {
		return slices.IndexFunc(c.rules, func(x *rule) bool { return x.handle == r.Position })
	}
	pr := tx.ruleIDs[r.PositionID]
	if pr == nil {
		return -1
	}
	return slices.Index(c.rules, pr)
}

func (n *Namespace) delRule(tx *txState, m *nfnl.Msg, destroy bool) (syscall.Errno, uint32) {
	r, err := nfnl.ParseRule(m.Data)
	if err != nil {
		return syscall.EINVAL, 0
	}
	t := tx.st.table(m.Family, r.Table)
	if t == nil {
		return syscall.ENOENT, 0
	}
	if e := n.refused(Request{Op: "delrule", Family: m.Family, Table: r.Table, Chain: r.Chain}); e != 0 {
		return e, 0
	}
	var chains []*chain
	if r.Chain != "" {
		c := t.chain(r.Chain)
		if c == nil {
			return syscall.ENOENT, 0
		}
		chains = []*chain{c}
	} else {
		chains = t.chains
	}
	if r.Handle == 0 {
		for _, c := range chains {
			for len(c.rules) > 0 {
				t.removeRule(c, len(c.rules)-1)
				tx.mutated = true
			}
		}
		return 0, 0
	}
	for _, c := range chains {
		if i := slices.IndexFunc(c.rules, func(x *rule) bool { return x.handle == r.Handle }); i >= 0 {
			t.removeRule(c, i)
			tx.mutated = true
			return 0, 0
		}
	}
	return missing(destroy), 0
}

func (n *Namespace) newSet(tx *txState, m *nfnl.Msg) (syscall.Errno, uint32) {
	s, err := nfnl.ParseSet(m.Data)
	if err != nil || s.Name == "" || s.KeyLen == 0 || s.ID == 0 {
		return syscall.EINVAL, 0
	}
	t := tx.st.table(m.Family, s.Table)
	if t == nil {
		return syscall.ENOENT, 0
	}
	if s.KeyLen > nfnl.MaxKeyLen || len(s.Fields) > 1 != (s.Flags&nfnl.SetConcat != 0) {
		return syscall.EINVAL, 0
	}
	if len(s.Fields) > 1 {
		regs := 0
		for _, f := range s.Fields {
			regs += (int(f) + nfnl.RegSize - 1) / nfnl.RegSize
		}
		if regs*nfnl.RegSize != int(s.KeyLen) {
			return syscall.EINVAL, 0
		}
	}
	if (s.Flags&nfnl.SetMap != 0) != (s.DataType != 0) {
		return syscall.EINVAL, 0
	}
	if e := n.refused(Request{Op: "newset", Family: m.Family, Table: s.Table, Set: s.Name}); e != 0 {
		return e, 0
	}
	anon := s.Flags&nfnl.SetAnonymous != 0
	if strings.Contains(s.Name, "%d") {
		for i := 0; ; i++ {
			name := strings.Replace(s.Name, "%d", strconv.Itoa(i), 1)
			if t.set(name) == nil {
				s.Name = name
				break
			}
		}
	} else if old := t.set(s.Name); old != nil {
		if m.Flags&nfnl.FlagExcl != 0 || !sameShape(&old.nl, &s) {
			return syscall.EEXIST, 0
		}
		tx.setIDs[s.ID] = s.Name
		tx.mutated = true // an update, even when nothing changes
		return 0, 0
	}
	s.UserData = nil
	s.Handle = n.hgenNext(t.handle)
	s.Fields = slices.Clone(s.Fields)
	t.sets = append(t.sets, &set{name: s.Name, handle: s.Handle, nl: s, anon: anon, elems: map[string]*elem{}})
	tx.setIDs[s.ID] = s.Name
	if anon {
		tx.anon = append(tx.anon, anonNew{table: tkey{m.Family, s.Table}, name: s.Name, req: tx.req})
	}
	tx.mutated = true
	return 0, 0
}

func (n *Namespace) delSet(tx *txState, m *nfnl.Msg, destroy bool) (syscall.Errno, uint32) {
	s, err := nfnl.ParseSet(m.Data)
	if err != nil {
		return syscall.EINVAL, 0
	}
	t := tx.st.table(m.Family, s.Table)
	if t == nil {
		return syscall.ENOENT, 0
	}
	i := slices.IndexFunc(t.sets, func(x *set) bool { return x.name == s.Name })
	if i < 0 {
		return missing(destroy), 0
	}
	if e := n.refused(Request{Op: "delset", Family: m.Family, Table: s.Table, Set: s.Name}); e != 0 {
		return e, 0
	}
	if e := t.deleteSet(i); e != 0 {
		return e, 0
	}
	tx.mutated = true
	return 0, 0
}

func (n *Namespace) setElems(tx *txState, m *nfnl.Msg, add, destroy bool) (syscall.Errno, uint32) {
	l, err := nfnl.ParseElemList(m.Data, nfnl.HdrLen+nfnl.GenLen)
	if err != nil {
		return syscall.EINVAL, 0
	}
	t := tx.st.table(m.Family, l.Table)
	if t == nil {
		return syscall.ENOENT, 0
	}
	name := l.Set
	if id, ok := tx.setIDs[l.SetID]; ok && l.SetID != 0 && (name == "" || strings.Contains(name, "%d")) {
		name = id
	}
	s := t.set(name)
	if s == nil {
		return syscall.ENOENT, 0
	}
	op := "delsetelem"
	if add {
		op = "newsetelem"
	}
	var errno syscall.Errno
	var off uint32
	_ = l.ForEachElem(func(e *nfnl.Elem) error {
		fail := func(x syscall.Errno) error {
			errno, off = x, uint32(e.Offset)
			return errStop
		}
		if len(e.Key) != int(s.nl.KeyLen) || e.KeyEnd != nil && len(e.KeyEnd) != int(s.nl.KeyLen) {
			return fail(syscall.EINVAL)
		}
		if x := n.refused(Request{Op: op, Family: m.Family, Table: l.Table, Set: name, Key: slices.Clone(e.Key)}); x != 0 {
			return fail(x)
		}
		k := ekey(e)
		old := s.elems[k]
		if !add {
			if old == nil {
				if destroy {
					return nil
				}
				return fail(syscall.ENOENT)
			}
			delete(s.elems, k)
			tx.mutated = true
			return nil
		}
		isMap := s.nl.Flags&nfnl.SetMap != 0
		end := e.Flags&nfnl.ElemIntervalEnd != 0
		if isMap && !end && e.Verdict == nil && e.Data == nil || !isMap && (e.Verdict != nil || e.Data != nil) {
			return fail(syscall.EINVAL)
		}
		ne := &elem{key: slices.Clone(e.Key), keyEnd: slices.Clone(e.KeyEnd), flags: e.Flags, data: slices.Clone(e.Data)}
		if e.Verdict != nil {
			v := *e.Verdict
			ne.verdict = &v
			if v.Code == nfnl.VerdictJump || v.Code == nfnl.VerdictGoto {
				if x := t.jumpTarget(v.Chain); x != 0 {
					return fail(x)
				}
			}
		}
		if old != nil {
			if m.Flags&nfnl.FlagExcl != 0 || !sameElemData(old, ne) {
				return fail(syscall.EEXIST)
			}
			return nil
		}
		s.elems[k] = ne
		tx.mutated = true
		return nil
	})
	return errno, off
}

var errStop = errors.New("stop")

func sameElemData(a, b *elem) bool {
	if (a.verdict == nil) != (b.verdict == nil) {
		return false
	}
	if a.verdict != nil && *a.verdict != *b.verdict {
		return false
	}
	return string(a.data) == string(b.data)
}

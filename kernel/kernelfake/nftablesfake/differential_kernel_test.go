//go:build linux

package nftablesfake_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// realSocket is a NETLINK_NETFILTER socket in a test namespace, as the
// Table opens one.
type realSocket struct{ fd int }

func openReal(t *testing.T, ns *kerneltest.NS) *realSocket {
	t.Helper()
	s := &realSocket{fd: -1}
	require.NoError(t, ns.Do(func() (err error) {
		s.fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		return err
	}))
	require.NoError(t, unix.Bind(s.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}))
	require.NoError(t, unix.SetsockoptInt(s.fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1))
	require.NoError(t, unix.SetsockoptInt(s.fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (s *realSocket) Send(b []byte) error {
	return unix.Sendto(s.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

func (s *realSocket) Receive(b []byte, block bool) (int, error) {
	flags := 0
	if !block {
		flags = unix.MSG_DONTWAIT
	}
	n, _, err := unix.Recvfrom(s.fd, b, flags)
	if !block && errors.Is(err, unix.EAGAIN) {
		return 0, nil
	}
	return n, err
}

func (s *realSocket) Close() error { return unix.Close(s.fd) }

// peer is one side of the differential test: a socket to nf_tables.
type peer struct {
	name string
	s    kernel.NFTablesSocket
	seq  uint32
	buf  []byte
}

// answer is the kernel's refusal of one request of a transaction: its
// index, errno and, for an element request, the index of the element.
type answer struct {
	Req, Elem int
	Errno     syscall.Errno
}

// req is one request of a scripted transaction.
type req struct {
	typ   uint16
	flags uint16
	fam   uint8
	attrs func(w *nfnl.Writer)
}

// transact sends reqs as one batch and returns the refusals.
func (p *peer) transact(t *testing.T, reqs []req) []answer {
	t.Helper()
	var w nfnl.Writer
	p.seq++
	st := w.Begin(nfnl.BatchBegin, nfnl.FlagRequest, p.seq, 0, nfnl.SubsysNFTables)
	w.End(st)
	first := p.seq + 1
	var starts []int
	for _, r := range reqs {
		p.seq++
		starts = append(starts, w.Len())
		st := w.Begin(nfnl.Type(r.typ), nfnl.FlagRequest|r.flags, p.seq, r.fam, 0)
		r.attrs(&w)
		w.End(st)
	}
	p.seq++
	st = w.Begin(nfnl.BatchEnd, nfnl.FlagRequest, p.seq, 0, nfnl.SubsysNFTables)
	w.End(st)
	require.NoError(t, p.s.Send(w.B), p.name)
	var out []answer
	for {
		n, err := p.s.Receive(p.buf, false)
		require.NoError(t, err, p.name)
		if n == 0 {
			return out
		}
		require.NoError(t, nfnl.ForEachMsg(p.buf[:n], func(m *nfnl.Msg) error {
			if m.Type != nfnl.MsgError {
				return nil
			}
			e, err := nfnl.ParseError(m.Flags, m.Data)
			if err != nil || e.Errno == 0 {
				return err
			}
			a := answer{Req: int(e.Seq - first), Elem: -1, Errno: syscall.Errno(-e.Errno)}
			if e.Offset != 0 && a.Req >= 0 && a.Req < len(reqs) {
				// The element the offset points into.
				start := starts[a.Req]
				end := w.Len()
				if a.Req+1 < len(starts) {
					end = starts[a.Req+1]
				}
				msg := w.B[start:end]
				_ = nfnl.ForEachMsg(msg, func(rm *nfnl.Msg) error {
					l, err := nfnl.ParseElemList(rm.Data, nfnl.HdrLen+nfnl.GenLen)
					if err != nil {
						return err
					}
					i := 0
					return l.ForEachElem(func(el *nfnl.Elem) error {
						if uint32(el.Offset) <= e.Offset {
							a.Elem = i
						}
						i++
						return nil
					})
				})
			}
			out = append(out, a)
			return nil
		}))
	}
}

// dump returns the answers to a dump request, as text: everything the
// Table reads (and what the fake claims to keep as the kernel does).
func (p *peer) dump(t *testing.T, fam uint8, table string) string {
	t.Helper()
	var b strings.Builder
	p.query(t, nfnl.MsgGetChain, nfnl.FlagDump, fam, nil, func(m *nfnl.Msg) {
		c, err := nfnl.ParseChain(m.Data)
		require.NoError(t, err)
		if c.Table != table {
			return
		}
		fmt.Fprintf(&b, "chain %s handle %d use %d", c.Name, c.Handle, c.Use)
		if c.Hook != nil {
			fmt.Fprintf(&b, " hook %d prio %d type %s policy %d", c.Hook.Num, c.Hook.Priority, c.Type, *c.Policy)
		}
		b.WriteString("\n")
	})
	errno := p.query(t, nfnl.MsgGetRule, nfnl.FlagDump, fam, func(w *nfnl.Writer) { w.Str(nfnl.RuleTable, table) }, func(m *nfnl.Msg) {
		r, err := nfnl.ParseRule(m.Data)
		require.NoError(t, err)
		var refs []string
		require.NoError(t, nfnl.WalkExprs(r.Exprs, func(name string, data []byte) error {
			switch name {
			case "immediate":
				if v, ok, _ := nfnl.ImmediateVerdict(data); ok {
					refs = append(refs, fmt.Sprintf("verdict %d %s", v.Code, v.Chain))
				}
			case "lookup":
				l, _ := nfnl.ParseLookup(data)
				if !strings.HasPrefix(l.Set, "__set") {
					refs = append(refs, "lookup "+l.Set)
				} else {
					refs = append(refs, "lookup anonymous")
				}
			}
			return nil
		}))
		fmt.Fprintf(&b, "rule %s handle %d udata %x refs %v\n", r.Chain, r.Handle, r.UserData, refs)
	})
	fmt.Fprintf(&b, "rules: %v\n", errno)
	var sets []nfnl.Set
	errno = p.query(t, nfnl.MsgGetSet, nfnl.FlagDump, fam, func(w *nfnl.Writer) { w.Str(nfnl.SetTable, table) }, func(m *nfnl.Msg) {
		s, err := nfnl.ParseSet(m.Data)
		require.NoError(t, err)
		s.UserData = nil
		sets = append(sets, s)
	})
	fmt.Fprintf(&b, "sets: %v\n", errno)
	for _, s := range sets {
		name := s.Name
		if s.Flags&nfnl.SetAnonymous != 0 {
			name = "anonymous"
		}
		fmt.Fprintf(&b, "set %s handle %d flags %#x keytype %#x keylen %d datatype %#x datalen %d fields %v\n",
			name, s.Handle, s.Flags, s.KeyType, s.KeyLen, s.DataType, s.DataLen, s.Fields)
		var elems []string
		p.query(t, nfnl.MsgGetSetElem, nfnl.FlagDump, fam, func(w *nfnl.Writer) {
			w.Str(nfnl.ElemListTable, table)
			w.Str(nfnl.ElemListSet, s.Name)
		}, func(m *nfnl.Msg) {
			l, err := nfnl.ParseElemList(m.Data, nfnl.HdrLen+nfnl.GenLen)
			require.NoError(t, err)
			require.NoError(t, l.ForEachElem(func(e *nfnl.Elem) error {
				v := ""
				if e.Verdict != nil {
					v = fmt.Sprintf(" verdict %d %s", e.Verdict.Code, e.Verdict.Chain)
				}
				elems = append(elems, fmt.Sprintf("  elem %x-%x flags %d%s", e.Key, e.KeyEnd, e.Flags&nfnl.ElemIntervalEnd, v))
				return nil
			}))
		})
		slices.Sort(elems)
		for _, e := range elems {
			b.WriteString(e + "\n")
		}
	}
	return b.String()
}

// query sends one request and calls fn for each answer until the end; an
// errno answer is returned.
func (p *peer) query(t *testing.T, typ, flags uint16, fam uint8, attrs func(w *nfnl.Writer), fn func(m *nfnl.Msg)) syscall.Errno {
	t.Helper()
	var w nfnl.Writer
	p.seq++
	seq := p.seq
	st := w.Begin(nfnl.Type(typ), nfnl.FlagRequest|flags, seq, fam, 0)
	if attrs != nil {
		attrs(&w)
	}
	w.End(st)
	require.NoError(t, p.s.Send(w.B))
	var errno syscall.Errno
	for done := false; !done; {
		n, err := p.s.Receive(p.buf, true)
		require.NoError(t, err, p.name)
		require.NoError(t, nfnl.ForEachMsg(p.buf[:n], func(m *nfnl.Msg) error {
			if m.Seq != seq {
				return nil
			}
			switch m.Type {
			case nfnl.MsgDone:
				done = true
			case nfnl.MsgError:
				e, err := nfnl.ParseError(m.Flags, m.Data)
				require.NoError(t, err)
				errno = syscall.Errno(-e.Errno)
				done = true
			default:
				fn(m)
				if flags&nfnl.FlagDump != nfnl.FlagDump {
					done = true
				}
			}
			return nil
		}))
	}
	return errno
}

func (p *peer) gen(t *testing.T) uint32 {
	var g uint32
	p.query(t, nfnl.MsgGetGen, 0, 0, nil, func(m *nfnl.Msg) {
		var err error
		g, err = nfnl.ParseGen(m.Data)
		require.NoError(t, err)
	})
	return g
}

// Script helpers.

const fam = nfnl.FamilyIPv4

func newTable(name string) req {
	return req{nfnl.MsgNewTable, nfnl.FlagCreate, fam, func(w *nfnl.Writer) { (&nfnl.Table{Name: name}).Append(w, false) }}
}

func delTable(name string, destroy bool) req {
	typ := uint16(nfnl.MsgDelTable)
	if destroy {
		typ = nfnl.MsgDestroyTable
	}
	return req{typ, 0, fam, func(w *nfnl.Writer) { w.Str(nfnl.TableName, name) }}
}

func newChain(name string, hook *nfnl.Hook, typ string) req {
	return req{nfnl.MsgNewChain, nfnl.FlagCreate, fam, func(w *nfnl.Writer) {
		c := nfnl.Chain{Table: "t", Name: name, Hook: hook, Type: typ}
		if hook != nil {
			p := uint32(nfnl.PolicyAccept)
			c.Policy = &p
		}
		c.Append(w, false)
	}}
}

func delChain(name string, destroy bool) req {
	typ := uint16(nfnl.MsgDelChain)
	if destroy {
		typ = nfnl.MsgDestroyChain
	}
	return req{typ, 0, fam, func(w *nfnl.Writer) { (&nfnl.Chain{Table: "t", Name: name}).Append(w, false) }}
}

// ruleExprs encodes expressions: a verdict (jump or goto to chain, or
// accept) and lookups of sets.
func ruleExprs(code int32, chain string, sets ...string) []byte {
	var w nfnl.Writer
	for _, s := range sets {
		n := w.Open(nfnl.ListElem)
		w.Str(nfnl.ExprName, "payload")
		d := w.Open(nfnl.ExprData)
		w.U32(1, 1)  // NFTA_PAYLOAD_DREG
		w.U32(2, 1)  // NFTA_PAYLOAD_BASE: network header
		w.U32(3, 16) // NFTA_PAYLOAD_OFFSET
		w.U32(4, 4)  // NFTA_PAYLOAD_LEN
		w.Close(d)
		w.Close(n)
		n = w.Open(nfnl.ListElem)
		w.Str(nfnl.ExprName, "lookup")
		d = w.Open(nfnl.ExprData)
		w.Str(nfnl.LookupSet, s)
		w.U32(nfnl.LookupSreg, 1)
		w.Close(d)
		w.Close(n)
	}
	nftablesfake.AppendVerdictExpr(&w, code, chain)
	return w.B
}

func newRule(chain string, exprs []byte, comment string, position uint64, flags uint16) req {
	return req{nfnl.MsgNewRule, nfnl.FlagCreate | flags, fam, func(w *nfnl.Writer) {
		(&nfnl.Rule{Table: "t", Chain: chain, Exprs: exprs, UserData: nftablesfake.CommentData(comment), Position: position}).Append(w)
	}}
}

func delRule(chain string, handle uint64) req {
	return req{nfnl.MsgDelRule, 0, fam, func(w *nfnl.Writer) { (&nfnl.Rule{Table: "t", Chain: chain, Handle: handle}).Append(w) }}
}

// ipv4 . inet_proto . inet_service, as the Table declares a service map.
var svcFields = []uint32{4, 1, 2}

func newSet(name string, flags, keyLen uint32, fields []uint32, id uint32) req {
	return req{nfnl.MsgNewSet, nfnl.FlagCreate, fam, func(w *nfnl.Writer) {
		s := nfnl.Set{Table: "t", Name: name, Flags: flags, KeyType: 7, KeyLen: keyLen, Fields: fields, ID: id}
		if flags&nfnl.SetMap != 0 {
			s.DataType = nfnl.DataVerdictType
		}
		s.Append(w, false)
	}}
}

func delSet(name string) req {
	return req{nfnl.MsgDelSet, 0, fam, func(w *nfnl.Writer) {
		w.Str(nfnl.SetTable, "t")
		w.Str(nfnl.SetName, name)
	}}
}

func elems(typ uint16, set string, es ...nfnl.Elem) req {
	flags := uint16(0)
	if typ == nfnl.MsgNewSetElem {
		flags = nfnl.FlagCreate
	}
	return req{typ, flags, fam, func(w *nfnl.Writer) {
		(&nfnl.ElemList{Table: "t", Set: set}).AppendHeader(w)
		n := w.Open(nfnl.ElemListElems)
		for i := range es {
			w.AppendElem(&es[i])
		}
		w.Close(n)
	}}
}

func key(b ...byte) []byte { return b }

func gotoChain(c string) *nfnl.Verdict { return &nfnl.Verdict{Code: nfnl.VerdictGoto, Chain: c} }

// TestKernelFakeMatchesKernel sends the same transactions to the fake and
// to a fresh namespace's nf_tables and compares, after each, the
// refusals (request, element, errno), the table as dumps show it (chains
// with hooks and use counts, rules with handles, user data and what their
// verdicts and lookups refer to, sets and their elements) and how much the
// ruleset generation moved.
func TestKernelFakeMatchesKernel(t *testing.T) {
	ns := kerneltest.NewNS(t)
	fake := nftablesfake.New()
	fs, err := fake.OpenNFTablesSocket()
	require.NoError(t, err)
	peers := []*peer{{name: "kernel", s: openReal(t, ns), buf: make([]byte, 1<<20)}, {name: "fake", s: fs, buf: make([]byte, 1<<20)}}
	hookIn := &nfnl.Hook{Num: nfnl.HookInput, Priority: -10}
	steps := []struct {
		name string
		reqs []req
	}{
		{"a table and chains", []req{newTable("t"), newChain("base", hookIn, "filter"), newChain("a", nil, ""), newChain("b", nil, ""), newChain("c", nil, "")}},
		{"an existing table is updated", []req{newTable("t")}},
		{"rules jump", []req{newRule("base", ruleExprs(nfnl.VerdictJump, "a"), "r1", 0, nfnl.FlagAppend),
			newRule("a", ruleExprs(nfnl.VerdictGoto, "b"), "r2", 0, nfnl.FlagAppend), newRule("a", ruleExprs(nfnl.VerdictAccept, ""), "r3", 0, 0)}},
		{"jump to a missing chain", []req{newRule("a", ruleExprs(nfnl.VerdictJump, "nope"), "x", 0, nfnl.FlagAppend)}},
		{"jump to a base chain", []req{newRule("a", ruleExprs(nfnl.VerdictJump, "base"), "x", 0, nfnl.FlagAppend)}},
		{"a loop", []req{newRule("b", ruleExprs(nfnl.VerdictJump, "a"), "x", 0, nfnl.FlagAppend)}},
		{"rule in a missing chain", []req{newRule("nope", ruleExprs(nfnl.VerdictAccept, ""), "x", 0, nfnl.FlagAppend)}},
		{"position after a missing handle", []req{newRule("a", ruleExprs(nfnl.VerdictAccept, ""), "x", 999, nfnl.FlagAppend)}},
		{"position after a rule", []req{newRule("a", ruleExprs(nfnl.VerdictDrop, ""), "after-r3", 7, nfnl.FlagAppend), newRule("a", ruleExprs(nfnl.VerdictDrop, ""), "before-r3", 7, 0)}},
		{"delete a chain in use", []req{delChain("b", false)}},
		{"delete a missing chain", []req{delChain("nope", false)}},
		{"destroy a missing chain", []req{delChain("nope", true)}},
		{"delete a missing rule", []req{delRule("a", 999)}},
		{"sets and maps", []req{newSet("ips", 0, 4, nil, 1), newSet("svc", nfnl.SetMap|nfnl.SetConcat, 12, svcFields, 2),
			newSet("nets", nfnl.SetInterval, 4, nil, 3)}},
		{"a set without ID", []req{newSet("noid", 0, 4, nil, 0)}},
		{"a concatenation without its flag", []req{newSet("noflag", 0, 12, svcFields, 4)}},
		{"an existing set of another shape", []req{newSet("ips", nfnl.SetInterval, 4, nil, 5)}},
		{"an existing set again", []req{newSet("ips", 0, 4, nil, 6)}},
		{"an existing chain again", []req{newChain("a", nil, "")}},
		{"an unbound anonymous set", []req{newSet("__set%d", nfnl.SetAnonymous|nfnl.SetConstant, 4, nil, 7)}},
		{"elements", []req{elems(nfnl.MsgNewSetElem, "ips", nfnl.Elem{Key: key(10, 0, 0, 1)}, nfnl.Elem{Key: key(10, 0, 0, 2)}),
			elems(nfnl.MsgNewSetElem, "svc", nfnl.Elem{Key: key(10, 96, 0, 1, 6, 0, 0, 0, 0, 80, 0, 0), Verdict: gotoChain("c")}),
			elems(nfnl.MsgNewSetElem, "nets", nfnl.Elem{Key: key(10, 0, 0, 0)}, nfnl.Elem{Key: key(11, 0, 0, 0), Flags: nfnl.ElemIntervalEnd})}},
		{"an element of the wrong length", []req{elems(nfnl.MsgNewSetElem, "ips", nfnl.Elem{Key: key(10, 0, 0, 3)}, nfnl.Elem{Key: key(10, 0, 0, 4, 5)})}},
		{"the same element again", []req{elems(nfnl.MsgNewSetElem, "svc", nfnl.Elem{Key: key(10, 96, 0, 1, 6, 0, 0, 0, 0, 80, 0, 0), Verdict: gotoChain("c")})}},
		{"an element with another verdict", []req{elems(nfnl.MsgNewSetElem, "svc", nfnl.Elem{Key: key(10, 96, 0, 1, 6, 0, 0, 0, 0, 80, 0, 0), Verdict: gotoChain("a")})}},
		{"an element jumping to a missing chain", []req{elems(nfnl.MsgNewSetElem, "svc", nfnl.Elem{Key: key(10, 96, 0, 2, 6, 0, 0, 0, 0, 80, 0, 0), Verdict: gotoChain("nope")})}},
		{"delete a missing element", []req{elems(nfnl.MsgDelSetElem, "ips", nfnl.Elem{Key: key(10, 0, 0, 1)}, nfnl.Elem{Key: key(10, 0, 0, 9)})}},
		{"delete an element", []req{elems(nfnl.MsgDelSetElem, "ips", nfnl.Elem{Key: key(10, 0, 0, 1)})}},
		{"a chain a map element jumps to", []req{delChain("c", false)}},
		{"rules look sets up", []req{newRule("c", ruleExprs(nfnl.VerdictAccept, "", "ips"), "lookup", 0, nfnl.FlagAppend)}},
		{"lookup of a missing set", []req{newRule("c", ruleExprs(nfnl.VerdictAccept, "", "nope"), "x", 0, nfnl.FlagAppend)}},
		{"delete a set in use", []req{delSet("ips")}},
		{"nat at forward", []req{newChain("natfwd", &nfnl.Hook{Num: nfnl.HookForward, Priority: 0}, "nat")}},
		{"nat before conntrack", []req{newChain("natraw", &nfnl.Hook{Num: nfnl.HookPrerouting, Priority: -300}, "nat")}},
		{"route at input", []req{newChain("routein", &nfnl.Hook{Num: nfnl.HookInput, Priority: 0}, "route")}},
		{"nat and route where they belong", []req{newChain("natpre", &nfnl.Hook{Num: nfnl.HookPrerouting, Priority: -110}, "nat"),
			newChain("routeout", &nfnl.Hook{Num: nfnl.HookOutput, Priority: -160}, "route")}},
		{"flush a chain", []req{delRule("a", 0)}},
		{"delete chains whose rules jump to each other", []req{delRule("base", 0), delRule("a", 0), delChain("a", false)}},
		{"destroy a missing table", []req{delTable("nope", true)}},
		{"delete a missing table", []req{delTable("nope", false)}},
		{"delete the table", []req{delTable("t", false)}},
	}
	gens := make([]uint32, len(peers))
	for i, p := range peers {
		gens[i] = p.gen(t)
	}
	for _, step := range steps {
		var answers, dumps []string
		for i, p := range peers {
			a := p.transact(t, step.reqs)
			answers = append(answers, fmt.Sprint(a))
			dumps = append(dumps, p.dump(t, fam, "t"))
			g := p.gen(t)
			dumps[i] += fmt.Sprintf("generation +%d\n", g-gens[i])
			gens[i] = g
		}
		assert.Equal(t, answers[0], answers[1], "%s: refusals", step.name)
		assert.Equal(t, dumps[0], dumps[1], "%s: state", step.name)
		t.Logf("%s: %s", step.name, answers[0])
	}
}

// TestKernelFakeTableMatchesKernel runs a Table's life on the fake and on a
// namespace — declarations, changes, changes made behind its back and
// repaired, a restart — and compares what the Table reads back and
// reports.
func TestKernelFakeTableMatchesKernel(t *testing.T) {
	ns := kerneltest.NewNS(t)
	k, err := kernel.Open(ns.Path())
	require.NoError(t, err)
	t.Cleanup(func() { k.Close() })
	fake := nftablesfake.New()
	fs, err := fake.OpenNFTablesSocket()
	require.NoError(t, err)
	peers := []*peer{{name: "kernel", s: openReal(t, ns), buf: make([]byte, 1<<20)}, {name: "fake", s: fs, buf: make([]byte, 1<<20)}}
	kernels := []kernel.NFTables{k, fake}
	newTbl := func(kn kernel.NFTables) *nftables.Table {
		tbl, err := nftables.New(nftables.Options{Name: "t", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: kn, PostWriteRecheck: []time.Duration{}})
		require.NoError(t, err)
		t.Cleanup(func() { tbl.Close() })
		return tbl
	}
	tbls := []*nftables.Table{newTbl(k), newTbl(fake)}
	svc := func(vip string, port uint16, chain string) nftables.Element {
		return nftables.Element{Key: []nftables.Value{nftables.Addr(netip.MustParseAddr(vip)), nftables.Proto(6), nftables.Port(port)}, Verdict: netfilter.Goto(chain)}
	}
	steps := []struct {
		name string
		do   func(tbl *nftables.Table, i int) error
	}{
		{"declare", func(tbl *nftables.Table, _ int) error {
			if err := tbl.SetSets(
				nftables.Set{Name: "svc", Key: []nftables.KeyType{nftables.TypeAddr, nftables.TypeProto, nftables.TypePort}, Verdict: true,
					Elements: []nftables.Element{svc("10.96.0.1", 80, "svc-1"), svc("10.96.0.2", 443, "svc-2")}},
				nftables.Set{Name: "nets", Key: []nftables.KeyType{nftables.TypeAddr}, Interval: true,
					Elements: []nftables.Element{nftables.Elem(nftables.Prefix(netip.MustParsePrefix("10.0.0.0/8"))), nftables.Elem(nftables.Prefix(netip.MustParsePrefix("192.168.0.0/16")))}},
				nftables.Set{Name: "ports", Key: []nftables.KeyType{nftables.TypePort}, Interval: true,
					Elements: []nftables.Element{nftables.Elem(nftables.PortRange(netfilter.Ports(1000, 2000))), nftables.Elem(nftables.Port(65535))}},
			); err != nil {
				return err
			}
			if err := tbl.SetChains(
				netfilter.Chain{Name: "svc-1", Rules: []netfilter.Rule{{Action: netfilter.Accept()}}},
				netfilter.Chain{Name: "svc-2", Rules: []netfilter.Rule{{Action: netfilter.Drop()}}},
				netfilter.Chain{Name: "fw", Rules: []netfilter.Rule{
					{Matches: []netfilter.Match{netfilter.SourceIPSet("nets")}, Action: netfilter.Return()},
					{Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestPorts(netfilter.Port(22), netfilter.Ports(80, 90))}, Action: netfilter.Accept()},
					{Action: netfilter.VerdictMap("svc", netfilter.Dst, netfilter.Dst)},
				}},
			); err != nil {
				return err
			}
			return tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Jump("fw")}})
		}},
		{"change a rule and elements", func(tbl *nftables.Table, _ int) error {
			if err := tbl.SetChains(netfilter.Chain{Name: "svc-2", Rules: []netfilter.Rule{{Action: netfilter.Accept()}, {Action: netfilter.Drop()}}}); err != nil {
				return err
			}
			if err := tbl.AddElements("svc", svc("10.96.0.3", 53, "svc-1"), svc("10.96.0.2", 443, "svc-1")); err != nil {
				return err
			}
			return tbl.AddElements("nets", nftables.Elem(nftables.Prefix(netip.MustParsePrefix("11.0.0.0/8"))))
		}},
		{"drop a service", func(tbl *nftables.Table, _ int) error {
			if err := tbl.DeleteElements("svc", svc("10.96.0.2", 443, "")); err != nil {
				return err
			}
			return tbl.RemoveChains("svc-2")
		}},
		{"changes behind its back", func(tbl *nftables.Table, i int) error {
			if i == 0 {
				for _, args := range [][]string{
					{"delete", "rule", "ip", "t", "fw", "handle", handleOf(t, ns, "fw", 1)},
					{"delete", "element", "ip", "t", "svc", "{", "10.96.0.3", ".", "tcp", ".", "53", "}"},
					{"add", "chain", "ip", "t", "stray"},
				} {
					if _, err := ns.Exec(context.Background(), "nft", args...); err != nil {
						return err
					}
				}
			} else {
				a := fake.Admin()
				if err := a.DeleteRule(nftablesfake.IPv4, "t", "fw", 1); err != nil {
					return err
				}
				if err := a.DeleteElement(nftablesfake.IPv4, "t", "svc", 1); err != nil {
					return err
				}
				if err := a.AddChain(nftablesfake.IPv4, "t", "stray"); err != nil {
					return err
				}
			}
			tbl.QueueResync()
			return nil
		}},
	}
	for _, step := range steps {
		var dumps, stats []string
		for i, p := range peers {
			require.NoError(t, step.do(tbls[i], i), "%s: %s", step.name, p.name)
			_, err := tbls[i].Apply(context.Background())
			require.NoError(t, err, "%s: %s", step.name, p.name)
			dumps = append(dumps, p.dump(t, fam, "t"))
			s := tbls[i].WorkStats()
			stats = append(stats, fmt.Sprintf("transactions %d messages %d chains %d rules %d sets %d elements %d",
				s.Transactions, s.Messages, s.Chains, s.Rules, s.Sets, s.Elements))
		}
		assert.Equal(t, dumps[0], dumps[1], "%s: state", step.name)
		assert.Equal(t, stats[0], stats[1], "%s: what the Table did", step.name)
	}
	// A restart adopts the table on both and writes nothing.
	for i := range peers {
		again := newTbl(kernels[i])
		for _, step := range steps[:3] {
			require.NoError(t, step.do(again, i))
		}
		_, err := again.Apply(context.Background())
		require.NoError(t, err)
		assert.Zero(t, again.WorkStats().Transactions, peers[i].name)
	}
	require.NoError(t, nftables.RemoveTable(context.Background(), k, ipfamily.IPv4, "t"))
	require.NoError(t, nftables.RemoveTable(context.Background(), fake, ipfamily.IPv4, "t"))
	assert.Equal(t, peers[0].dump(t, fam, "t"), peers[1].dump(t, fam, "t"))
}

// handleOf returns the handle of rule i of a chain, read with nft.
func handleOf(t *testing.T, ns *kerneltest.NS, chain string, i int) string {
	out, err := ns.Exec(context.Background(), "nft", "-a", "list", "chain", "ip", "t", chain)
	require.NoError(t, err)
	var hs []string
	for _, line := range strings.Split(string(out), "\n") {
		if _, h, ok := strings.Cut(line, "# handle "); ok && !strings.Contains(line, "chain ") {
			hs = append(hs, strings.TrimSpace(h))
		}
	}
	require.Greater(t, len(hs), i, string(out))
	return hs[i]
}

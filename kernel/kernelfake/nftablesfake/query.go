package nftablesfake

import (
	"slices"
	"syscall"

	"github.com/nodeplane/nodeplane/internal/nfnl"
)

// dumper packs dump answers into datagrams.
type dumper struct {
	out [][]byte
	w   nfnl.Writer
	seq uint32
}

// begin starts an answer message.
func (d *dumper) begin(typ uint16, family uint8, resID uint16) int {
	if d.w.Len() > maxDatagram {
		d.out = append(d.out, slices.Clone(d.w.B))
		d.w.Reset()
	}
	return d.w.Begin(nfnl.Type(typ), nfnl.FlagMulti, d.seq, family, resID)
}

// done ends the dump.
func (d *dumper) done() [][]byte {
	st := d.w.BeginRaw(nfnl.MsgDone, nfnl.FlagMulti, d.seq, 0)
	d.w.B = append(d.w.B, 0, 0, 0, 0)
	d.w.End(st)
	return append(d.out, slices.Clone(d.w.B))
}

// errorAnswer is an NLMSG_ERROR datagram answering m.
func errorAnswer(m *nfnl.Msg, errno syscall.Errno) [][]byte {
	var w nfnl.Writer
	w.AppendError(m.Raw, 0, -int32(errno), 0)
	return [][]byte{w.B}
}

// query answers a request outside a batch: the generation, or a dump (a
// table by name).
func (n *Namespace) query(m *nfnl.Msg) [][]byte {
	if m.Type>>8 != nfnl.SubsysNFTables {
		return errorAnswer(m, syscall.EINVAL)
	}
	op := m.Type & 0xff
	dump := m.Flags&nfnl.FlagDump == nfnl.FlagDump
	d := &dumper{seq: m.Seq}
	resID := uint16(n.gen)
	if op == nfnl.MsgGetGen {
		st := d.w.Begin(nfnl.Type(nfnl.MsgNewGen), 0, m.Seq, 0, resID)
		d.w.U32(nfnl.GenID, n.gen)
		d.w.End(st)
		return [][]byte{d.w.B}
	}
	if dump {
		n.dumps++
		if n.failDumps > 0 {
			n.failDumps--
			return errorAnswer(m, syscall.EIO)
		}
	}
	tables := func(name string) []*table {
		var ts []*table
		for _, k := range n.st.order {
			if (m.Family == 0 || k.family == m.Family) && (name == "" || k.name == name) {
				ts = append(ts, n.st.tables[k])
			}
		}
		return ts
	}
	switch op {
	case nfnl.MsgGetTable:
		tb, err := nfnl.ParseTable(m.Data)
		if err != nil {
			return errorAnswer(m, syscall.EINVAL)
		}
		ts := tables(tb.Name)
		if !dump {
			if tb.Name == "" {
				return errorAnswer(m, syscall.EINVAL)
			}
			if len(ts) == 0 {
				return errorAnswer(m, syscall.ENOENT)
			}
			t := ts[0]
			st := d.w.Begin(nfnl.Type(nfnl.MsgNewTable), 0, m.Seq, t.family, resID)
			(&nfnl.Table{Name: t.name, Flags: t.flags, Handle: t.handle, Use: uint32(len(t.chains))}).Append(&d.w, true)
			d.w.End(st)
			return [][]byte{d.w.B}
		}
		for _, t := range ts {
			st := d.begin(nfnl.MsgNewTable, t.family, resID)
			(&nfnl.Table{Name: t.name, Flags: t.flags, Handle: t.handle, Use: uint32(len(t.chains))}).Append(&d.w, true)
			d.w.End(st)
		}
		return d.done()
	case nfnl.MsgGetChain:
		if !dump {
			return errorAnswer(m, syscall.EOPNOTSUPP)
		}
		for _, t := range tables("") {
			for _, c := range t.chains {
				st := d.begin(nfnl.MsgNewChain, t.family, resID)
				nc := nfnl.Chain{Table: t.name, Name: c.name, Handle: c.handle, Hook: c.hook, Type: c.typ, Use: uint32(t.chainUse(c.name) + len(c.rules))}
				if c.hook != nil {
					p := c.policy
					nc.Policy, nc.Flags = &p, nfnl.ChainFlagBase
				}
				nc.Append(&d.w, true)
				d.w.End(st)
			}
		}
		return d.done()
	case nfnl.MsgGetRule:
		r, err := nfnl.ParseRule(m.Data)
		if err != nil || !dump {
			return errorAnswer(m, syscall.EOPNOTSUPP)
		}
		// A filter naming no table or chain dumps nothing, as the kernel.
		for _, t := range tables(r.Table) {
			for _, c := range t.chains {
				if r.Chain != "" && c.name != r.Chain {
					continue
				}
				for _, x := range c.rules {
					st := d.begin(nfnl.MsgNewRule, t.family, resID)
					nr := nfnl.Rule{Table: t.name, Chain: c.name, Handle: x.handle, Exprs: x.exprs, UserData: x.udata}
					if nr.Exprs == nil {
						nr.Exprs = []byte{}
					}
					nr.Append(&d.w)
					d.w.End(st)
				}
			}
		}
		return d.done()
	case nfnl.MsgGetSet:
		s, err := nfnl.ParseSet(m.Data)
		if err != nil || !dump {
			return errorAnswer(m, syscall.EOPNOTSUPP)
		}
		ts := tables(s.Table)
		if s.Table != "" && len(ts) == 0 {
			return errorAnswer(m, syscall.ENOENT)
		}
		for _, t := range ts {
			for _, x := range t.sets {
				st := d.begin(nfnl.MsgNewSet, t.family, resID)
				nl := x.nl
				nl.Table, nl.Name, nl.Handle, nl.ID = t.name, x.name, x.handle, 0
				if nl.Flags&nfnl.SetMap != 0 && nl.DataType == nfnl.DataVerdictType {
					nl.DataLen = 16 // sizeof(struct nft_verdict), as the kernel reports it
				}
				nl.Append(&d.w, true)
				d.w.End(st)
			}
		}
		return d.done()
	case nfnl.MsgGetSetElem:
		l, err := nfnl.ParseElemList(m.Data, nfnl.HdrLen+nfnl.GenLen)
		if err != nil || !dump {
			return errorAnswer(m, syscall.EOPNOTSUPP)
		}
		ts := tables(l.Table)
		if len(ts) == 0 {
			return errorAnswer(m, syscall.ENOENT)
		}
		s := ts[0].set(l.Set)
		if s == nil {
			return errorAnswer(m, syscall.ENOENT)
		}
		elems := s.elemsSorted()
		for i := 0; i < len(elems); { // an empty set answers with no message, as the kernel
			st := d.begin(nfnl.MsgNewSetElem, ts[0].family, resID)
			(&nfnl.ElemList{Table: ts[0].name, Set: s.name}).AppendHeader(&d.w)
			nest := d.w.Open(nfnl.ElemListElems)
			for ; i < len(elems) && d.w.NestLen(nest) < maxDatagram/2; i++ {
				e := elems[i]
				d.w.AppendElem(&nfnl.Elem{Key: e.key, KeyEnd: e.keyEnd, Flags: e.flags, Data: e.data, Verdict: e.verdict})
			}
			d.w.Close(nest)
			d.w.End(st)
		}
		return d.done()
	}
	return errorAnswer(m, syscall.EOPNOTSUPP)
}

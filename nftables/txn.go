package nftables

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/kernel"
)

// recvBufSize is the receive buffer: a dump datagram is at most 32 KiB.
const recvBufSize = 128 << 10

// errInterrupted reports a dump that a concurrent change interrupted.
var errInterrupted = errors.New("dump interrupted by a concurrent change")

// nextSeq returns a fresh sequence number.
func (t *Table) nextSeq() uint32 {
	t.seq++
	if t.seq == 0 {
		t.seq = 1
	}
	return t.seq
}

// rbuf returns the receive buffer.
func (t *Table) rbuf() []byte {
	if t.buf == nil {
		t.buf = make([]byte, recvBufSize)
	}
	return t.buf
}

// kernelErr converts a netlink error code to an error.
func kernelErr(errno int32) error { return syscall.Errno(-errno) }

// drain discards what is queued on the socket (answers of an exchange
// that failed halfway).
func (t *Table) drain(s kernel.NFTablesSocket) {
	buf := t.rbuf()
	for range 1024 {
		if n, err := s.Receive(buf, false); n == 0 && err == nil {
			return
		}
	}
}

// request sends one request and calls fn with each answer of its sequence
// number until the end: NLMSG_DONE for a dump, the one reply otherwise.
// An NLMSG_ERROR answer with an errno is returned as the errno.
func (t *Table) request(s kernel.NFTablesSocket, typ, flags uint16, attrs func(w *nfnl.Writer), fn func(m *nfnl.Msg) error) error {
	seq := t.nextSeq()
	var w nfnl.Writer
	st := w.Begin(nfnl.Type(typ), nfnl.FlagRequest|flags, seq, t.fam, 0)
	if attrs != nil {
		attrs(&w)
	}
	w.End(st)
	if err := s.Send(w.B); err != nil {
		return err
	}
	dump := flags&nfnl.FlagDump == nfnl.FlagDump
	buf := t.rbuf()
	intr := false
	for {
		n, err := s.Receive(buf, true)
		if err != nil {
			t.drain(s)
			return err
		}
		done := false
		err = nfnl.ForEachMsg(buf[:n], func(m *nfnl.Msg) error {
			if m.Seq != seq || done {
				return nil // an answer to an earlier exchange
			}
			switch m.Type {
			case nfnl.MsgDone:
				done = true
				return nil
			case nfnl.MsgError:
				e, err := nfnl.ParseError(m.Flags, m.Data)
				if err != nil {
					return err
				}
				done = true
				if e.Errno != 0 {
					return kernelErr(e.Errno)
				}
				return nil
			}
			if m.Flags&nfnl.FlagDumpIntr != 0 {
				intr = true
			}
			if !dump {
				done = true
			}
			return fn(m)
		})
		if err != nil {
			t.drain(s)
			return err
		}
		if done {
			if intr {
				return errInterrupted
			}
			return nil
		}
	}
}

// genID asks the kernel for its ruleset generation, which every committed
// transaction of any table changes.
func (t *Table) genID(s kernel.NFTablesSocket) (uint32, error) {
	t.statsMu.Lock()
	t.stats.GenChecks++
	t.statsMu.Unlock()
	var gen uint32
	err := t.request(s, nfnl.MsgGetGen, 0, nil, func(m *nfnl.Msg) error {
		var err error
		gen, err = nfnl.ParseGen(m.Data)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("ruleset generation: %w", err)
	}
	return gen, nil
}

// txn is one transaction being built: the batch and, per message, what it
// belongs to.
type txn struct {
	// w holds the requests; when framed, after room for the batch's
	// beginning, so that it is sent without a copy.
	framed bool
	w      nfnl.Writer
	msgs   []txMsg
	// elems counts the elements it adds.
	elems int
	// post updates the kernel picture once the kernel committed it.
	post []func(k *kstate)
}

// txMsg is one request of a transaction.
type txMsg struct {
	start int
	// obj is the object the request belongs to, and h what to hold of it
	// if the kernel refuses it.
	obj string
	h   hold
	// elems are the elements of an element request, in order, and offs
	// their offsets in the message (from its header).
	elems []elemAdd
	offs  []uint32
	// write is the request's Write in a Plan (a dry planner's), nil for
	// a request that is part of another's write (a rule's anonymous set,
	// the flush before a chain's deletion); an element request's lists
	// its elements (Plan gives one Write each).
	write *dataplane.Write
}

// frameLen is the length of a batch marker.
const frameLen = nfnl.HdrLen + nfnl.GenLen

// newTxn returns a framed transaction with room for about size bytes of
// requests.
func newTxn(size int) *txn {
	x := &txn{framed: true}
	x.w.B = make([]byte, frameLen, frameLen+size+frameLen)
	return x
}

// begin starts a request of the transaction for obj.
func (x *txn) begin(fam uint8, typ, flags uint16, obj string, h hold) int {
	start := x.w.Begin(nfnl.Type(typ), nfnl.FlagRequest|flags, 0, fam, 0)
	x.msgs = append(x.msgs, txMsg{start: start, obj: obj, h: h})
	return start
}

// empty reports whether the transaction holds no request.
func (x *txn) empty() bool { return len(x.msgs) == 0 }

// txErr is the kernel's refusal of one request of a transaction.
type txErr struct {
	msg    int // index in txn.msgs
	errno  int32
	offset uint32
	text   string
}

// send sends the transaction as one batch and returns the kernel's
// refusals: none when it committed. lost reports refusals that did not fit
// in the socket's queue (more may exist than those returned). The batch is
// processed before Send returns, so the answers are read without waiting.
func (t *Table) send(s kernel.NFTablesSocket, x *txn) (errs []txErr, lost bool, err error) {
	if !x.framed {
		y := newTxn(x.w.Len())
		y.appendTx(x)
		x = y
	}
	var marker nfnl.Writer
	st := marker.Begin(nfnl.BatchBegin, nfnl.FlagRequest, t.nextSeq(), 0, nfnl.SubsysNFTables)
	marker.End(st)
	copy(x.w.B, marker.B)
	first := t.seq + 1
	for i := range x.msgs {
		nfnl.PutSeq(x.w.B[x.msgs[i].start:], t.nextSeq())
	}
	n := x.w.Len()
	st = x.w.Begin(nfnl.BatchEnd, nfnl.FlagRequest, t.nextSeq(), 0, nfnl.SubsysNFTables)
	x.w.End(st)
	err = s.Send(x.w.B)
	x.w.Truncate(n)
	if err != nil {
		return nil, false, err
	}
	buf := t.rbuf()
	for {
		n, rerr := s.Receive(buf, false)
		if rerr != nil {
			if errors.Is(rerr, syscall.ENOBUFS) {
				lost = true
				continue
			}
			return errs, lost, rerr
		}
		if n == 0 {
			break
		}
		perr := nfnl.ForEachMsg(buf[:n], func(m *nfnl.Msg) error {
			if m.Type != nfnl.MsgError {
				return nil
			}
			e, err := nfnl.ParseError(m.Flags, m.Data)
			if err != nil || e.Errno == 0 {
				return err
			}
			idx := int(e.Seq) - int(first)
			if e.Seq < first || idx >= len(x.msgs) {
				idx = -1 // the batch itself
			}
			errs = append(errs, txErr{msg: idx, errno: e.Errno, offset: e.Offset, text: e.Text})
			return nil
		})
		if perr != nil {
			return errs, lost, perr
		}
	}
	return errs, lost, nil
}

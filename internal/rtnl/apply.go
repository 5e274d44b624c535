//go:build linux

package rtnl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"golang.org/x/sys/unix"
)

// maxSeqBeforeWrap keeps every batch's sequence numbers consecutive: when
// the counter gets this high, it restarts from 1 before the next batch.
const maxSeqBeforeWrap = math.MaxUint32 - 1<<20

// ApplyRoutes writes ops to the kernel in as few sendmsg calls as possible
// and returns one error per op, in order (nil = the kernel acknowledged
// it). Each message carries NLM_F_ACK and its own sequence number; a batch
// holds up to 64 KiB of messages, and no more than the socket receive
// buffer can hold acknowledgements for, so none is ever dropped.
//
// Errors are *OpError values. A kernel refusal wraps its unix.Errno
// (ENODEV: no such interface, ENETDOWN: interface down, ENETUNREACH:
// gateway not reachable, EEXIST: OpAdd of an existing route, ESRCH: OpDelete
// of a missing route, EINVAL…) and carries the kernel's message. One failed
// op never stops the others. An invalid op (Route.Validate, an unknown Kind)
// fails with ErrInvalidRoute and is not sent. When ctx ends, the ops not yet
// sent fail with ctx's error; a closed Conn fails every op with ErrClosed.
//
// The kernel applies the messages of a batch in order, so an OpDelete and a
// later OpReplace of the same route in one call end with the route present.
func (c *Conn) ApplyRoutes(ctx context.Context, ops []RouteOp) []error {
	errs := make([]error, len(ops))
	if len(ops) == 0 {
		return errs
	}
	fail := func(from int, err error) {
		for k := from; k < len(ops); k++ {
			if errs[k] == nil {
				errs[k] = opError(&ops[k], err, "")
			}
		}
	}
	if ctx == nil {
		fail(0, fmt.Errorf("%w: nil context", ErrInvalidArgument))
		return errs
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		fail(0, ErrClosed)
		return errs
	}
	if err := c.flushStale(ctx); err != nil {
		fail(0, err)
		return errs
	}
	for i := 0; i < len(ops); {
		if err := ctx.Err(); err != nil {
			fail(i, err)
			break
		}
		next, first := c.fillBatch(ops, i, errs)
		if len(c.idx) > 0 {
			if err := c.t.send(c.sbuf); err != nil {
				// The kernel saw none of the batch; later batches would fail
				// the same way.
				fail(i, fmt.Errorf("send: %w", err))
				c.stale = true
				break
			}
			if err := c.drainAcks(ctx, ops, first, errs); err != nil {
				fail(next, err)
				break
			}
		}
		i = next
	}
	return errs
}

// opError builds the error of op.
func opError(op *RouteOp, err error, msg string) *OpError {
	return &OpError{Kind: op.Kind, Dst: op.Route.Dst, Table: op.Route.Table, Err: err, Message: msg}
}

// checkOp validates one operation.
func checkOp(op *RouteOp) error {
	switch op.Kind {
	case OpReplace, OpAdd, OpDelete:
		return op.Route.check(op.Kind)
	}
	return fmt.Errorf("%w: unknown operation kind %d", ErrInvalidRoute, op.Kind)
}

// fillBatch encodes ops from i on into c.sbuf until the batch is full,
// recording in c.idx the op of each message; invalid ops get their error in
// errs and are skipped. It returns the index of the first op left out and
// the sequence number of the first message.
func (c *Conn) fillBatch(ops []RouteOp, i int, errs []error) (next int, first uint32) {
	c.sbuf, c.idx = c.sbuf[:0], c.idx[:0]
	if c.seq > maxSeqBeforeWrap {
		c.seq = 0
	}
	first = c.seq + 1
	budget := c.ackBudget
	for ; i < len(ops); i++ {
		op := &ops[i]
		if err := checkOp(op); err != nil {
			errs[i] = opError(op, err, "")
			continue
		}
		pos := len(c.sbuf)
		c.sbuf = appendRouteMsg(c.sbuf, op.Kind, c.seq+1, &op.Route)
		cost := ackCost
		if !c.capAck {
			cost += len(c.sbuf) - pos
		}
		if len(c.idx) > 0 && (len(c.sbuf) > batchBytes || cost > budget) {
			c.sbuf = c.sbuf[:pos]
			break
		}
		budget -= cost
		c.seq++
		c.idx = append(c.idx, i)
	}
	return i, first
}

// drainAcks reads the acknowledgements of the batch just sent (sequence
// numbers first … first+len(c.idx)-1) and records the failures in errs.
// Messages of other sequence numbers (left by an abandoned request) are
// skipped. Ops whose acknowledgement never comes get ErrAckLost. The error
// it returns is for the ops after the batch: the socket failed.
func (c *Conn) drainAcks(ctx context.Context, ops []RouteOp, first uint32, errs []error) error {
	n := len(c.idx)
	c.acked = slices.Grow(c.acked[:0], n)[:n]
	clear(c.acked)
	remaining, overrun, idle := n, false, 0
	var cause error
	for remaining > 0 && cause == nil {
		m, err := c.t.recv(c.rbuf)
		if err != nil {
			switch {
			case errors.Is(err, unix.ENOBUFS):
				overrun = true // the kernel dropped at least one ack
			case errors.Is(err, unix.EAGAIN):
				switch {
				case overrun:
					cause = unix.ENOBUFS
				case ctx.Err() != nil:
					cause = ctx.Err()
				case idle >= maxIdlePolls:
					cause = unix.ETIMEDOUT
				default:
					idle++
					if werr := c.t.wait(pollInterval); werr != nil {
						cause = werr
					}
				}
			default:
				cause = err
			}
			continue
		}
		idle = 0
		buf := c.rbuf[:min(m, len(c.rbuf))]
		for len(buf) > 0 {
			h, payload, rest, ok := nextMessage(buf)
			if !ok {
				break
			}
			buf = rest
			if h.typ != unix.NLMSG_ERROR {
				continue
			}
			k := h.seq - first
			if k >= uint32(n) || c.acked[k] {
				continue
			}
			c.acked[k] = true
			remaining--
			code, msg, ok := parseError(h, payload)
			switch {
			case !ok:
				errs[c.idx[k]] = opError(&ops[c.idx[k]], errMalformed("acknowledgement of %d bytes", len(payload)), "")
			case code != 0:
				errs[c.idx[k]] = opError(&ops[c.idx[k]], errnoOf(code), msg)
			}
		}
	}
	if remaining == 0 {
		return nil
	}
	c.stale = true
	lost := fmt.Errorf("%w: %w", ErrAckLost, cause)
	for k, got := range c.acked {
		if !got {
			errs[c.idx[k]] = opError(&ops[c.idx[k]], lost, "")
		}
	}
	if errors.Is(cause, unix.ENOBUFS) || errors.Is(cause, unix.ETIMEDOUT) {
		return nil // the socket still works: carry on with the next batch
	}
	return cause
}

// errnoOf turns a netlink error code (a negative errno) into a unix.Errno.
func errnoOf(code int32) unix.Errno {
	if code < 0 {
		code = -code
	}
	return unix.Errno(code)
}

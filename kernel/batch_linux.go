//go:build linux

package kernel

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

// opCodec describes one kind of batched write (routes, neighbours, FDB
// entries, rules) to applyOps.
type opCodec[T any] struct {
	// check validates an operation; its error wraps ErrInvalid.
	check func(op *T) error
	// encode appends the operation's request with sequence number seq.
	encode func(b []byte, seq uint32, op *T) []byte
	// describe names the operation ("replace route") and its object for
	// an OpError.
	describe func(op *T) (what, object string)
}

// opError builds the OpError of op.
func (k *opCodec[T]) opError(op *T, err error, msg string) *OpError {
	what, object := k.describe(op)
	return &OpError{Op: what, Object: object, Err: err, Message: msg}
}

// failOps returns one OpError with err per op: the result of a batched
// write that could not start.
func failOps[T any](ops []T, k *opCodec[T], err error) []error {
	errs := make([]error, len(ops))
	for i := range ops {
		errs[i] = k.opError(&ops[i], err, "")
	}
	return errs
}

// applyOps writes ops to the kernel in as few sendmsg calls as possible
// and returns one error per op, in order (nil = the kernel acknowledged
// it). Each message carries NLM_F_ACK and its own sequence number; a batch
// holds up to batchBytes of messages, and no more than the socket receive
// buffer can hold acknowledgements for, so none is ever dropped.
//
// Errors are *OpError values. A kernel refusal wraps its unix.Errno, with
// the package's sentinel attached by classify, and carries the kernel's
// extended-ack message. One failed op never stops the others. An invalid
// op (k.check) fails with its ErrInvalid error and is not sent. When ctx
// ends, the ops not yet sent fail with ctx's error; a closed conn fails
// every op with ErrClosed.
//
// The kernel applies the messages of a batch in order, so a delete and a
// later replace of the same object in one call end with the object
// present.
func applyOps[T any](c *conn, ctx context.Context, ops []T, k *opCodec[T]) []error {
	if len(ops) == 0 {
		return []error{}
	}
	if err := c.lock(ctx); err != nil {
		return failOps(ops, k, err)
	}
	defer c.mu.Unlock()
	errs := make([]error, len(ops))
	fail := func(from int, err error) {
		for i := from; i < len(ops); i++ {
			if errs[i] == nil {
				errs[i] = k.opError(&ops[i], err, "")
			}
		}
	}
	record := func(m int, err error, msg string) {
		i := c.idx[m]
		errs[i] = k.opError(&ops[i], err, msg)
	}
	for i := 0; i < len(ops); {
		if err := ctx.Err(); err != nil {
			fail(i, err)
			break
		}
		next, first := fillBatch(c, ops, i, errs, k)
		if len(c.idx) > 0 {
			if err := c.t.send(c.sbuf); err != nil {
				// The kernel saw none of the batch; later batches would fail
				// the same way.
				fail(i, fmt.Errorf("send: %w", err))
				c.stale = true
				break
			}
			if err := c.drainAcks(ctx, first, record); err != nil {
				fail(next, err)
				break
			}
		}
		i = next
	}
	return errs
}

// fillBatch encodes ops from i on into c.sbuf until the batch is full,
// recording in c.idx the op of each message; invalid ops get their error in
// errs and are skipped. It returns the index of the first op left out and
// the sequence number of the first message.
func fillBatch[T any](c *conn, ops []T, i int, errs []error, k *opCodec[T]) (next int, first uint32) {
	c.sbuf, c.idx = c.sbuf[:0], c.idx[:0]
	if c.seq > maxSeqBeforeWrap {
		c.seq = 0
	}
	first = c.seq + 1
	budget := c.ackBudget
	for ; i < len(ops); i++ {
		op := &ops[i]
		if err := k.check(op); err != nil {
			errs[i] = k.opError(op, err, "")
			continue
		}
		pos := len(c.sbuf)
		c.sbuf = k.encode(c.sbuf, c.seq+1, op)
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
// numbers first … first+len(c.idx)-1) and passes each failure to record
// with the message's index in the batch. Messages of other sequence
// numbers (left by an abandoned request) are skipped. Messages whose
// acknowledgement never comes are recorded with ErrAckLost. The error it
// returns is for the ops after the batch: the socket failed.
func (c *conn) drainAcks(ctx context.Context, first uint32, record func(m int, err error, msg string)) error {
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
				record(int(k), errMalformed("acknowledgement of %d bytes", len(payload)), "")
			case code != 0:
				record(int(k), classify(errnoOf(code)), msg)
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
			record(k, lost, "")
		}
	}
	if errors.Is(cause, unix.ENOBUFS) || errors.Is(cause, unix.ETIMEDOUT) {
		return nil // the socket still works: carry on with the next batch
	}
	return cause
}

//go:build linux

package kernel

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// dumpRequest describes one kind of dump (routes, neighbours, FDB entries,
// rules) to conn.dump.
type dumpRequest struct {
	// what names the dump in errors ("IPv4 route dump of table 100").
	what string
	// reply is the type of the messages that carry the objects
	// (RTM_NEWROUTE); others are skipped.
	reply uint16
	// encode appends the request with sequence number seq; strict says
	// whether the kernel filters dumps by the request's attributes.
	encode func(b []byte, seq uint32, strict bool) []byte
	// emptyOnENOENT makes an ENOENT that ends the dump an empty result (a
	// route table filtered for that does not exist).
	emptyOnENOENT bool
}

// dump sends req and hands the payload of every reply message of type
// req.reply to decode, straight from the receive buffer (decode must copy
// what it keeps). An error from decode ends the dump and is returned as
// is.
//
// If the kernel marks the dump as interrupted by a concurrent change
// (NLM_F_DUMP_INTR), dump stops calling decode, calls reset (if not nil)
// so the caller can drop what it received, and dumps again, at most
// DumpAttempts times in all; then it returns an error wrapping
// ErrDumpInterrupted. When ctx ends, dump returns ctx's error at once; the
// rest of the kernel's reply is discarded by the conn's next call.
//
// decode and reset run while c is locked: they must not use c.
func (c *conn) dump(ctx context.Context, req *dumpRequest, decode func(payload []byte) error, reset func()) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	defer c.mu.Unlock()
	for attempt := 1; ; attempt++ {
		intr, err := c.dumpOnce(ctx, req, decode)
		if err != nil || !intr {
			return err
		}
		if attempt >= DumpAttempts {
			return fmt.Errorf("kernel: %s interrupted %d times in a row: %w", req.what, attempt, ErrDumpInterrupted)
		}
		if reset != nil {
			reset()
		}
	}
}

// dumpOnce runs one dump. intr reports that the kernel marked it
// interrupted; decode is not called after that is seen.
func (c *conn) dumpOnce(ctx context.Context, req *dumpRequest, decode func([]byte) error) (intr bool, err error) {
	seq := c.nextSeq()
	c.sbuf = req.encode(c.sbuf[:0], seq, c.strict)
	if err := c.t.send(c.sbuf); err != nil {
		return false, fmt.Errorf("kernel: send %s request: %w", req.what, err)
	}
	// From here on, an early return leaves the rest of the dump queued.
	c.stale = true
	for idle := 0; ; {
		n, err := c.t.recv(c.rbuf)
		if err != nil {
			switch {
			case errors.Is(err, unix.ENOBUFS):
				continue // a dump is paused, never dropped, by a full buffer
			case !errors.Is(err, unix.EAGAIN):
				return intr, fmt.Errorf("kernel: receive %s: %w", req.what, err)
			}
			if err := ctx.Err(); err != nil {
				return intr, err
			}
			if idle >= maxIdlePolls {
				return intr, fmt.Errorf("kernel: %s: no reply from the kernel: %w", req.what, unix.ETIMEDOUT)
			}
			idle++
			if err := c.t.wait(pollInterval); err != nil {
				return intr, fmt.Errorf("kernel: %s: %w", req.what, err)
			}
			continue
		}
		idle = 0
		if n > len(c.rbuf) {
			return intr, errMalformed("%s datagram of %d bytes exceeds the %d-byte buffer", req.what, n, len(c.rbuf))
		}
		if err := ctx.Err(); err != nil {
			return intr, err
		}
		buf := c.rbuf[:n]
		for len(buf) > 0 {
			h, payload, rest, ok := nextMessage(buf)
			if !ok {
				break
			}
			buf = rest
			if h.seq != seq {
				continue // left by an earlier request
			}
			if h.flags&unix.NLM_F_DUMP_INTR != 0 {
				intr = true
			}
			switch h.typ {
			case unix.NLMSG_DONE, unix.NLMSG_ERROR:
				c.stale = false
				return intr, dumpEnd(h, payload, req)
			case req.reply:
				if intr {
					continue
				}
				if err := decode(payload); err != nil {
					return intr, err
				}
			}
		}
	}
}

// dumpEnd interprets the message that ends a dump: NLMSG_DONE (whose
// payload is an error code, 0 on success) or NLMSG_ERROR.
func dumpEnd(h header, payload []byte, req *dumpRequest) error {
	if len(payload) < 4 {
		if h.typ == unix.NLMSG_DONE {
			return nil // very old kernels send an empty NLMSG_DONE
		}
		return errMalformed("NLMSG_ERROR of %d bytes", len(payload))
	}
	code, msg, _ := parseError(h, payload)
	if code == 0 {
		return nil
	}
	errno := errnoOf(code)
	if errno == unix.ENOENT && req.emptyOnENOENT {
		return nil
	}
	if msg != "" {
		return fmt.Errorf("kernel: %s: %w (%s)", req.what, classify(errno), msg)
	}
	return fmt.Errorf("kernel: %s: %w", req.what, classify(errno))
}

//go:build linux

package rtnl

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// DumpRoutes streams every route of family (unix.AF_INET or AF_INET6) in
// table (0 = every table) to fn, parsing each straight from the receive
// buffer. fn gets a pointer to a Route that is reused for the next route:
// it must not keep the pointer (copy *r instead; NextHops is allocated per
// multipath route and may be kept). Cached routes (RTM_F_CLONED) are never
// reported.
//
// The table is filtered in the kernel where it can (strict dump checking
// with RTA_TABLE, Linux ≥ 4.20) and in userspace in any case. A table that
// does not exist is empty, not an error.
//
// If the kernel marks the dump as interrupted by a concurrent change
// (NLM_F_DUMP_INTR), DumpRoutes stops calling fn, calls reset (if not nil)
// so the caller can drop what it received, and dumps again, at most
// DumpAttempts times in all; then it returns an error wrapping
// ErrDumpInterrupted. Without reset, fn may see a route again after a
// restart.
//
// fn and reset run while c is busy: they must not call c's methods. An
// error from fn ends the dump and is returned as is. When ctx ends,
// DumpRoutes returns ctx's error at once; the rest of the kernel's reply is
// discarded by the Conn's next call.
func (c *Conn) DumpRoutes(ctx context.Context, family uint8, table uint32, fn func(*Route) error, reset func()) error {
	return c.dump(ctx, family, table, 0, fn, reset)
}

// DumpInterfaceRoutes is DumpRoutes limited to the routes that leave
// through the interface with index oif: as their output interface or as
// one of their next hops. The kernel filters by interface under strict
// dump checking (Linux ≥ 4.20) but still walks the whole table; older
// kernels send every route and DumpInterfaceRoutes filters them.
func (c *Conn) DumpInterfaceRoutes(ctx context.Context, family uint8, table uint32, oif int32, fn func(*Route) error, reset func()) error {
	if oif <= 0 {
		return fmt.Errorf("%w: interface index %d", ErrInvalidArgument, oif)
	}
	return c.dump(ctx, family, table, oif, fn, reset)
}

// dump implements DumpRoutes (oif 0) and DumpInterfaceRoutes.
func (c *Conn) dump(ctx context.Context, family uint8, table uint32, oif int32, fn func(*Route) error, reset func()) error {
	if family != unix.AF_INET && family != unix.AF_INET6 {
		return fmt.Errorf("%w: family %d is neither AF_INET nor AF_INET6", ErrInvalidArgument, family)
	}
	if fn == nil {
		return fmt.Errorf("%w: nil route callback", ErrInvalidArgument)
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if err := c.flushStale(ctx); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		intr, err := c.dumpOnce(ctx, family, table, oif, fn)
		if err != nil || !intr {
			return err
		}
		if attempt >= DumpAttempts {
			return fmt.Errorf("rtnl: %s route dump of table %d interrupted %d times in a row: %w",
				familyName(family), table, attempt, ErrDumpInterrupted)
		}
		if reset != nil {
			reset()
		}
	}
}

// dumpOnce runs one dump. intr reports that the kernel marked it
// interrupted; fn is not called after that is seen.
func (c *Conn) dumpOnce(ctx context.Context, family uint8, table uint32, oif int32, fn func(*Route) error) (intr bool, err error) {
	seq := c.nextSeq()
	c.sbuf = appendDumpRequest(c.sbuf[:0], seq, family, table, oif, c.strict)
	if err := c.t.send(c.sbuf); err != nil {
		return false, fmt.Errorf("rtnl: send route dump request: %w", err)
	}
	// From here on, an early return leaves the rest of the dump queued.
	c.stale = true
	r := &c.route
	for idle := 0; ; {
		n, err := c.t.recv(c.rbuf)
		if err != nil {
			switch {
			case errors.Is(err, unix.ENOBUFS):
				continue // a dump is paused, never dropped, by a full buffer
			case !errors.Is(err, unix.EAGAIN):
				return intr, fmt.Errorf("rtnl: receive route dump: %w", err)
			}
			if err := ctx.Err(); err != nil {
				return intr, err
			}
			if idle >= maxIdlePolls {
				return intr, fmt.Errorf("rtnl: route dump: no reply from the kernel: %w", unix.ETIMEDOUT)
			}
			idle++
			if err := c.t.wait(pollInterval); err != nil {
				return intr, fmt.Errorf("rtnl: route dump: %w", err)
			}
			continue
		}
		idle = 0
		if n > len(c.rbuf) {
			return intr, errMalformed("route dump datagram of %d bytes exceeds the %d-byte buffer", n, len(c.rbuf))
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
				return intr, dumpEnd(h, payload, table)
			case unix.RTM_NEWROUTE:
				if intr {
					continue
				}
				ok, err := decodeRoute(payload, r)
				if err != nil {
					return intr, err
				}
				if !ok || r.Family != family || (table != 0 && r.Table != table) || r.Flags&unix.RTM_F_CLONED != 0 ||
					(oif != 0 && !r.Uses(oif)) {
					continue
				}
				if err := fn(r); err != nil {
					return intr, err
				}
			}
		}
	}
}

// dumpEnd interprets the message that ends a dump: NLMSG_DONE (whose
// payload is an error code, 0 on success) or NLMSG_ERROR. ENOENT for a
// filtered dump means the table does not exist: an empty result.
func dumpEnd(h header, payload []byte, table uint32) error {
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
	if errno == unix.ENOENT && table != 0 {
		return nil
	}
	if msg != "" {
		return fmt.Errorf("rtnl: route dump: %w (%s)", errno, msg)
	}
	return fmt.Errorf("rtnl: route dump: %w", errno)
}

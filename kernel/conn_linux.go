//go:build linux

package kernel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/errs"
)

// Socket sizing and patience of the NETLINK_ROUTE socket that carries
// batched writes and streaming dumps.
const (
	// rcvBufSize is the socket receive buffer asked for (SO_RCVBUFFORCE,
	// else SO_RCVBUF up to net.core.rmem_max); the kernel doubles it.
	rcvBufSize = 8 << 20
	// sndBufSize is the socket send buffer asked for: a batch must fit.
	sndBufSize = 1 << 20
	// batchBytes is how many bytes of requests one sendmsg carries at most.
	batchBytes = 64 << 10
	// recvBufLen is the receive buffer of a conn: the kernel fills dump
	// datagrams up to about 32 KiB.
	recvBufLen = 64 << 10
	// ackCost is what one queued acknowledgement is assumed to take from
	// the socket receive buffer (skb truesize of a small NLMSG_ERROR,
	// rounded up generously); without NETLINK_CAP_ACK an error also echoes
	// the request, which is added.
	ackCost = 1280
	// minAckBudget keeps batching alive on a tiny receive buffer.
	minAckBudget = 16 * ackCost
	// pollInterval is how long one wait for a datagram lasts before the
	// context is checked again.
	pollInterval = 100 * time.Millisecond
	// maxIdlePolls is how many empty waits in a row end a request: the
	// kernel answers rtnetlink requests synchronously, so this is only a
	// safety net (5 s).
	maxIdlePolls = 50
)

// transport is the netlink socket as conn uses it; tests replace it with a
// scripted kernel.
type transport interface {
	// send sends one datagram of requests.
	send(b []byte) error
	// recv reads one datagram into b without blocking. It returns
	// unix.EAGAIN when none is queued, and n > len(b) when the datagram
	// was truncated to len(b).
	recv(b []byte) (n int, err error)
	// wait blocks until a datagram is queued or timeout passes.
	wait(timeout time.Duration) error
	// close releases the socket.
	close() error
}

// conn is a NETLINK_ROUTE socket of one namespace, for batched writes
// (applyOps) and streaming dumps (dump). Its methods run one at a time.
type conn struct {
	mu     sync.Mutex
	t      transport
	closed bool

	seq       uint32
	strict    bool // kernel-side dump filtering (NETLINK_GET_STRICT_CHK)
	capAck    bool // error acks do not echo the request (NETLINK_CAP_ACK)
	ackBudget int  // receive-buffer bytes that queued acks may use
	stale     bool // an abandoned request may have left messages queued

	sbuf  []byte // requests of one batch
	rbuf  []byte // one received datagram
	idx   []int  // op index of each message of the batch
	acked []bool // whether each message of the batch was acknowledged
	route Route  // the route handed to DumpRoutes' callback
}

// newConn builds a conn over a socket. Acknowledgements may fill half the
// receive buffer (the kernel's own accounting is approximate).
func newConn(s *socket) *conn { return newConnOn(s, s.strict, s.capAck, s.rcvbuf/2) }

// newConnOn builds a conn over a transport.
func newConnOn(t transport, strict, capAck bool, ackBudget int) *conn {
	return &conn{
		t:         t,
		strict:    strict,
		capAck:    capAck,
		ackBudget: max(ackBudget, minAckBudget),
		sbuf:      make([]byte, 0, batchBytes+4096),
		rbuf:      make([]byte, recvBufLen),
	}
}

// close closes the socket once; it waits for a running call to finish.
func (c *conn) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.t.close()
}

// lock takes c for one call, discarding what an abandoned request left
// queued. On error c is not locked.
func (c *conn) lock(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if err := c.flushStale(ctx); err != nil {
		c.mu.Unlock()
		return err
	}
	return nil
}

// nextSeq returns a fresh sequence number (never 0).
func (c *conn) nextSeq() uint32 {
	c.seq++
	if c.seq == 0 {
		c.seq = 1
	}
	return c.seq
}

// flushStale discards whatever an abandoned request left queued. Reading
// makes the kernel continue an unfinished dump, so this ends only after
// that dump's last datagram.
func (c *conn) flushStale(ctx context.Context) error {
	if !c.stale {
		return nil
	}
	for idle := 0; ; {
		_, err := c.t.recv(c.rbuf)
		if err == nil || errors.Is(err, unix.ENOBUFS) {
			idle = 0
			continue
		}
		if !errors.Is(err, unix.EAGAIN) {
			return fmt.Errorf("kernel: discard stale replies: %w", err)
		}
		// An unfinished dump continues inside recv, so an empty queue means
		// everything was discarded; look once more after a moment in case
		// the kernel was still producing.
		if idle > 0 {
			c.stale = false
			return nil
		}
		idle++
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.t.wait(time.Millisecond); err != nil {
			return fmt.Errorf("kernel: discard stale replies: %w", err)
		}
	}
}

// socket is a NETLINK_ROUTE socket, bound and connected to the kernel.
type socket struct {
	fd     int
	strict bool
	capAck bool
	rcvbuf int
}

// newSocket creates a socket in the calling thread's network namespace.
func newSocket() (*socket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("kernel: netlink socket: %w", err)
	}
	s := &socket{fd: fd}
	fail := func(what string, err error) (*socket, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("kernel: %s: %w", what, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fail("bind netlink socket", err)
	}
	// Connected to the kernel (port 0): only the kernel can send to us.
	if err := unix.Connect(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fail("connect netlink socket", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, sndBufSize)
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBufSize) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBufSize)
	}
	if s.rcvbuf, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF); err != nil {
		return fail("read SO_RCVBUF", err)
	}
	s.capAck = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1) == nil
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	s.strict = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 1) == nil
	return s, nil
}

func (s *socket) send(b []byte) error {
	for {
		_, err := unix.Write(s.fd, b)
		if err != unix.EINTR {
			return err
		}
	}
}

func (s *socket) recv(b []byte) (int, error) {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, uintptr(s.fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))),
			uintptr(len(b)), unix.MSG_DONTWAIT|unix.MSG_TRUNC, 0, 0)
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, errno
	}
}

func (s *socket) wait(timeout time.Duration) error {
	fds := [1]unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
	_, err := unix.Poll(fds[:], int(timeout/time.Millisecond))
	if err == unix.EINTR {
		return nil
	}
	return err
}

func (s *socket) close() error { return unix.Close(s.fd) }

// classify attaches the package's sentinel to a kernel error, so that
// errors.Is works with both: EEXIST is ErrExists; ENOENT, ESRCH, ENODEV
// and EADDRNOTAVAIL are ErrNotFound; EOPNOTSUPP is ErrNotSupported; an
// interrupted dump of the netlink library is ErrDumpInterrupted. The text
// and the errno stay as they are.
func classify(err error) error {
	var s error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		s = ErrExists
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ESRCH), errors.Is(err, unix.ENODEV), errors.Is(err, unix.EADDRNOTAVAIL):
		s = ErrNotFound
	case errors.Is(err, unix.EOPNOTSUPP):
		s = ErrNotSupported
	case errors.Is(err, netlink.ErrDumpInterrupted):
		s = ErrDumpInterrupted
	default:
		return err
	}
	if errors.Is(err, s) {
		return err
	}
	return errs.Also(err, s)
}

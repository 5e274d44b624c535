//go:build linux

package kernel

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Socket buffer sizes: the receive queue holds the kernel's answers to a
// whole transaction (errors only: successful requests are not
// acknowledged), the send buffer grows to the largest datagram sent.
const (
	socketRcvBuf = 4 << 20
	socketSndBuf = 1 << 20
	// socketTimeout bounds a blocking receive: the kernel answers a dump
	// request at once, so a longer wait is a bug, not a slow kernel.
	socketTimeout = 60
)

// nlSocket is a NETLINK_NETFILTER socket.
type nlSocket struct {
	fd     int
	sndbuf int
}

// OpenNFTablesSocket returns a new socket to the nf_tables of the
// process's network namespace (that of the calling thread).
func OpenNFTablesSocket() (NFTablesSocket, error) { return openNFTablesSocket() }

// OpenNFTablesSocket returns a new socket to the namespace's nf_tables,
// opened inside it: it stays there, also after ns is closed.
func (ns *Namespace) OpenNFTablesSocket() (NFTablesSocket, error) {
	if err := ns.acquire(context.Background()); err != nil {
		return nil, err
	}
	defer ns.release()
	var s NFTablesSocket
	err := ns.do(func() (err error) { s, err = openNFTablesSocket(); return err })
	return s, err
}

// openNFTablesSocket opens a socket in the calling thread's namespace.
func openNFTablesSocket() (NFTablesSocket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("kernel: netfilter netlink socket: %w", err)
	}
	s := &nlSocket{fd: fd}
	if err := s.setup(); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("kernel: %w", err)
	}
	return s, nil
}

func (s *nlSocket) setup() error {
	if err := unix.Bind(s.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("bind netfilter netlink socket: %w", err)
	}
	// Errors carry the offset of the attribute at fault (an element of a
	// set) and not the request they answer.
	for _, opt := range []int{unix.NETLINK_EXT_ACK, unix.NETLINK_CAP_ACK} {
		if err := unix.SetsockoptInt(s.fd, unix.SOL_NETLINK, opt, 1); err != nil {
			return fmt.Errorf("netfilter netlink socket option %d: %w", opt, err)
		}
	}
	if unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, socketRcvBuf) != nil {
		_ = unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, socketRcvBuf)
	}
	if err := s.growSndbuf(socketSndBuf); err != nil {
		return err
	}
	tv := unix.Timeval{Sec: socketTimeout}
	if err := unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("netfilter netlink socket timeout: %w", err)
	}
	return nil
}

// growSndbuf makes the send buffer hold a datagram of n bytes.
func (s *nlSocket) growSndbuf(n int) error {
	if n <= s.sndbuf {
		return nil
	}
	if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, n); err != nil {
		if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_SNDBUF, n); err != nil {
			return fmt.Errorf("netfilter netlink send buffer of %d bytes: %w", n, err)
		}
	}
	s.sndbuf = n
	return nil
}

func (s *nlSocket) Send(b []byte) error {
	// The kernel refuses a datagram larger than the send buffer less a
	// little (EMSGSIZE).
	if err := s.growSndbuf(len(b) + 4096); err != nil {
		return err
	}
	for {
		err := unix.Sendto(s.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("send to nf_tables: %w", err)
		}
		return nil
	}
}

func (s *nlSocket) Receive(b []byte, block bool) (int, error) {
	flags := unix.MSG_TRUNC
	if !block {
		flags |= unix.MSG_DONTWAIT
	}
	for {
		n, _, err := unix.Recvfrom(s.fd, b, flags)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case !block && (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EWOULDBLOCK)):
			return 0, nil
		case errors.Is(err, unix.ENOBUFS):
			return 0, fmt.Errorf("receive from nf_tables: answers lost: %w", syscall.ENOBUFS)
		case err != nil:
			return 0, fmt.Errorf("receive from nf_tables: %w", err)
		case n > len(b):
			return 0, fmt.Errorf("receive from nf_tables: datagram of %d bytes truncated to %d", n, len(b))
		}
		return n, nil
	}
}

func (s *nlSocket) Close() error {
	if s.fd < 0 {
		return nil
	}
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}

//go:build linux

package policy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Probe timing: an expected deny gets one attempt of denyTimeout; an
// expected allow gets allowTries attempts of allowTimeout, so a busy
// machine does not turn a slow answer into a deny. Nothing asserts time.
const (
	// ttPort is the port every probe server listens on, TCP, UDP and SCTP.
	ttPort       = 8080
	denyTimeout  = 400 * time.Millisecond
	allowTimeout = 1500 * time.Millisecond
	allowTries   = 3
	probeWorkers = 8
)

// sctpAvailable reports whether the kernel of ns makes SCTP sockets.
func sctpAvailable(ns *kerneltest.NS) (bool, error) {
	ok := false
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP)
		if err != nil {
			if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ESOCKTNOSUPPORT) || errors.Is(err, unix.EAFNOSUPPORT) {
				return nil
			}
			return err
		}
		ok = true
		return unix.Close(fd)
	})
	return ok, err
}

// serve starts, inside ns, a TCP and a UDP echo server and (when sctp) an
// SCTP server that accepts and closes, on addr and ttPort;
// they stop when the test ends.
func serve(t *testing.T, ns *kerneltest.NS, addr netip.Addr, sctp bool) {
	t.Helper()
	var closers []func()
	var wg sync.WaitGroup
	t.Cleanup(func() {
		for _, c := range closers {
			c()
		}
		wg.Wait()
	})
	err := ns.Do(func() error {
		for _, port := range []uint16{ttPort} {
			ap := netip.AddrPortFrom(addr, port)
			l, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(ap))
			if err != nil {
				return err
			}
			closers = append(closers, func() { _ = l.Close() })
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					go func() {
						defer c.Close()
						_ = c.SetDeadline(time.Now().Add(5 * time.Second))
						buf := make([]byte, 64)
						n, _ := c.Read(buf)
						_, _ = c.Write(buf[:n])
					}()
				}
			}()
			u, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
			if err != nil {
				return err
			}
			closers = append(closers, func() { _ = u.Close() })
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 64)
				for {
					n, from, err := u.ReadFromUDPAddrPort(buf)
					if err != nil {
						return
					}
					_, _ = u.WriteToUDPAddrPort(buf[:n], from)
				}
			}()
			if !sctp {
				continue
			}
			f, err := sctpListen(ap)
			if err != nil {
				return err
			}
			closers = append(closers, func() { _ = f.Close() })
			wg.Add(1)
			go func() {
				defer wg.Done()
				sctpAcceptLoop(f)
			}()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("servers in %s on %s: %v", ns, addr, err)
	}
}

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

func sctpSocket(ap netip.AddrPort) (int, error) {
	af := unix.AF_INET6
	if ap.Addr().Is4() {
		af = unix.AF_INET
	}
	return unix.Socket(af, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_SCTP)
}

// sctpListen returns a listening SCTP socket on ap as a pollable file.
func sctpListen(ap netip.AddrPort) (*os.File, error) {
	fd, err := sctpSocket(ap)
	if err != nil {
		return nil, fmt.Errorf("sctp socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, sockaddr(ap)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sctp bind %s: %w", ap, err)
	}
	if err := unix.Listen(fd, 64); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sctp listen %s: %w", ap, err)
	}
	return os.NewFile(uintptr(fd), "sctp-listen"), nil
}

// sctpAcceptLoop accepts and closes associations until f is closed.
func sctpAcceptLoop(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	for {
		var accErr error
		err := rc.Read(func(fd uintptr) bool {
			nfd, _, err := unix.Accept4(int(fd), unix.SOCK_CLOEXEC)
			if errors.Is(err, unix.EAGAIN) {
				return false
			}
			if err == nil {
				go func() {
					time.Sleep(100 * time.Millisecond)
					unix.Close(nfd)
				}()
			}
			accErr = err
			return true
		})
		if err != nil || (accErr != nil && !errors.Is(accErr, unix.ECONNABORTED)) {
			return
		}
	}
}

// errNoAnswer marks a probe the network did not answer (a deny).
var errNoAnswer = errors.New("no answer")

// dialOnce makes one attempt of a probe from ns within timeout: a TCP or
// UDP exchange with an echo server, or an SCTP association. It returns nil
// when the peer answered, an error wrapping errNoAnswer when the network
// did not, and any other error when the harness failed.
func dialOnce(ns *kerneltest.NS, proto netfilter.Proto, to netip.AddrPort, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	token := []byte(fmt.Sprintf("probe %s %s", proto, to))
	var conn net.Conn
	var sctpFile *os.File
	err := ns.Do(func() error {
		switch proto {
		case netfilter.ProtoTCP, netfilter.ProtoUDP:
			var d net.Dialer
			c, err := d.DialContext(ctx, proto.String(), to.String())
			conn = c
			return err
		case netfilter.ProtoSCTP:
			fd, err := sctpSocket(to)
			if err != nil {
				return err
			}
			if err := unix.Connect(fd, sockaddr(to)); err != nil && !errors.Is(err, unix.EINPROGRESS) {
				unix.Close(fd)
				return err
			}
			sctpFile = os.NewFile(uintptr(fd), "sctp-dial")
			return nil
		}
		return fmt.Errorf("protocol %s not probed", proto)
	})
	if err != nil {
		return noAnswer(err)
	}
	if sctpFile != nil {
		defer sctpFile.Close()
		_ = sctpFile.SetWriteDeadline(deadline)
		rc, err := sctpFile.SyscallConn()
		if err != nil {
			return err
		}
		var soErr int
		err = rc.Write(func(fd uintptr) bool {
			var pfd = []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			if n, _ := unix.Poll(pfd, 0); n == 0 {
				return false
			}
			soErr, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
			return true
		})
		if err != nil {
			return noAnswer(err)
		}
		if soErr != 0 {
			return noAnswer(syscall.Errno(soErr))
		}
		return nil
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write(token); err != nil {
		return noAnswer(err)
	}
	buf := make([]byte, len(token)+8)
	n, err := conn.Read(buf)
	if err != nil {
		return noAnswer(err)
	}
	if !bytes.Equal(buf[:n], token) {
		return fmt.Errorf("echo from %s/%s mismatched: %q", proto, to, buf[:n])
	}
	return nil
}

// noAnswer marks network failures (timeouts, refusals, resets) as
// errNoAnswer and leaves other errors alone.
func noAnswer(err error) error {
	for _, target := range []error{
		os.ErrDeadlineExceeded, context.DeadlineExceeded, unix.ECONNREFUSED, unix.ECONNRESET,
		unix.EHOSTUNREACH, unix.ENETUNREACH, unix.ETIMEDOUT, unix.EPERM, unix.EACCES, unix.EPIPE,
	} {
		if errors.Is(err, target) {
			return fmt.Errorf("%w: %w", errNoAnswer, err)
		}
	}
	return err
}

// probe runs p from its source's namespace: an expected allow is tried
// allowTries times, an expected deny once. It returns whether the peer
// answered.
func probe(ns *kerneltest.NS, proto netfilter.Proto, to netip.AddrPort, expectAllow bool) (bool, error) {
	tries, timeout := 1, denyTimeout
	if expectAllow {
		tries, timeout = allowTries, allowTimeout
	}
	var err error
	for range tries {
		err = dialOnce(ns, proto, to, timeout)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, errNoAnswer) {
			return false, err
		}
	}
	return false, nil
}

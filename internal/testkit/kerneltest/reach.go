//go:build linux

package kerneltest

import (
	"github.com/nodeplane/nodeplane/command"

	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// DefaultTimeout bounds one reachability probe (a TCP dial and echo) whose
// context has no deadline, and each attempt of Require and Eventually.
const DefaultTimeout = 2 * time.Second

// retryInterval is the pause between Eventually attempts.
const retryInterval = 50 * time.Millisecond

// ErrUnreachable is wrapped by Ping and DialTCP errors that mean the
// destination did not answer: no reply, an ICMP error, no route, a refused or
// reset connection, or a timeout. Harness failures (a missing binary, a closed
// namespace, bad input) do not wrap it.
var ErrUnreachable = errors.New("kerneltest: unreachable")

// Ping sends ICMP echo requests from the namespace to addr with
// `ping -c1 -w3` (IPv4 or IPv6 by addr's family): one request a second until
// a reply arrives, for at most three seconds, so that neighbour resolution
// on a loaded machine does not look like a lost packet. A network that
// refuses the packet (no route, a local reject) fails at once. An error wrapping ErrUnreachable means no reply came.
func (ns *NS) Ping(ctx context.Context, to netip.Addr) error {
	if !to.IsValid() {
		return fmt.Errorf("%w: ping from %s: invalid address", ErrInvalid, ns.name)
	}
	to = to.Unmap()
	family := "-6"
	if to.Is4() {
		family = "-4"
	}
	_, err := ns.Exec(ctx, "ping", family, "-n", "-c1", "-w3", to.String())
	if err == nil {
		return nil
	}
	if ee := (*command.Error)(nil); errors.As(err, &ee) && pingUnreachable(ee.ExitCode, ee.Stderr) {
		return fmt.Errorf("%w: ping %s from netns %s: %w", ErrUnreachable, to, ns.name, err)
	}
	return fmt.Errorf("ping %s from netns %s: %w", to, ns.name, err)
}

// pingUnreachable classifies an iputils ping failure: status 1 is "no
// reply"; status 2 is an error, which means unreachable only when the
// network refused the packet (no route, or a firewall rejecting it locally).
func pingUnreachable(exitCode int, stderr []byte) bool {
	switch exitCode {
	case 1:
		return true
	case 2:
		msg := strings.ToLower(string(stderr))
		for _, s := range []string{"unreachable", "no route to host", "sendmsg: operation not permitted"} {
			if strings.Contains(msg, s) {
				return true
			}
		}
	}
	return false
}

// DialTCP connects from the namespace to to, sends a random token and
// expects it echoed back (as ListenTCP's server does), all within ctx's
// deadline or DefaultTimeout. An error wrapping ErrUnreachable means the
// connection or the exchange failed on the network path. Over IPv6 the
// kernel fails a connect to an unroutable address only after one SYN
// retransmission (about a second), not at the first ICMPv6 error.
func (ns *NS) DialTCP(ctx context.Context, to netip.AddrPort) error {
	if !to.Addr().IsValid() || to.Port() == 0 {
		return fmt.Errorf("%w: dial from %s: invalid address %v", ErrInvalid, ns.name, to)
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	to = netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
	network := "tcp6"
	if to.Addr().Is4() {
		network = "tcp4"
	}
	var conn net.Conn
	err := ns.Do(func() error {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, to.String())
		conn = c
		return err
	})
	if err != nil {
		return tcpError(ns, to, "connect", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	token := make([]byte, 16)
	_, _ = rand.Read(token)
	if _, err := conn.Write(token); err != nil {
		return tcpError(ns, to, "send", err)
	}
	echo := make([]byte, len(token))
	if _, err := io.ReadFull(conn, echo); err != nil {
		return tcpError(ns, to, "receive", err)
	}
	if !bytes.Equal(echo, token) {
		return fmt.Errorf("kerneltest: tcp %s from netns %s: echo mismatch (is the peer a ListenTCP server?)", to, ns.name)
	}
	return nil
}

// tcpError wraps a TCP failure, marking network-path failures unreachable.
func tcpError(ns *NS, to netip.AddrPort, step string, err error) error {
	if tcpUnreachable(err) {
		return fmt.Errorf("%w: tcp %s from netns %s: %s: %w", ErrUnreachable, to, ns.name, step, err)
	}
	return fmt.Errorf("kerneltest: tcp %s from netns %s: %s: %w", to, ns.name, step, err)
}

// tcpUnreachable reports whether err means the network path failed rather
// than the harness.
func tcpUnreachable(err error) bool {
	for _, target := range []error{
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EHOSTUNREACH, syscall.ENETUNREACH,
		syscall.ETIMEDOUT, syscall.EPIPE, syscall.EPERM, syscall.EACCES,
		context.DeadlineExceeded, os.ErrDeadlineExceeded, io.EOF, io.ErrUnexpectedEOF,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// withDefaultTimeout adds DefaultTimeout to a context without a deadline.
func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}

// ListenTCP opens a TCP echo server inside the namespace on addr and returns
// the address it is bound to (port 0 picks a free port) and a function that
// stops it; t.Cleanup stops it too. The listening socket is created on a
// thread inside the namespace. An addr with an invalid Addr listens on every
// IPv4 and IPv6 address of the namespace. A setup failure fails the test.
func (ns *NS) ListenTCP(t testing.TB, addr netip.AddrPort) (netip.AddrPort, func()) {
	t.Helper()
	network, laddr := "tcp", fmt.Sprintf(":%d", addr.Port())
	if addr.Addr().IsValid() {
		network, laddr = "tcp6", addr.String()
		if addr.Addr().Unmap().Is4() {
			network, laddr = "tcp4", netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()).String()
		}
	}
	var ln net.Listener
	err := ns.Do(func() error {
		var err error
		ln, err = net.Listen(network, laddr)
		return err
	})
	if err != nil {
		t.Fatalf("kerneltest: listen on tcp %s in netns %s: %v", laddr, ns.name, err)
		return netip.AddrPort{}, func() {}
	}
	s := &echoServer{ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.stop)
	return ln.Addr().(*net.TCPAddr).AddrPort(), s.stop
}

// echoServer echoes every connection back until the peer closes it.
type echoServer struct {
	ln       net.Listener
	wg       sync.WaitGroup
	stopOnce sync.Once

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

func (s *echoServer) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // listener closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.echo(c)
	}
}

func (s *echoServer) echo(c net.Conn) {
	defer s.wg.Done()
	_ = c.SetDeadline(time.Now().Add(2 * DefaultTimeout))
	_, _ = io.Copy(c, c)
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// stop closes the listener and every open connection and waits for the
// server's goroutines.
func (s *echoServer) stop() {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.ln.Close()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
}

// Check is one named reachability probe; Run returns nil when it passes.
type Check struct {
	// Name describes the probe in failure messages.
	Name string
	// Run performs the probe once.
	Run func(ctx context.Context) error
}

// PingCheck is a Check that from pings to (see NS.Ping).
func PingCheck(from *NS, to netip.Addr) Check {
	return Check{
		Name: fmt.Sprintf("ping %s from netns %s", to, from.Name()),
		Run:  func(ctx context.Context) error { return from.Ping(ctx, to) },
	}
}

// TCPCheck is a Check that from connects to to and exchanges data with a
// ListenTCP server there (see NS.DialTCP).
func TCPCheck(from *NS, to netip.AddrPort) Check {
	return Check{
		Name: fmt.Sprintf("tcp %s from netns %s", to, from.Name()),
		Run:  func(ctx context.Context) error { return from.DialTCP(ctx, to) },
	}
}

// Not inverts a reachability Check: it passes when c fails with
// ErrUnreachable, fails when c passes, and passes any other error of c
// through, so a broken harness never counts as "unreachable".
func Not(c Check) Check {
	return Check{
		Name: "not " + c.Name,
		Run: func(ctx context.Context) error {
			err := c.Run(ctx)
			switch {
			case err == nil:
				return fmt.Errorf("kerneltest: %s succeeded, expected it to fail as unreachable", c.Name)
			case errors.Is(err, ErrUnreachable):
				return nil
			default:
				return err
			}
		},
	}
}

// Require runs c once, bounded by DefaultTimeout, and fails the test if it
// does not pass.
func Require(t testing.TB, c Check) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), DefaultTimeout)
	defer cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatalf("kerneltest: %s: %v", c.Name, err)
	}
}

// Eventually runs c until it passes, failing the test with the last error if
// it has not passed after timeout. Each attempt is bounded by DefaultTimeout
// (or what is left of timeout). Use it where the kernel converges
// asynchronously, such as neighbour resolution or route propagation.
func Eventually(t testing.TB, timeout time.Duration, c Check) {
	t.Helper()
	if err := eventually(t.Context(), timeout, c); err != nil {
		t.Fatalf("kerneltest: %s: %v", c.Name, err)
	}
}

// eventually is Eventually returning the error instead of failing a test.
func eventually(ctx context.Context, timeout time.Duration, c Check) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, DefaultTimeout)
		err := c.Run(actx)
		acancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still failing after %v (%d attempts): %w", timeout, attempt, err)
		case <-time.After(retryInterval):
		}
	}
}

// RequireReachable fails the test unless from gets a ping reply from to.
func RequireReachable(t testing.TB, from *NS, to netip.Addr) {
	t.Helper()
	Require(t, PingCheck(from, to))
}

// RequireUnreachable fails the test unless a ping from from to to gets no
// reply (and the ping itself ran).
func RequireUnreachable(t testing.TB, from *NS, to netip.Addr) {
	t.Helper()
	Require(t, Not(PingCheck(from, to)))
}

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nodeplane/nodeplane/kernel"
)

// netnsSet is the network namespaces the test made (named with its prefix),
// deleted at the end. Nothing else is touched: the host namespace's links,
// routes and firewall stay as they are.
type netnsSet struct {
	prefix string
	mu     sync.Mutex
	names  []string
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// add makes the namespace prefix+short with lo up and returns its name.
func (s *netnsSet) add(short string) (string, error) {
	name := s.prefix + short
	if err := ipCmd("netns", "add", name); err != nil {
		return "", err
	}
	s.mu.Lock()
	s.names = append(s.names, name)
	s.mu.Unlock()
	return name, ipCmd("-n", name, "link", "set", "lo", "up")
}

// deleteAll deletes every namespace of the set, newest first.
func (s *netnsSet) deleteAll() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for i := len(s.names) - 1; i >= 0; i-- {
		if err := ipCmd("netns", "delete", s.names[i]); err != nil {
			errs = append(errs, err)
		}
	}
	s.names = nil
	return errs
}

func nsPath(name string) string { return filepath.Join("/run/netns", name) }

// inNetNS runs fn on a thread inside the named namespace; sockets fn opens
// stay there.
func inNetNS(name string, fn func() error) error {
	ns, err := kernel.Open(nsPath(name))
	if err != nil {
		return err
	}
	defer ns.Close()
	return ns.Do(fn)
}

// ping sends one ping from namespace ns to ip and waits a second for the answer.
func ping(ns string, ip netip.Addr) error {
	out, err := exec.Command("ip", "netns", "exec", ns, "ping", "-n", "-q", "-c", "1", "-W", "1", ip.String()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ping %v from %s: %v: %s", ip, ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// whoami connects from namespace ns to to and returns what the server
// says (the backend pods answer with their name).
func whoami(ns string, to netip.AddrPort, timeout time.Duration) (string, error) {
	var c net.Conn
	if err := inNetNS(ns, func() error {
		d := net.Dialer{Timeout: timeout}
		var err error
		c, err = d.DialContext(context.Background(), "tcp", to.String())
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(c)
	if err != nil {
		return "", fmt.Errorf("read from %v: %w", to, err)
	}
	return string(b), nil
}

// serveName makes namespace ns answer every TCP connection to port with
// name; the listener is returned for closing.
func serveName(ns string, port int, name string) (net.Listener, error) {
	var ln net.Listener
	if err := inNetNS(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, name)
			c.Close()
		}
	}()
	return ln, nil
}

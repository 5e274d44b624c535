package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/kernel"
)

// The demo's service: every pod answers on backendPort with its name; the
// cluster file names it demo/echo at clusterIP:servicePort, NodePort
// nodePort on every node.
const (
	backendPort = 8080
	servicePort = 80
	nodePort    = 30080
	// A second port of the service for long connections: the backend
	// greets with its name, then echoes lines.
	streamBackendPort = 8081
	streamServicePort = 81
)

var (
	clusterIP = netip.MustParseAddr("10.96.0.10")
	// emptyIP is a service without endpoints, stickyIP one with ClientIP
	// session affinity.
	emptyIP  = netip.MustParseAddr("10.96.0.20")
	stickyIP = netip.MustParseAddr("10.96.0.21")
)

// inNetNS runs fn on a thread inside the named network namespace
// (/run/netns/name) through the library's kernel.Namespace.Do; sockets fn
// opens stay there.
func inNetNS(name string, fn func() error) error {
	ns, err := kernel.Open(filepath.Join("/run/netns", name))
	if err != nil {
		return err
	}
	defer ns.Close()
	return ns.Do(fn)
}

// serve runs handle on every TCP connection to port in pod p (each in
// its own goroutine, the connection closed after), until the listener is
// closed at teardown.
func (s *Scenario) serve(p *pod, port int, handle func(net.Conn)) error {
	var ln net.Listener
	if err := inNetNS(p.ns, func() error {
		var err error
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		return fmt.Errorf("%s: listen: %w", p.name, err)
	}
	s.listeners = append(s.listeners, ln)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return nil
}

// serveBackends makes pod p a backend of both service ports: on
// backendPort it answers with its name; on streamBackendPort it greets
// with its name and a newline, then echoes what it receives.
func (s *Scenario) serveBackends(p *pod) error {
	if err := s.serve(p, backendPort, func(c net.Conn) { _, _ = io.WriteString(c, p.name) }); err != nil {
		return err
	}
	return s.serve(p, streamBackendPort, func(c net.Conn) {
		if _, err := io.WriteString(c, p.name+"\n"); err == nil {
			_, _ = io.Copy(c, c)
		}
	})
}

// dialIn connects from namespace ns to to.
func dialIn(ctx context.Context, ns string, to netip.AddrPort) (net.Conn, error) {
	var c net.Conn
	err := inNetNS(ns, func() error {
		d := net.Dialer{Timeout: 3 * time.Second}
		var err error
		c, err = d.DialContext(ctx, "tcp", to.String())
		return err
	})
	return c, err
}

// stream is a long connection from a pod through the service's stream
// port.
type stream struct {
	conn    net.Conn
	rd      *bufio.Reader
	backend string
}

// openStream connects from namespace ns to the service's stream port and
// reads the backend's greeting.
func openStream(ctx context.Context, ns string) (*stream, error) {
	to := netip.AddrPortFrom(clusterIP, streamServicePort)
	c, err := dialIn(ctx, ns, to)
	if err != nil {
		return nil, fmt.Errorf("connect %v: %w", to, err)
	}
	st := &stream{conn: c, rd: bufio.NewReader(c)}
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	name, err := st.rd.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("greeting from %v: %w", to, err)
	}
	st.backend = strings.TrimSpace(name)
	return st, nil
}

// echo sends a line on the stream and checks it comes back.
func (st *stream) echo() error {
	_ = st.conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(st.conn, "ping\n"); err != nil {
		return err
	}
	line, err := st.rd.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return fmt.Errorf("echo %q", line)
	}
	return nil
}

// whoami connects from namespace ns to to and returns the name the backend
// sent.
func whoami(ctx context.Context, ns string, to netip.AddrPort) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := dialIn(ctx, ns, to)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	b, err := io.ReadAll(c)
	if err == nil && len(b) == 0 {
		err = errors.New("empty answer")
	}
	return string(b), err
}

// spreadUntil connects n times with connect (which returns the name of
// the backend that answered) until the answers come from backends on at
// least minNodes nodes, for up to 20 s, and returns the last round's
// answers by backend.
func (s *Scenario) spreadUntil(ctx context.Context, n, minNodes int, connect func() (string, error)) (map[string]int, error) {
	got := map[string]int{}
	err := eventually(ctx, 20*time.Second, func() error {
		clear(got)
		for i := range n {
			name, err := connect()
			if err != nil {
				return fmt.Errorf("connection %d of %d: %w", i+1, n, err)
			}
			got[name]++
		}
		if nodes := s.nodesOf(got); len(nodes) < minNodes {
			return fmt.Errorf("answers only from %v: %s", nodes, describe(got))
		}
		return nil
	})
	return got, err
}

// nodesOf names the nodes of the pods that answered.
func (s *Scenario) nodesOf(got map[string]int) []string {
	var nodes []string
	for _, n := range s.nodes {
		for _, p := range n.pods {
			if got[p.name] > 0 && !slices.Contains(nodes, n.name) {
				nodes = append(nodes, n.name)
			}
		}
	}
	return nodes
}

func describe(got map[string]int) string {
	var parts []string
	for name, c := range got {
		parts = append(parts, fmt.Sprintf("%s %d", name, c))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// checkClusterIP connects from a pod on node1 to the cluster IP until
// backends on every node have answered.
func (s *Scenario) checkClusterIP(ctx context.Context) (string, error) {
	from := s.nodes[0].pods[0]
	to := netip.AddrPortFrom(clusterIP, servicePort)
	got, err := s.spreadUntil(ctx, 40, len(s.nodes), func() (string, error) { return whoami(ctx, from.ns, to) })
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s → %v: 40 connections answered by %d backends on all %d nodes (%s)",
		from.name, to, len(got), len(s.nodes), describe(got)), nil
}

// checkNodePort connects from node2's own namespace to node1's NodePort.
func (s *Scenario) checkNodePort(ctx context.Context) (string, error) {
	from, target := s.nodes[1], s.nodes[0]
	to := netip.AddrPortFrom(target.underlay, nodePort)
	got, err := s.spreadUntil(ctx, 30, 2, func() (string, error) { return whoami(ctx, from.ns, to) })
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s → %v: 30 connections answered by backends on %v (%s); those on other nodes masqueraded by %s",
		from.name, to, s.nodesOf(got), describe(got), target.name), nil
}

// mountBPFFS mounts the bpffs that holds the agents' BPF pins, in the
// demo's own mount namespace so that it outlives each agent (an agent
// started with `ip netns exec` has a mount namespace of its own).
func (s *Scenario) mountBPFFS() error {
	s.bpfDir = filepath.Join(s.WorkDir, "bpf")
	if err := os.MkdirAll(s.bpfDir, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("bpf", s.bpfDir, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mount a bpffs on %s: %w", s.bpfDir, err)
	}
	return nil
}

// unmountBPFFS unmounts it again; pins left in it go with it.
func (s *Scenario) unmountBPFFS() {
	if s.bpfDir != "" {
		_ = unix.Unmount(s.bpfDir, unix.MNT_DETACH)
		s.bpfDir = ""
	}
}

// pinDir is node n's BPF pin directory.
func (s *Scenario) pinDir(n *node) string { return filepath.Join(s.bpfDir, n.name) }

// pinsLeft lists what is left in n's pin directory.
func (s *Scenario) pinsLeft(n *node) []string {
	var left []string
	_ = filepath.WalkDir(s.pinDir(n), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, strings.TrimPrefix(path, s.pinDir(n)+"/"))
		}
		return nil
	})
	return left
}

// mountCgroup mounts the cgroup v2 hierarchy under the work directory, in
// the demo's mount namespace (an agent started with `ip netns exec` sees
// a fresh /sys without it), and makes one child cgroup per node, whose
// processes' connections from the node's own namespace the node's proxy
// translates at connect().
func (s *Scenario) mountCgroup() error {
	s.cgroupDir = filepath.Join(s.WorkDir, "cgroup")
	if err := os.MkdirAll(s.cgroupDir, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("none", s.cgroupDir, "cgroup2", 0, ""); err != nil {
		s.cgroupDir = ""
		return fmt.Errorf("mount the cgroup v2 hierarchy: %w", err)
	}
	// The cgroups of earlier runs killed before their teardown.
	entries, _ := os.ReadDir(s.cgroupDir)
	for _, e := range entries {
		if pid, ok := demoPID(e.Name()); ok && pid != os.Getpid() && !processAlive(pid) {
			_ = os.Remove(filepath.Join(s.cgroupDir, e.Name()))
		}
	}
	return nil
}

// nodeCgroup is node n's cgroup, made when first asked for.
func (s *Scenario) nodeCgroup(n *node) (string, error) {
	dir := filepath.Join(s.cgroupDir, s.prefix+n.name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	return dir, nil
}

// unmountCgroup removes the nodes' cgroups (their processes are gone by
// then) and unmounts the hierarchy.
func (s *Scenario) unmountCgroup() {
	if s.cgroupDir == "" {
		return
	}
	for _, n := range s.nodes {
		_ = os.Remove(filepath.Join(s.cgroupDir, s.prefix+n.name))
	}
	_ = unix.Unmount(s.cgroupDir, unix.MNT_DETACH)
	s.cgroupDir = ""
}

// whoamiInCgroup connects from node n's own namespace to to with a shell
// started in the node's cgroup, and returns the name the backend sent.
func (s *Scenario) whoamiInCgroup(ctx context.Context, n *node, to netip.AddrPort) (string, error) {
	dir, err := s.nodeCgroup(n)
	if err != nil {
		return "", err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	script := fmt.Sprintf("exec 3<>/dev/tcp/%s/%d && cat <&3", to.Addr(), to.Port())
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", n.ns, "bash", "-c", script)
	cmd.SysProcAttr = &unix.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s from %s's namespace: %w", to, n.name, err)
	}
	if len(out) == 0 {
		return "", fmt.Errorf("%s from %s's namespace: empty answer", to, n.name)
	}
	return string(out), nil
}

// checkHostClusterIP connects from node1's own namespace (a process in its
// cgroup, as a hostNetwork pod would be) to the cluster IP.
func (s *Scenario) checkHostClusterIP(ctx context.Context) (string, error) {
	n := s.nodes[0]
	to := netip.AddrPortFrom(clusterIP, servicePort)
	got, err := s.spreadUntil(ctx, 30, len(s.nodes), func() (string, error) { return s.whoamiInCgroup(ctx, n, to) })
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s's own namespace → %v: 30 connections (translated at connect() in the node's cgroup) answered on all %d nodes (%s)",
		n.name, to, len(s.nodes), describe(got)), nil
}

// checkRejectAndAffinity connects from a pod on node1 to the service
// without endpoints, which must refuse at once (a reset, not a timeout),
// then 20 times from each of two pods to the session-affine service,
// whose answers must each come from one backend.
func (s *Scenario) checkRejectAndAffinity(ctx context.Context) (string, error) {
	from := s.nodes[0].pods[0]
	var refused error
	err := eventually(ctx, 20*time.Second, func() error {
		c, err := dialIn(ctx, from.ns, netip.AddrPortFrom(emptyIP, servicePort))
		if err == nil {
			c.Close()
			return fmt.Errorf("%v accepted a connection", emptyIP)
		}
		if !errors.Is(err, unix.ECONNREFUSED) {
			return fmt.Errorf("%v: %w (want a reset)", emptyIP, err)
		}
		refused = err
		return nil
	})
	if err != nil {
		return "", err
	}
	var parts []string
	for _, p := range []*pod{from, s.nodes[1].pods[0]} {
		got := map[string]int{}
		for i := range 20 {
			name, err := whoami(ctx, p.ns, netip.AddrPortFrom(stickyIP, servicePort))
			if err != nil {
				return "", fmt.Errorf("%s → %v, connection %d: %w", p.name, stickyIP, i+1, err)
			}
			got[name]++
		}
		if len(got) != 1 {
			return "", fmt.Errorf("%s → %v: answers from %d backends (%s), want one", p.name, stickyIP, len(got), describe(got))
		}
		parts = append(parts, fmt.Sprintf("%s → %s", p.name, describe(got)))
	}
	return fmt.Sprintf("%s → %v:%d (no endpoints): refused at once (%v); %v (ClientIP affinity): %s",
		from.name, emptyIP, servicePort, refused, stickyIP, strings.Join(parts, "; ")), nil
}

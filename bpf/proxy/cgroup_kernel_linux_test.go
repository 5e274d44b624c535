//go:build linux

package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// The connect-time tests run clients as processes in a cgroup of their own
// and in a namespace of the rig: bash for TCP, and for what bash cannot
// show (the source of a datagram, getpeername) this test binary itself,
// started again with cgHelperEnv set, which runs cgHelper instead of the
// tests.

const (
	cgHelperEnv = "NODEPLANE_PROXY_CGROUP_HELPER" // "tcp", "udp" or "udp-connected"
	cgHelperTo  = "NODEPLANE_PROXY_CGROUP_HELPER_TO"
	udpPort     = 9053
)

func init() {
	if mode := os.Getenv(cgHelperEnv); mode != "" {
		os.Exit(cgHelper(mode, os.Getenv(cgHelperTo)))
	}
}

// cgHelper talks to the service at to once and prints the peer address the
// kernel gives the application and what the server answered: "peer name".
func cgHelper(mode, to string) int {
	if err := cgHelperRun(mode, to); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func cgHelperRun(mode, to string) error {
	dst, err := netip.ParseAddrPort(to)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Second)
	switch mode {
	case "udp":
		// Unconnected: sendto and recvfrom (the sendmsg and recvmsg hooks).
		network := "udp4"
		if dst.Addr().Is6() {
			network = "udp6"
		}
		c, err := net.ListenPacket(network, ":0")
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(deadline)
		if _, err := c.WriteTo([]byte("ping"), net.UDPAddrFromAddrPort(dst)); err != nil {
			return err
		}
		buf := make([]byte, 256)
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s\n", from, buf[:n])
		return nil
	case "udp-connected", "tcp":
		network := "udp"
		if mode == "tcp" {
			network = "tcp"
		}
		c, err := net.DialTimeout(network, dst.String(), 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(deadline)
		peer, err := cgPeerName(c.(syscall.Conn))
		if err != nil {
			return err
		}
		var b []byte
		if mode == "tcp" {
			b, err = io.ReadAll(c)
		} else {
			if _, err = c.Write([]byte("ping")); err == nil {
				buf := make([]byte, 256)
				var n int
				n, err = c.Read(buf)
				b = buf[:n]
			}
		}
		if err != nil {
			return err
		}
		fmt.Printf("%s %s\n", peer, b)
		return nil
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

// cgPeerName returns getpeername(2) of c's socket.
func cgPeerName(c syscall.Conn) (netip.AddrPort, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var sa unix.Sockaddr
	var serr error
	if err := rc.Control(func(fd uintptr) { sa, serr = unix.Getpeername(int(fd)) }); err != nil {
		return netip.AddrPort{}, err
	}
	if serr != nil {
		return netip.AddrPort{}, serr
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)), nil
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port)), nil
	}
	return netip.AddrPort{}, fmt.Errorf("getpeername: %T", sa)
}

var cgSeq atomic.Int32

// cgroup2Mount returns where the cgroup v2 hierarchy is mounted.
func cgroup2Mount(t testing.TB) string {
	t.Helper()
	f, err := os.Open("/proc/mounts")
	require.NoError(t, err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 3 && fields[2] == "cgroup2" {
			return fields[1]
		}
	}
	t.Fatal("no cgroup v2 hierarchy mounted (this kind of machine has one at /sys/fs/cgroup/unified)")
	return ""
}

// testCgroup is a new child cgroup for this test alone, removed when the
// test ends (after its processes are gone).
type testCgroup struct {
	path string
	fd   int
}

func newTestCgroup(t *testing.T) *testCgroup {
	t.Helper()
	kerneltest.RequireKernel(t)
	path := filepath.Join(cgroup2Mount(t), fmt.Sprintf("nodeplane-test-%d-%d", os.Getpid(), cgSeq.Add(1)))
	require.NoError(t, os.Mkdir(path, 0o755))
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(path)
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		_ = unix.Close(fd)
		removeCgroup(t, path)
	})
	return &testCgroup{path: path, fd: fd}
}

// removeCgroup removes the cgroup directory path, waiting for it to be
// empty: a process or thread that left may stay counted for a moment.
func removeCgroup(t testing.TB, path string) {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := unix.Rmdir(path)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("removing cgroup %s: %v", path, err)
			return
		}
	}
}

// run runs a command in the cgroup and in namespace ns (it is started from
// a thread inside ns) and returns its standard output.
func (cg *testCgroup) run(ns *kerneltest.NS, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg.fd}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := ns.Do(cmd.Start); err != nil {
		return "", err
	}
	if err := cmd.Wait(); err != nil {
		return stdout.String(), fmt.Errorf("%s %v: %w: %s", name, args, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// whoamiBash connects with bash's /dev/tcp, from a process in the cgroup
// and in ns, and returns what the server sent.
func (cg *testCgroup) whoamiBash(ns *kerneltest.NS, to netip.AddrPort) (string, error) {
	script := fmt.Sprintf("exec 3<>/dev/tcp/%s/%d && cat <&3", to.Addr(), to.Port())
	return cg.run(ns, nil, "timeout", "2", "bash", "-c", script)
}

// helper runs cgHelper in mode against to, in the cgroup and in ns, and
// returns the peer address it saw and the server's answer.
func (cg *testCgroup) helper(ns *kerneltest.NS, mode string, to netip.AddrPort) (netip.AddrPort, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return netip.AddrPort{}, "", err
	}
	out, err := cg.run(ns, []string{cgHelperEnv + "=" + mode, cgHelperTo + "=" + to.String()}, exe)
	if err != nil {
		return netip.AddrPort{}, "", err
	}
	peer, name, ok := strings.Cut(strings.TrimSpace(out), " ")
	if !ok {
		return netip.AddrPort{}, "", fmt.Errorf("helper said %q", out)
	}
	ap, err := netip.ParseAddrPort(peer)
	if err != nil {
		return netip.AddrPort{}, "", err
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), name, nil
}

// serveUDPName answers every datagram to port udpPort in ns with name.
func serveUDPName(t *testing.T, ns *kerneltest.NS, name string) {
	serveUDP(t, ns, udpPort, func([]byte) []byte { return []byte(name) })
}

// serveUDP answers every datagram to port in ns with what answer makes of
// it.
func serveUDP(t *testing.T, ns *kerneltest.NS, port int, answer func(in []byte) []byte) {
	listen := func() (net.PacketConn, error) { return net.ListenPacket("udp", fmt.Sprintf(":%d", port)) }
	serveInNS(t, ns, listen, func(c net.PacketConn) {
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = c.WriteTo(answer(buf[:n]), from)
		}
	})
}

// cgroupRig is the proxy rig with a Proxy of host 1 whose connect-time
// programs are on a test cgroup.
func newCgroupRig(t *testing.T) (*proxyRig, *testCgroup) {
	t.Helper()
	cg := newTestCgroup(t)
	return newProxyRig(t), cg
}

func (r *proxyRig) cgroupProxy(t *testing.T, cg *testCgroup) *Proxy {
	t.Helper()
	return r.cgroupProxyWith(t, cg, nil)
}

// cgroupProxyWith is cgroupProxy with the Options that set (when not nil)
// changes.
func (r *proxyRig) cgroupProxyWith(t *testing.T, cg *testCgroup, set func(*Options)) *Proxy {
	t.Helper()
	o := r.options()
	o.Cgroup = cg.path
	if set != nil {
		set(&o)
	}
	p, err := New(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	r.feed(t, p)
	return p
}

// cgSpread connects n times with bash from ns in the cgroup and counts the
// answers per backend name.
func cgSpread(t *testing.T, cg *testCgroup, ns *kerneltest.NS, to netip.AddrPort, n int) map[string]int {
	t.Helper()
	return countAnswers(t, n, fmt.Sprintf("connect %v from %s in the cgroup", to, ns), func() (string, error) { return cg.whoamiBash(ns, to) })
}

// cgReachAll connects 30 times from ns in the cgroup to the web service's
// cluster IPs of both families (port), expecting all three backends of
// newProxyRig to answer, and once more to see the service as the peer
// (getpeername), not the backend.
func cgReachAll(t *testing.T, cg *testCgroup, ns *kerneltest.NS, port uint16) {
	t.Helper()
	for _, cip := range []netip.Addr{clusterV4, clusterV6} {
		got := cgSpread(t, cg, ns, netip.AddrPortFrom(cip, port), 30)
		t.Logf("ClusterIP %v from %s in the cgroup: %v", cip, ns, got)
		assert.Len(t, got, 3, "every backend (local and on host 2) answers")
		peer, name, err := cg.helper(ns, "tcp", netip.AddrPortFrom(cip, port))
		require.NoError(t, err)
		assert.Equal(t, netip.AddrPortFrom(cip, port), peer, "getpeername shows the service")
		assert.Contains(t, got, name)
	}
}

// cgAskUDP asks the UDP service svc n times from ns in the cgroup, with an
// unconnected socket and with a connected one: every reply must come from
// svc, be one of the names, and the answers must spread over more than one
// backend.
func cgAskUDP(t *testing.T, cg *testCgroup, ns *kerneltest.NS, svc netip.AddrPort, n int, names map[string]bool) {
	t.Helper()
	for _, mode := range []string{"udp", "udp-connected"} {
		got := map[string]int{}
		for range n {
			from, name, err := cg.helper(ns, mode, svc)
			require.NoError(t, err, mode)
			assert.Equal(t, svc, from, "%s: the reply's source is the service", mode)
			assert.True(t, names[name], "%s: answer %q", mode, name)
			got[name]++
		}
		t.Logf("%s from %s: %v", mode, ns, got)
		assert.Greater(t, len(got), 1, "%s: spread over the backends", mode)
	}
}

// The connect-time program's maps have the sizes of the Go types
// (TestLayoutMatchesHeader holds those to c/nat.h).
func TestConnectTimeLayout(t *testing.T) {
	spec, err := loadSock()
	require.NoError(t, err)
	for name, kv := range map[string][2]uint32{
		feMapName: {feKeySize, feValSize}, beMapName: {beKeySize, beValSize}, skRevMapName: {skKeySize, skValSize},
		svcStatsName: {4, svcStatsSize},
	} {
		m, ok := spec.Maps[name]
		if assert.True(t, ok, name) {
			assert.Equal(t, kv, [2]uint32{m.KeySize, m.ValueSize}, name)
		}
	}
	nat, err := loadNat()
	require.NoError(t, err)
	for _, name := range []string{feMapName, beMapName, affMapName, svcStatsName} {
		assert.Equal(t, nat.Maps[name].Type, spec.Maps[name].Type, name)
		assert.Equal(t, nat.Maps[name].MaxEntries, spec.Maps[name].MaxEntries, name)
	}
	for _, h := range cgroupHooks {
		ps, ok := spec.Programs[h.prog]
		if assert.True(t, ok, h.prog) {
			assert.Equal(t, ebpf.CGroupSockAddr, ps.Type, h.prog)
			assert.Equal(t, h.typ, ps.AttachType, h.prog)
		}
	}
	assert.Len(t, spec.Programs, len(cgroupHooks))
}

func TestNewCgroupMustBeAbsolute(t *testing.T) {
	_, err := New(Options{Kernel: fakeDoer{}, PinDir: "/sys/fs/bpf/x", Cgroup: "kubepods"})
	assert.ErrorIs(t, err, ErrInvalidOptions)
	p, err := New(Options{Kernel: fakeDoer{}, PinDir: "/sys/fs/bpf/x", Cgroup: "/sys/fs/cgroup/unified/kubepods/"})
	require.NoError(t, err)
	assert.Equal(t, "/sys/fs/cgroup/unified/kubepods", p.o.Cgroup)
	_, err = New(Options{Kernel: fakeDoer{}, PinDir: "/sys/fs/bpf/x", ConnectTimeTCPOnly: true})
	assert.ErrorIs(t, err, ErrInvalidOptions, "TCP only, of no connect-time translation")
}

type fakeDoer struct{}

func (fakeDoer) Do(fn func() error) error { return fn() }

// Processes of host 1's own namespace reach every backend of a cluster IP,
// and see the service's address as their peer; a process of the same
// cgroup in another namespace is not translated.
func TestKernelProxyConnectTimeTCP(t *testing.T) {
	r, cg := newCgroupRig(t)
	p := r.cgroupProxy(t, cg)
	p.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4, clusterV6},
		Backends: append(r.backends(false), r.backends(true)...)})
	apply(t, p)
	st := p.Status()
	assert.Contains(t, st.Interfaces, "cgroup:"+cg.path)
	assert.Empty(t, st.Errors)

	h1, h2 := r.topo.Hosts[0], r.topo.Hosts[1]
	cgReachAll(t, cg, h1.NS, 80)
	// A process outside the cgroup is not translated (host 1 has no route
	// to the cluster IP).
	_, err := whoami(h1.NS, netip.AddrPortFrom(clusterV4, 80))
	assert.Error(t, err, "outside the cgroup")

	// In the same cgroup but in host 2's namespace: not translated, while
	// the backends themselves answer there.
	name, err := cg.whoamiBash(h2.NS, r.backends(false)[0].Addr)
	require.NoError(t, err, "a backend from host 2")
	assert.Equal(t, h1.Pods[1].Name, name)
	_, err = cg.whoamiBash(h2.NS, netip.AddrPortFrom(clusterV4, 80))
	assert.Error(t, err, "host 2's namespace is not the Proxy's")

	// A service without backends: connect fails with EPERM (refused by the
	// program, not timed out).
	p.OnUpdate(cluster.Service{Name: "default/empty:http", Port: 81, ClusterIPs: []netip.Addr{clusterV4}})
	apply(t, p)
	_, err = cg.whoamiBash(h1.NS, netip.AddrPortFrom(clusterV4, 81))
	assert.ErrorContains(t, err, "connect: Operation not permitted", "EPERM, as bash says it")

	// sessionAffinity ClientIP: the node's processes are one client (the
	// zero address), kept on one backend at connect(); the affinity records
	// when, on the programs' clock.
	p.OnUpdate(cluster.Service{Name: "default/sticky:http", Port: 82, ClusterIPs: []netip.Addr{clusterV4}, AffinityTimeout: time.Hour,
		Backends: append(r.backends(false), r.backends(true)...)})
	apply(t, p)
	before := monotonicNow()
	sticky := cgSpread(t, cg, h1.NS, netip.AddrPortFrom(clusterV4, 82), 10)
	assert.Len(t, sticky, 1, "one backend for the node's affine connections: %v", sticky)
	c := p.Counters()["default/sticky:http"]
	assert.Equal(t, uint64(10), c.Connections, "translated at connect()")
	assert.Zero(t, c.Packets, "not per packet")
	var (
		ak    affKey
		av    affVal
		found int
	)
	for it := p.k.aff.Iterate(); it.Next(&ak, &av); {
		if ak.Client == ([16]byte{}) {
			found++
			// The clock is coarse: a tick either side.
			assert.InDelta(t, float64(before), float64(av.Last), float64(time.Minute), "the affinity's time is the programs' clock")
			assert.GreaterOrEqual(t, av.Last+uint64(100*time.Millisecond), before, "recorded after the connections began")
		}
	}
	assert.Equal(t, 1, found, "one affinity, the node's")

	// The pod side (tc) still works alongside.
	assert.Len(t, spread(t, h1.Pods[0].NS, netip.AddrPortFrom(clusterV4, 80), 30), 3)
}

// A UDP service, unconnected (sendmsg, recvmsg) and connected (connect,
// getpeername): the reply comes from the service's address.
func TestKernelProxyConnectTimeUDP(t *testing.T) {
	r, cg := newCgroupRig(t)
	names := map[string]bool{}
	backends := r.backendsAt(false, udpPort)
	for _, pod := range []*kerneltest.Pod{r.topo.Hosts[0].Pods[1], r.topo.Hosts[1].Pods[0], r.topo.Hosts[1].Pods[1]} {
		serveUDPName(t, pod.NS, pod.Name)
		names[pod.Name] = true
	}
	p := r.cgroupProxy(t, cg)
	p.OnUpdate(cluster.Service{Name: "kube-system/dns:dns", Protocol: cluster.UDP, Port: 53, ClusterIPs: []netip.Addr{clusterV4},
		Backends: backends})
	apply(t, p)
	h1 := r.topo.Hosts[0]
	svc := netip.AddrPortFrom(clusterV4, 53)
	cgAskUDP(t, cg, h1.NS, svc, 15, names)
	// The map holds the socket's backend → frontend.
	var k skKey
	var v skVal
	n := 0
	for it := p.k.cg.skRev.Iterate(); it.Next(&k, &v); {
		assert.Equal(t, svc, netip.AddrPortFrom(fromAddr16(v.Addr), fromPort16(v.Port)))
		n++
	}
	assert.NotZero(t, n)
}

// cgLinkIDs returns the IDs of the pinned cgroup attachments, by hook.
func cgLinkIDs(t *testing.T, p *Proxy) map[string]link.ID {
	t.Helper()
	ids := map[string]link.ID{}
	for _, h := range cgroupHooks {
		l, err := link.LoadPinnedLink(p.cgroupPin(h.name), nil)
		if err != nil {
			continue
		}
		info, err := l.Info()
		require.NoError(t, err)
		ids[h.name] = info.ID
		_ = l.Close()
	}
	return ids
}

// A restarted Proxy takes over the pinned cgroup attachments (one program
// replacement per hook, no new attachment); Cleanup removes them.
func TestKernelProxyConnectTimeRestartAndCleanup(t *testing.T) {
	r, cg := newCgroupRig(t)
	o := r.options()
	o.Cgroup = cg.path
	p, err := New(o)
	require.NoError(t, err)
	r.feed(t, p)
	svc := cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)}
	p.OnUpdate(svc)
	apply(t, p)
	assert.Equal(t, len(cgroupHooks), p.k.cg.created)
	ids := cgLinkIDs(t, p)
	require.Len(t, ids, len(cgroupHooks))
	h1 := r.topo.Hosts[0]
	to := netip.AddrPortFrom(clusterV4, 80)

	// A resync reads the pins again and writes nothing.
	p.QueueResync()
	apply(t, p)
	assert.Equal(t, len(cgroupHooks), p.k.cg.created)
	assert.Zero(t, p.k.cg.updated)

	// The agent goes away: the pins keep translating.
	require.NoError(t, p.Close())
	assert.Len(t, cgSpread(t, cg, h1.NS, to, 30), 3)

	p2, err := New(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p2.Cleanup(context.Background()) })
	r.feed(t, p2)
	p2.OnUpdate(svc)
	apply(t, p2)
	assert.Zero(t, p2.k.cg.created, "no new attachment")
	assert.LessOrEqual(t, p2.k.cg.updated, len(cgroupHooks), "at most one program replacement per hook")
	t.Logf("after the restart: %d attachments made, %d programs replaced", p2.k.cg.created, p2.k.cg.updated)
	assert.Equal(t, ids, cgLinkIDs(t, p2), "the same attachments")
	assert.Contains(t, p2.Status().Interfaces, "cgroup:"+cg.path)
	assert.Len(t, cgSpread(t, cg, h1.NS, to, 30), 3)

	// Cleanup detaches them and removes the pins and the map.
	require.NoError(t, p2.Cleanup(context.Background()))
	assert.Empty(t, cgLinkIDs(t, p2))
	_, err = os.Stat(filepath.Join(r.pinDir, skRevMapName))
	assert.True(t, errors.Is(err, os.ErrNotExist), "the socket map is removed: %v", err)
	require.Eventually(t, func() bool {
		_, err := cg.whoamiBash(h1.NS, to)
		return err != nil
	}, 10*time.Second, 100*time.Millisecond, "no translation after Cleanup")
}

// A Proxy restarted without Options.Cgroup detaches the connect-time
// programs it had and removes their map.
func TestKernelProxyConnectTimeDropped(t *testing.T) {
	r, cg := newCgroupRig(t)
	p := r.cgroupProxy(t, cg)
	p.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)})
	apply(t, p)
	require.Len(t, cgLinkIDs(t, p), len(cgroupHooks))
	require.NoError(t, p.Close())

	p2 := r.proxy(t)
	p2.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)})
	apply(t, p2)
	assert.Empty(t, cgLinkIDs(t, p2))
	_, err := os.Stat(filepath.Join(r.pinDir, skRevMapName))
	assert.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
	assert.NotContains(t, p2.Status().Interfaces, "cgroup:"+cg.path)
	// The tc side is kept.
	assert.Len(t, spread(t, r.topo.Hosts[0].Pods[0].NS, netip.AddrPortFrom(clusterV4, 80), 30), 3)
	require.Eventually(t, func() bool {
		_, err := cg.whoamiBash(r.topo.Hosts[0].NS, netip.AddrPortFrom(clusterV4, 80))
		return err != nil
	}, 10*time.Second, 100*time.Millisecond, "no connect-time translation any more")
}

// A cgroup that does not exist fails the connect-time hooks alone: each
// is an ErrAttach partial error, the tc programs work. A directory that is
// not on a cgroup v2 file system fails them the same way, with an error
// that says so.
func TestKernelProxyConnectTimeMissingCgroup(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		testConnectTimeBadCgroup(t, filepath.Join(cgroup2Mount(t), fmt.Sprintf("nodeplane-test-%d-missing", os.Getpid())), "no such file")
	})
	t.Run("not cgroup v2", func(t *testing.T) { testConnectTimeBadCgroup(t, t.TempDir(), "not on a cgroup v2 file system") })
}

func testConnectTimeBadCgroup(t *testing.T, dir, why string) {
	r := newProxyRig(t)
	o := r.options()
	o.Cgroup = dir
	p, err := New(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	r.feed(t, p)
	p.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)})
	require.NoError(t, p.CompleteDeferredWork(context.Background()))
	res, err := p.Apply(context.Background())
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	assert.ErrorIs(t, err, ErrAttach)
	assert.Contains(t, err.Error(), o.Cgroup)
	assert.Contains(t, err.Error(), why)
	assert.NotZero(t, res.RetryAfter)
	assert.Equal(t, len(cgroupHooks), pe.Failed, "one failure per hook")
	assert.Equal(t, len(cgroupHooks), p.Stats().Failing)
	st := p.Status()
	assert.Contains(t, st.Interfaces, "eth0")
	assert.NotContains(t, st.Interfaces, "cgroup:"+o.Cgroup)
	assert.Len(t, st.Errors, len(cgroupHooks))
	assert.Equal(t, 1, st.Services)
	assert.Len(t, spread(t, r.topo.Hosts[0].Pods[0].NS, netip.AddrPortFrom(clusterV4, 80), 30), 3)
	assert.Empty(t, cgLinkIDs(t, p))
}

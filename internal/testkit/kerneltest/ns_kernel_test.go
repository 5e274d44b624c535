//go:build linux

package kerneltest

import (
	"github.com/nodeplane/nodeplane/command"

	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// currentNS opens the calling thread's namespace with the goroutine locked,
// so the handle describes the thread the goroutine runs on.
func currentNS(t *testing.T) netns.NsHandle {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := netns.Get()
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	return h
}

// threadsOutside lists the IDs of this process's threads whose network
// namespace is not home.
func threadsOutside(t *testing.T, home netns.NsHandle) []int {
	t.Helper()
	var want unix.Stat_t
	require.NoError(t, unix.Fstat(int(home), &want))
	entries, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	var out []int
	for _, e := range entries {
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc/self/task", e.Name(), "ns/net"), &st) != nil {
			continue // thread exited meanwhile
		}
		if st.Dev != want.Dev || st.Ino != want.Ino {
			tid, _ := strconv.Atoi(e.Name())
			out = append(out, tid)
		}
	}
	return out
}

// processGone reports whether pid no longer runs (absent or a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// assertGone checks that namespace name left no file in NetnsDir and no
// link in /run/netns.
func assertGone(t *testing.T, name string) {
	t.Helper()
	for _, path := range []string{filepath.Join(NetnsDir, name), filepath.Join(ipNetnsDir, name)} {
		_, err := os.Lstat(path)
		assert.ErrorIs(t, err, os.ErrNotExist, "%s left behind", path)
	}
}

// mountsOn counts the mounts whose mount point is path in this process's
// mount namespace.
func mountsOn(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	n := 0
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			n++
		}
	}
	return n
}

// sameNS reports whether the process pid is in the namespace behind h.
func sameNS(t *testing.T, pid int, h netns.NsHandle) bool {
	t.Helper()
	other, err := netns.GetFromPid(pid)
	require.NoError(t, err)
	defer other.Close()
	return other.Equal(h)
}

func TestKernelNSIsolation(t *testing.T) {
	home := currentNS(t)
	ns := NewNS(t)

	require.True(t, strings.HasPrefix(ns.Name(), fmt.Sprintf("npt-%d-", os.Getpid())), ns.Name())
	assert.Equal(t, filepath.Join(NetnsDir, ns.Name()), ns.Path())
	assert.FileExists(t, ns.Path())
	target, err := os.Readlink(filepath.Join(ipNetnsDir, ns.Name()))
	require.NoError(t, err, "linked into /run/netns")
	assert.Equal(t, ns.Path(), target)
	assert.False(t, ns.NsHandle().Equal(home), "a fresh namespace, not the test's own")

	links, err := ns.Handle().LinkList()
	require.NoError(t, err)
	require.Len(t, links, 1, "only lo in a fresh namespace")
	assert.Equal(t, "lo", links[0].Attrs().Name)
	assert.NotZero(t, links[0].Attrs().Flags&unix.IFF_UP, "lo is up")

	// A link made through the handle exists in the namespace, not in ours.
	name := fmt.Sprintf("nptb%d", os.Getpid()%100000)
	require.NoError(t, ns.Handle().LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}))
	_, err = ns.Handle().LinkByName(name)
	require.NoError(t, err)
	_, err = netlink.LinkByName(name) // read-only look at the test's namespace
	var notFound netlink.LinkNotFoundError
	require.ErrorAs(t, err, &notFound, "link leaked into the test's namespace")

	// A sysctl written in the namespace does not change the test's own.
	before, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	require.NoError(t, err)
	flipped := "1"
	if strings.TrimSpace(string(before)) == "1" {
		flipped = "0"
	}
	require.NoError(t, ns.SetSysctl("net.ipv4.ip_forward", flipped))
	got, err := ns.Sysctl("net/ipv4/ip_forward")
	require.NoError(t, err)
	assert.Equal(t, flipped, got)
	after, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "host sysctl untouched")

	err = ns.SetSysctl("kernel.hostname", "x")
	require.ErrorIs(t, err, ErrInvalid, "non-net sysctls are refused")
	_, err = ns.Sysctl("net.ipv4.no_such_key")
	require.ErrorIs(t, err, os.ErrNotExist)

	// `ip netns exec` finds it by name.
	RequireCommands(t, "ip")
	out, err := exec.CommandContext(t.Context(), "ip", "netns", "exec", ns.Name(), "ip", "-o", "link", "show", name).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), name)
}

func TestKernelNSThreadsStayHome(t *testing.T) {
	home := currentNS(t)
	spaces := []*NS{NewNS(t), NewNS(t), NewNS(t)}

	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for i := range cap(errs) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns := spaces[i%len(spaces)]
			errs <- ns.Do(func() error {
				cur, err := netns.Get()
				if err != nil {
					return err
				}
				defer cur.Close()
				if !cur.Equal(ns.NsHandle()) {
					return fmt.Errorf("Do ran outside %s", ns)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	assert.True(t, currentNS(t).Equal(home), "the test goroutine's thread stayed home")
	assert.Empty(t, threadsOutside(t, home), "no thread of the process left in a test namespace")
}

func TestKernelNSDoFailures(t *testing.T) {
	home := currentNS(t)
	ns := NewNS(t)
	sentinel := errors.New("from fn")

	tests := []struct {
		name    string
		fn      func() error
		wantIs  error
		wantMsg string
	}{
		{name: "error returned", fn: func() error { return sentinel }, wantIs: sentinel},
		{name: "panic becomes error", fn: func() error { panic("boom") }, wantMsg: "panic inside network namespace: boom"},
		{name: "Goexit reported", fn: func() error { runtime.Goexit(); return nil }, wantIs: errGoexit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ns.Do(tt.fn)
			require.Error(t, err)
			if tt.wantIs != nil {
				require.ErrorIs(t, err, tt.wantIs)
			}
			if tt.wantMsg != "" {
				assert.Contains(t, err.Error(), tt.wantMsg)
			}
			require.Eventually(t, func() bool { return len(threadsOutside(t, home)) == 0 }, 5*time.Second, 10*time.Millisecond,
				"threads outside the test namespace: %v", threadsOutside(t, home))
		})
	}
}

func TestKernelNSCleanup(t *testing.T) {
	RequireKernel(t) // the subtest's skip would not stop this test
	home := currentNS(t)
	var (
		ns         *NS
		child      *Process
		grandchild int
	)
	t.Run("inner", func(t *testing.T) {
		ns = NewNS(t)
		var err error
		child, err = ns.Start(t.Context(), "sleep", "60")
		require.NoError(t, err)
		assert.True(t, sameNS(t, child.Pid(), ns.NsHandle()), "started process runs in the namespace")
		assert.False(t, sameNS(t, child.Pid(), home))

		// A grandchild is not ours to wait for; Close finds it by namespace.
		shell, err := ns.Start(t.Context(), "sh", "-c", "sleep 60 & echo $!; wait")
		require.NoError(t, err)
		require.Eventually(t, func() bool { return bytes.HasSuffix(shell.Stdout(), []byte("\n")) }, 5*time.Second, 10*time.Millisecond)
		grandchild, err = strconv.Atoi(strings.TrimSpace(string(shell.Stdout())))
		require.NoError(t, err)
		assert.True(t, sameNS(t, grandchild, ns.NsHandle()))
	})

	assertGone(t, ns.Name())
	select {
	case <-child.Done():
	default:
		t.Fatal("started process still running after cleanup")
	}
	var ee *command.Error
	require.ErrorAs(t, child.Wait(), &ee)
	assert.Equal(t, -1, ee.ExitCode, "killed by a signal")
	require.Eventually(t, func() bool { return processGone(grandchild) }, 5*time.Second, 10*time.Millisecond, "grandchild %d survived", grandchild)

	// Everything fails safely afterwards, nothing lands in our namespace.
	_, err := ns.Handle().LinkList()
	require.Error(t, err, "closed handle must not fall back to the caller's namespace")
	require.Error(t, ns.Handle().LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "nptafterclose"}}))
	_, err = netlink.LinkByName("nptafterclose")
	var notFound netlink.LinkNotFoundError
	require.ErrorAs(t, err, &notFound)
	assert.Equal(t, netns.None(), ns.NsHandle())
	require.ErrorIs(t, ns.Do(func() error { return nil }), ErrClosed)
	_, err = ns.Exec(t.Context(), "true")
	require.ErrorIs(t, err, ErrClosed)
	_, err = ns.Start(t.Context(), "true")
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, ns.Close(), "Close is idempotent")
	assert.Empty(t, threadsOutside(t, home))
}

func TestKernelNSEarlyClose(t *testing.T) {
	ns := NewNS(t)
	peer := NewNS(t)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "a"}, PeerName: "b", PeerNamespace: netlink.NsFd(peer.NsHandle())}
	require.NoError(t, ns.Handle().LinkAdd(veth))
	_, err := peer.Handle().LinkByName("b")
	require.NoError(t, err)

	require.NoError(t, ns.Close())
	assertGone(t, ns.Name())
	// The kernel destroys the namespace, and with it the veth pair, shortly
	// after the last reference goes.
	require.Eventually(t, func() bool {
		_, err := peer.Handle().LinkByName("b")
		return errors.As(err, new(netlink.LinkNotFoundError))
	}, 10*time.Second, 20*time.Millisecond, "peer veth should vanish with the closed namespace")
}

func TestKernelExec(t *testing.T) {
	RequireCommands(t, "ip", "iptables", "iptables-restore", "nft", "ipset")
	ns := NewNS(t)
	ctx := t.Context()
	tag := fmt.Sprintf("NPT%d", os.Getpid())

	out, err := ns.Exec(ctx, "ip", "-o", "link", "show")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 1, "%s", out)
	assert.Contains(t, lines[0], ": lo:")

	rules := fmt.Sprintf("*filter\n:%s - [0:0]\n-A %s -s 10.1.2.3/32 -j DROP\nCOMMIT\n", tag, tag)
	_, err = ns.ExecInput(ctx, strings.NewReader(rules), "iptables-restore", "-w", "5", "--noflush")
	require.NoError(t, err)
	out, err = ns.Exec(ctx, "iptables", "-w", "5", "-S", tag)
	require.NoError(t, err)
	assert.Contains(t, string(out), "-A "+tag+" -s 10.1.2.3/32 -j DROP")

	nftTable := strings.ToLower(tag)
	_, err = ns.ExecInput(ctx, strings.NewReader("table inet "+nftTable+" {\n chain c { }\n}\n"), "nft", "-f", "-")
	require.NoError(t, err)
	out, err = ns.Exec(ctx, "nft", "list", "tables")
	require.NoError(t, err)
	assert.Contains(t, string(out), "table inet "+nftTable)

	_, err = ns.Exec(ctx, "ipset", "create", tag, "hash:ip")
	require.NoError(t, err)
	out, err = ns.Exec(ctx, "ipset", "list", "-n")
	require.NoError(t, err)
	assert.Contains(t, strings.Fields(string(out)), tag)

	// Read-only look at the test's own namespace: none of it is there.
	for _, argv := range [][]string{{"iptables", "-w", "5", "-S"}, {"nft", "list", "tables"}, {"ipset", "list", "-n"}} {
		path, err := lookPath(argv[0])
		require.NoError(t, err)
		host, err := exec.CommandContext(ctx, path, argv[1:]...).CombinedOutput()
		if err != nil {
			t.Logf("reading the test namespace with %v failed (%v); nothing to compare", argv, err)
			continue
		}
		assert.NotContains(t, strings.ToLower(string(host)), strings.ToLower(tag), "%v in the test's namespace", argv)
	}

	// Failures carry stderr and the exit code.
	_, err = ns.Exec(ctx, "ip", "link", "show", "dev", "npt-none")
	var ee *command.Error
	require.ErrorAs(t, err, &ee)
	assert.NotZero(t, ee.ExitCode)
	assert.NotEqual(t, -1, ee.ExitCode)
	assert.Contains(t, ee.Err.Error(), "in netns "+ns.Name())
	assert.NotEmpty(t, ee.Stderr)
	assert.Contains(t, err.Error(), strings.TrimSpace(string(ee.Stderr)))

	_, err = ns.Exec(ctx, "npt-no-such-binary")
	require.ErrorIs(t, err, exec.ErrNotFound)
}

func TestKernelProcessLifecycle(t *testing.T) {
	ns := NewNS(t)

	p, err := ns.Start(t.Context(), "sh", "-c", "echo out; echo err >&2; exit 3")
	require.NoError(t, err)
	err = p.Wait()
	var ee *command.Error
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 3, ee.ExitCode)
	assert.Equal(t, "out\n", string(p.Stdout()))
	assert.Equal(t, "err\n", string(p.Stderr()))
	require.NoError(t, p.Stop(), "stopping an exited process is a no-op")

	ok, err := ns.Start(t.Context(), "true")
	require.NoError(t, err)
	require.NoError(t, ok.Wait())

	long, err := ns.Start(t.Context(), "sleep", "60")
	require.NoError(t, err)
	require.NoError(t, long.Stop())
	require.ErrorAs(t, long.Wait(), &ee)
	assert.Equal(t, -1, ee.ExitCode)
	assert.True(t, processGone(long.Pid()))

	ctx, cancel := context.WithCancel(t.Context())
	viaCtx, err := ns.Start(ctx, "sleep", "60")
	require.NoError(t, err)
	cancel()
	select {
	case <-viaCtx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("process not killed when its context was canceled")
	}
}

// TestHelperProcess is not a test: the kernel tests below run the test
// binary again with NPT_HELPER set, to watch a test that fails, a process
// that dies without cleaning up, or a thread that cannot leave a namespace.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("NPT_HELPER")
	if mode == "" {
		return
	}
	if mode == "overmount" {
		helperOvermount(t)
		return
	}
	home := currentNS(t)
	ns := NewNS(t)
	p, err := ns.Start(t.Context(), "sleep", "60")
	require.NoError(t, err)
	fmt.Printf("NS=%s PID=%d\n", ns.Name(), p.Pid())
	switch mode {
	case "fail":
		t.Fatal("failing on purpose; cleanup must still remove the namespace")
	case "crash":
		os.Exit(7) // no cleanups run, like a test binary killed by -timeout
	case "poison":
		// Without CAP_SYS_ADMIN the thread cannot setns back home.
		err := ns.Do(func() error {
			hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
			var data [2]unix.CapUserData
			if err := unix.Capget(&hdr, &data[0]); err != nil {
				return err
			}
			data[0].Effective &^= 1 << unix.CAP_SYS_ADMIN
			return unix.Capset(&hdr, &data[0])
		})
		require.Error(t, err)
		require.Contains(t, err.Error(), "thread discarded")
		// The runtime ends the thread; only the main thread is parked
		// instead ("wedged"), never to run a goroutine again.
		deadline := time.Now().Add(5 * time.Second)
		for {
			left := threadsOutside(t, home)
			if len(left) == 0 || (len(left) == 1 && left[0] == os.Getpid()) {
				fmt.Println("POISON=discarded")
				break
			}
			require.True(t, time.Now().Before(deadline), "poisoned thread still alive: %v", left)
			time.Sleep(10 * time.Millisecond)
		}
		require.NoError(t, ns.Do(func() error { return nil }), "other threads still work")
	}
}

// helperOvermount runs in a private mount namespace of its own, started by
// TestKernelCleanupAfterOvermount. It starts from a machine where nothing ran
// yet (NetnsDir and /run/netns plain directories), creates namespaces, lets
// the first `ip netns add` bind-mount /run/netns over itself and stacks such
// a mount on NetnsDir too, then checks that closing the namespaces removes
// their files and frees them.
func helperOvermount(t *testing.T) {
	sweepOnce.Do(func() {}) // the mounts here are copies: sweeping is the host's job
	for _, dir := range []string{NetnsDir, ipNetnsDir} {
		// Drop the copies of the host's mounts, and with them this mount
		// namespace's references to other tests' namespaces.
		require.NoError(t, unmountAll(dir))
		entries, err := os.ReadDir(dir)
		if err == nil {
			for _, e := range entries {
				require.NoError(t, unmountAll(filepath.Join(dir, e.Name())))
			}
		}
	}
	ctx := t.Context()
	a, b := NewNS(t), NewNS(t)
	fmt.Printf("NAMES=%s,%s\n", a.Name(), b.Name())
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "a"}, PeerName: "b", PeerNamespace: netlink.NsFd(b.NsHandle())}
	require.NoError(t, a.Handle().LinkAdd(veth))
	_, err := a.Start(ctx, "sleep", "60")
	require.NoError(t, err)

	// Another process's first `ip netns add` (named so that a sweep removes
	// it if this process dies before deleting it).
	require.Zero(t, mountsOn(t, ipNetnsDir))
	other := fmt.Sprintf("%s%d-0", namePrefix, os.Getpid())
	out, err := exec.CommandContext(ctx, "ip", "netns", "add", other).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NotZero(t, mountsOn(t, ipNetnsDir), "ip netns add bind-mounted /run/netns over itself")
	out, err = exec.CommandContext(ctx, "ip", "netns", "del", other).CombinedOutput()
	require.NoError(t, err, "%s", out)
	// The same done to the harness's own directory after its mount was made
	// private: the namespaces' mounts there are hidden under the new one
	// (were it still shared, the new mount would be its peer and unmounts
	// would reach both).
	require.NoError(t, unix.Mount("", NetnsDir, "none", unix.MS_PRIVATE|unix.MS_REC, ""))
	require.NoError(t, unix.Mount(NetnsDir, NetnsDir, "none", unix.MS_BIND|unix.MS_REC, ""))

	out, err = exec.CommandContext(ctx, "ip", "netns", "exec", a.Name(), "ip", "-o", "link", "show", "a").CombinedOutput()
	require.NoError(t, err, "%s", out)

	require.NoError(t, a.Close())
	assertGone(t, a.Name())
	// Nothing holds a's namespace any more: the kernel destroys it, and the
	// veth pair with it.
	require.Eventually(t, func() bool {
		_, err := b.Handle().LinkByName("b")
		return errors.As(err, new(netlink.LinkNotFoundError))
	}, 10*time.Second, 20*time.Millisecond, "the closed namespace is still alive")
	require.NoError(t, b.Close())
	assertGone(t, b.Name())
	fmt.Println("OVERMOUNT=ok")
}

// runHelper runs TestHelperProcess in a child process and returns the
// namespace name and process ID it reported, and its output.
func runHelper(t *testing.T, mode string) (string, int, []byte, error) {
	t.Helper()
	out, runErr := helperCommand(t, mode).CombinedOutput()
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var name string
		var pid int
		if n, _ := fmt.Sscanf(sc.Text(), "NS=%s PID=%d", &name, &pid); n == 2 {
			return name, pid, out, runErr
		}
	}
	t.Fatalf("helper printed no namespace (err %v):\n%s", runErr, out)
	return "", 0, nil, nil
}

// helperCommand returns the command that runs TestHelperProcess in mode.
func helperCommand(t *testing.T, mode string) *exec.Cmd {
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "NPT_HELPER="+mode, "GORACE=atexit_sleep_ms=0")
	return cmd
}

// TestKernelCleanupAfterOvermount checks that namespaces survive another
// process's first `ip netns add`, which bind-mounts /run/netns over itself,
// and even such a mount stacked on a private NetnsDir, which hides their
// mounts: closing them still removes every file and frees them. It runs in a child process with a private mount
// namespace, so the host's mounts are never changed.
func TestKernelCleanupAfterOvermount(t *testing.T) {
	RequireKernel(t)
	RequireCommands(t, "ip")
	cmd := helperCommand(t, "overmount")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS} // also makes its mounts private
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "OVERMOUNT=ok", "%s", out)
	// Its files were removed for the host too.
	var names string
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "NAMES="); ok {
			names = v
		}
	}
	require.NotEmpty(t, names, "%s", out)
	for name := range strings.SplitSeq(names, ",") {
		assertGone(t, name)
	}
	assertGone(t, fmt.Sprintf("%s%d-0", namePrefix, cmd.Process.Pid))
}

func TestKernelPoisonedThreadIsDiscarded(t *testing.T) {
	RequireKernel(t)
	name, pid, out, err := runHelper(t, "poison")
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "POISON=discarded")
	assertGone(t, name)
	assert.True(t, processGone(pid))
}

func TestKernelCleanupAfterFailedTest(t *testing.T) {
	RequireKernel(t)
	name, pid, out, err := runHelper(t, "fail")
	require.Error(t, err, "the helper test fails on purpose")
	assert.Contains(t, string(out), "failing on purpose")
	assertGone(t, name)
	assert.True(t, processGone(pid), "failed test left its process %d", pid)
}

func TestKernelSweepAfterCrash(t *testing.T) {
	RequireKernel(t)
	own := NewNS(t)
	name, pid, _, err := runHelper(t, "crash")
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr)
	require.Equal(t, 7, exitErr.ExitCode())
	t.Cleanup(func() { _ = removeNamed(name) }) // in case the sweep below fails

	// Beside it: a name the harness never makes, and one of the dead
	// process's names that cannot be removed (a directory with a file in it).
	foreign := filepath.Join(NetnsDir, fmt.Sprintf("nptx-%d-1", pid))
	require.NoError(t, os.WriteFile(foreign, nil, 0o444))
	t.Cleanup(func() { _ = os.Remove(foreign) })
	stuckName := fmt.Sprintf("%s%d-0", namePrefix, pid)
	stuck := filepath.Join(NetnsDir, stuckName)
	require.NoError(t, os.MkdirAll(filepath.Join(stuck, "x"), 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(stuck) })

	removed, err := sweepStale(false)
	// The stuck entry is reported (unless another test process's sweep saw
	// it first), and does not stop the sweep.
	if err != nil {
		assert.Contains(t, err.Error(), stuckName)
		assert.NotContains(t, err.Error(), name+":")
	}
	if _, statErr := os.Lstat(filepath.Join(NetnsDir, name)); !slices.Contains(removed, name) && errors.Is(statErr, os.ErrNotExist) {
		// A test process of another package started meanwhile and swept it.
		t.Logf("%s was swept by another process first", name)
	} else {
		assert.Contains(t, removed, name, "a crashed process's namespace is swept")
	}
	assertGone(t, name)
	assert.FileExists(t, foreign, "only the harness's names are swept")
	assert.NotContains(t, removed, own.Name())
	assert.FileExists(t, own.Path(), "a live process's namespace is never swept")
	require.Eventually(t, func() bool { return processGone(pid) }, 5*time.Second, 10*time.Millisecond,
		"process %d in the stale namespace survived", pid)

	again, _ := sweepStale(false)
	assert.NotContains(t, again, name)
}

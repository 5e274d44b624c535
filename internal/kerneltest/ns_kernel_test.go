//go:build linux

package kerneltest

import (
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

	assert.NoFileExists(t, ns.Path(), "bind mount removed")
	select {
	case <-child.Done():
	default:
		t.Fatal("started process still running after cleanup")
	}
	var ee *ExecError
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
	assert.NoFileExists(t, ns.Path())
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
	var ee *ExecError
	require.ErrorAs(t, err, &ee)
	assert.NotZero(t, ee.ExitCode)
	assert.NotEqual(t, -1, ee.ExitCode)
	assert.Equal(t, ns.Name(), ee.NS)
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
	var ee *ExecError
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

// runHelper runs TestHelperProcess in a child process and returns the
// namespace name and process ID it reported, and its output.
func runHelper(t *testing.T, mode string) (string, int, []byte, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "NPT_HELPER="+mode, "GORACE=atexit_sleep_ms=0")
	out, runErr := cmd.CombinedOutput()
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

func TestKernelPoisonedThreadIsDiscarded(t *testing.T) {
	RequireKernel(t)
	name, pid, out, err := runHelper(t, "poison")
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "POISON=discarded")
	assert.NoFileExists(t, filepath.Join(NetnsDir, name))
	assert.True(t, processGone(pid))
}

func TestKernelCleanupAfterFailedTest(t *testing.T) {
	RequireKernel(t)
	name, pid, out, err := runHelper(t, "fail")
	require.Error(t, err, "the helper test fails on purpose")
	assert.Contains(t, string(out), "failing on purpose")
	assert.NoFileExists(t, filepath.Join(NetnsDir, name), "failed test left its namespace")
	assert.True(t, processGone(pid), "failed test left its process %d", pid)
}

func TestKernelSweepAfterCrash(t *testing.T) {
	RequireKernel(t)
	own := NewNS(t)
	name, pid, _, err := runHelper(t, "crash")
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr)
	require.Equal(t, 7, exitErr.ExitCode())
	path := filepath.Join(NetnsDir, name)
	t.Cleanup(func() { _ = deleteNamed(name) }) // in case the sweep below fails

	removed, err := sweepStale(false)
	require.NoError(t, err)
	if _, statErr := os.Stat(path); !slices.Contains(removed, name) && errors.Is(statErr, os.ErrNotExist) {
		// A test process of another package started meanwhile and swept it.
		t.Logf("%s was swept by another process first", name)
	} else {
		assert.Contains(t, removed, name, "a crashed process's namespace is swept")
	}
	assert.NoFileExists(t, path)
	assert.NotContains(t, removed, own.Name())
	assert.FileExists(t, own.Path(), "a live process's namespace is never swept")
	require.Eventually(t, func() bool { return processGone(pid) }, 5*time.Second, 10*time.Millisecond,
		"process %d in the stale namespace survived", pid)

	again, err := sweepStale(false)
	require.NoError(t, err)
	assert.NotContains(t, again, name)
}

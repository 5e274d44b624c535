//go:build linux

package kerneltest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetnsDir is where the harness bind-mounts the namespaces it creates: a
// directory of its own, made a shared mount point before the first one, as
// iproute2 does with /run/netns (an unmount there then also reaches the
// copies other mount namespaces made meanwhile). It is not /run/netns itself:
// the first `ip netns add` on a machine bind-mounts /run/netns over itself,
// which would hide namespaces mounted there before and make them
// unremovable. /run/netns only gets a symbolic link per namespace, so `ip
// netns exec NAME` works.
const NetnsDir = "/run/nodeplane-netns"

// ipNetnsDir is iproute2's directory of named namespaces.
const ipNetnsDir = "/run/netns"

// maxStacked bounds how many mounts stacked on one path are unmounted.
const maxStacked = 16

// namePrefix starts the name of every namespace this package creates; the
// full name is npt-<pid>-<sequence>, unique across concurrent test processes.
const namePrefix = "npt-"

var (
	// ErrClosed is wrapped by the errors of NS methods (Do, Exec, Start,
	// SetSysctl…) called after the namespace was closed.
	ErrClosed = errors.New("kerneltest: network namespace is closed")
	// ErrInvalid is wrapped by every error about bad input: options,
	// sysctl keys, addresses, host or pod numbers.
	ErrInvalid = errors.New("kerneltest: invalid input")

	// errGoexit is reported by Do when fn ended its goroutine with
	// runtime.Goexit (for example t.FailNow), which fn must not do.
	errGoexit = errors.New("kerneltest: function passed to Do called runtime.Goexit (t.FailNow, t.Fatal or t.Skip must not be called inside Do)")

	nsSeq      atomic.Uint64
	sweepOnce  sync.Once
	staleNames = regexp.MustCompile(`^npt-([0-9]+)-[0-9]+$`)
)

// NS is a named network namespace created by NewNS for one test. It holds a
// netlink handle bound to the namespace, runs code and commands inside it and
// is removed when the test ends. All methods are safe for concurrent use.
type NS struct {
	name   string
	fd     netns.NsHandle
	handle *netlink.Handle

	mu     sync.RWMutex // guards closed and procs; held for reading around every setns into fd
	closed bool
	procs  map[*Process]struct{}
}

// NewNS creates a fresh named network namespace npt-<pid>-<n>, with only `lo`
// in it, brought up, and registers its removal with t.Cleanup: processes
// started in it are killed, the netlink handle is closed and its bind mount
// in NetnsDir and its link in /run/netns are removed, whether the test passes
// or fails.
//
// The calling goroutine's thread never enters the namespace. NewNS calls
// RequireKernel first; the first call in a process also removes namespaces
// left behind by test processes that died without cleaning up.
func NewNS(t testing.TB) *NS {
	t.Helper()
	RequireKernel(t)
	sweepOnce.Do(func() {
		// No namespace of this process exists yet, so one named with its
		// PID was left by a dead process that had the same PID.
		removed, err := sweepStale(true)
		for _, name := range removed {
			t.Logf("kerneltest: removed stale network namespace %s left by a dead test process", name)
		}
		if err != nil {
			t.Logf("kerneltest: sweeping stale namespaces: %v", err)
		}
	})
	ns, err := newNS()
	if errors.Is(err, unix.EPERM) {
		skipOrFail(t, os.Getenv, "cannot create a network namespace: %v", err)
		return nil
	}
	if err != nil {
		t.Fatalf("kerneltest: %v", err)
		return nil
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Errorf("kerneltest: removing network namespace %s: %v", ns.name, err)
		}
	})
	return ns
}

// Open creates a fresh namespace like NewNS, for callers that are not tests
// (the benchmark harness in bench/). The caller must Close it. Open does not
// check for root: without it, it fails with an error wrapping unix.EPERM.
func Open() (*NS, error) {
	sweepOnce.Do(func() { _, _ = sweepStale(true) })
	return newNS()
}

// newNS creates the namespace, its bind mount, its link in /run/netns and
// its netlink handle. On failure nothing is left behind.
func newNS() (*NS, error) {
	name := fmt.Sprintf("%s%d-%d", namePrefix, os.Getpid(), nsSeq.Add(1))
	ns := &NS{name: name, fd: netns.None(), procs: map[*Process]struct{}{}}
	path := ns.Path()
	if err := prepareDirs(); err != nil {
		return nil, err
	}
	enter := func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare network namespace: %w", err)
		}
		return nil
	}
	build := func() error {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
		if err != nil {
			return fmt.Errorf("create mount point: %w", err)
		}
		f.Close()
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		if err := unix.Mount(self, path, "none", unix.MS_BIND, ""); err != nil {
			os.Remove(path)
			return fmt.Errorf("bind-mount namespace to %s: %w", path, err)
		}
		fd, err := netns.GetFromPath(path)
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		ns.fd = fd
		h, err := netlink.NewHandle()
		if err != nil {
			return fmt.Errorf("netlink handle: %w", err)
		}
		ns.handle = h
		lo, err := h.LinkByName("lo")
		if err == nil {
			err = h.LinkSetUp(lo)
		}
		if err != nil {
			return fmt.Errorf("bring lo up: %w", err)
		}
		if err := os.Symlink(path, filepath.Join(ipNetnsDir, name)); err != nil {
			return fmt.Errorf("link it into %s: %w", ipNetnsDir, err)
		}
		return nil
	}
	if err := inThread(enter, build); err != nil {
		ns.release()
		return nil, fmt.Errorf("create network namespace %s: %w", name, err)
	}
	return ns, nil
}

// Name returns the namespace's name, also linked in /run/netns, so `ip netns
// exec NAME` works while the test runs.
func (ns *NS) Name() string { return ns.name }

// Path returns the namespace's bind-mount path, NetnsDir/NAME.
func (ns *NS) Path() string { return filepath.Join(NetnsDir, ns.name) }

// String returns the namespace's name.
func (ns *NS) String() string { return ns.name }

// Handle returns the netlink handle bound to the namespace. It is owned by
// NS: do not close it. After Close every call on it fails; it never falls
// back to the caller's namespace.
func (ns *NS) Handle() *netlink.Handle { return ns.handle }

// NsHandle returns the open namespace file descriptor, for APIs that take
// one (netlink.NsFd, nftables.WithNetNSFd, veth peers). It is owned by NS: do
// not close it. After Close it returns netns.None().
func (ns *NS) NsHandle() netns.NsHandle {
	ns.mu.RLock()
	defer ns.mu.RUnlock()
	if ns.closed {
		return netns.None()
	}
	return ns.fd
}

// Do runs fn on an OS thread locked inside the namespace and returns fn's
// error. fn runs on a separate goroutine; the caller's thread never changes
// namespace. Sockets and processes created inside fn stay in the namespace
// after Do returns. Inside fn use /proc/thread-self/net, not /proc/self/net,
// which shows the main thread's namespace.
//
// fn must not call t.FailNow, t.Fatal or t.Skip (Do reports it as an error); a
// panic in fn is returned as an error. If the thread cannot be returned to its
// original namespace it is never unlocked, so the Go runtime discards it.
func (ns *NS) Do(fn func() error) error {
	enter := func() error {
		ns.mu.RLock()
		defer ns.mu.RUnlock()
		if ns.closed {
			return fmt.Errorf("%w: %s", ErrClosed, ns.name)
		}
		if err := netns.Set(ns.fd); err != nil {
			return fmt.Errorf("kerneltest: enter network namespace %s: %w", ns.name, err)
		}
		return nil
	}
	return inThread(enter, fn)
}

// inThread runs fn on a fresh goroutine locked to its OS thread after enter
// moved that thread into another network namespace, then moves the thread
// back, also when fn panics or calls runtime.Goexit. enter must leave the
// thread unchanged when it fails. A thread that cannot be moved back stays
// locked, so the Go runtime discards it when the goroutine exits.
func inThread(enter, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		err := errGoexit // replaced unless fn ends the goroutine
		defer func() { done <- err }()

		runtime.LockOSThread()
		orig, gerr := netns.Get()
		if gerr != nil {
			runtime.UnlockOSThread()
			err = fmt.Errorf("kerneltest: open the thread's network namespace: %w", gerr)
			return
		}
		defer orig.Close()
		if eerr := enter(); eerr != nil {
			runtime.UnlockOSThread()
			err = eerr
			return
		}
		defer func() {
			if serr := netns.Set(orig); serr != nil {
				err = errors.Join(err, fmt.Errorf("kerneltest: return thread to its network namespace (thread discarded): %w", serr))
				return // still locked
			}
			runtime.UnlockOSThread()
		}()
		err = callProtected(fn)
	}()
	return <-done
}

// callProtected calls fn and turns a panic into an error.
func callProtected(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("kerneltest: panic inside network namespace: %v\n%s", r, debug.Stack())
		}
	}()
	return fn()
}

// SetSysctl writes a networking sysctl of this namespace, from a thread inside
// it. key is dotted ("net.ipv4.ip_forward") or slashed
// ("net/ipv6/conf/eth0.100/forwarding", needed when a name contains a dot); it
// must be under net, whose entries are per namespace, so the host is never
// changed.
func (ns *NS) SetSysctl(key, value string) error {
	path, err := sysctlPath(key)
	if err != nil {
		return err
	}
	return ns.Do(func() error {
		if err := os.WriteFile(path, []byte(value), 0); err != nil {
			return fmt.Errorf("kerneltest: set sysctl %s=%s in %s: %w", key, value, ns.name, err)
		}
		return nil
	})
}

// Sysctl reads a networking sysctl of this namespace; key is as for SetSysctl.
// The value is returned without its trailing newline.
func (ns *NS) Sysctl(key string) (string, error) {
	path, err := sysctlPath(key)
	if err != nil {
		return "", err
	}
	var value string
	err = ns.Do(func() error {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("kerneltest: read sysctl %s in %s: %w", key, ns.name, err)
		}
		value = strings.TrimRight(string(b), "\n")
		return nil
	})
	return value, err
}

// sysctlPath maps a sysctl key to its /proc/sys path, rejecting anything
// outside net/ or escaping it.
func sysctlPath(key string) (string, error) {
	rel := strings.Trim(key, "/")
	if !strings.Contains(key, "/") {
		rel = strings.ReplaceAll(key, ".", "/")
	}
	parts := strings.Split(rel, "/")
	if len(parts) < 2 || parts[0] != "net" {
		return "", fmt.Errorf("%w: sysctl %q is not a per-namespace net.* key", ErrInvalid, key)
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return "", fmt.Errorf("%w: sysctl %q has an empty or relative component", ErrInvalid, key)
		}
	}
	return "/proc/sys/" + rel, nil
}

// Close removes the namespace: it kills the processes started in it (and any
// other process found in it), closes the netlink handle and the namespace
// descriptor and removes the bind mount and the link in /run/netns. It is
// idempotent; NewNS registers it with t.Cleanup, and tests call it early to
// simulate a namespace going away.
// Links whose peer is in another namespace (veth) disappear with it.
func (ns *NS) Close() error {
	ns.mu.Lock() // waits for any Do that is entering the namespace
	if ns.closed {
		ns.mu.Unlock()
		return nil
	}
	ns.closed = true
	procs := ns.procs
	ns.procs = nil
	ns.mu.Unlock()

	// Kill everything in the namespace first: a started process's children
	// may hold its output pipes open, which would make Stop wait.
	var errs []error
	if err := killProcsIn(ns.fd); err != nil {
		errs = append(errs, err)
	}
	for p := range procs {
		if err := p.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, ns.release())
	return errors.Join(errs...)
}

// release closes the handle and descriptor and removes the bind mount and
// the link.
func (ns *NS) release() error {
	if ns.handle != nil {
		closeHandle(ns.handle)
	}
	if ns.fd.IsOpen() {
		ns.fd.Close()
	}
	return removeNamed(ns.name)
}

// closeHandle closes h's sockets but leaves them in place: a Handle whose
// socket map is nil falls back to fresh sockets in the calling thread's
// namespace, which would let a late call touch the host. With closed sockets
// every later call fails instead.
func closeHandle(h *netlink.Handle) {
	keep := *h
	h.Close()
	*h = keep
}

// prepareDirs creates NetnsDir and /run/netns and makes NetnsDir a shared
// mount point, binding it over itself first if it is not one yet, as iproute2
// does with /run/netns. An exclusive flock on the directory keeps concurrent
// test processes from stacking two mounts on it.
func prepareDirs() error {
	for _, dir := range []string{NetnsDir, ipNetnsDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	lock, err := os.Open(NetnsDir)
	if err != nil {
		return fmt.Errorf("open %s: %w", NetnsDir, err)
	}
	defer lock.Close() // releases the lock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", NetnsDir, err)
	}
	makeShared := func() error { return unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "") }
	err = makeShared()
	if errors.Is(err, unix.EINVAL) { // not a mount point yet
		if err := unix.Mount(NetnsDir, NetnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mount %s over itself: %w", NetnsDir, err)
		}
		err = makeShared()
	}
	if err != nil {
		return fmt.Errorf("make %s a shared mount point: %w", NetnsDir, err)
	}
	return nil
}

// removeNamed removes the namespace name: its link (or, from older harness
// versions, its bind mount) in /run/netns and its bind mount in NetnsDir. A
// missing file is not an error.
func removeNamed(name string) error {
	return errors.Join(
		removeFile(filepath.Join(ipNetnsDir, name)),
		removeFile(filepath.Join(NetnsDir, name)))
}

// removeFile unmounts everything mounted on path and removes it; a missing
// path is not an error. If a mount on path hides under a later bind mount of
// its directory (the file is then busy), the file is removed from a private
// mount namespace where nothing covers it, and the kernel detaches the hidden
// mount along with the file, in every mount namespace.
func removeFile(path string) error {
	if err := unmountAll(path); err != nil {
		return err
	}
	err := os.Remove(path)
	if errors.Is(err, unix.EBUSY) {
		err = removeUncovered(path)
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// unmountAll lazily unmounts every mount stacked on path (never following a
// symbolic link) until none is left.
func unmountAll(path string) error {
	for range maxStacked {
		err := unix.Unmount(path, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil // not (or no longer) a mount point
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	return fmt.Errorf("unmount %s: still a mount point after %d unmounts", path, maxStacked)
}

// removeUncovered removes path from a thread in a private copy of the mount
// namespace where everything stacked on its directory and on itself is
// unmounted. The thread is never unlocked, so the Go runtime ends it.
func removeUncovered(path string) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		done <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return fmt.Errorf("remove %s: unshare mount namespace: %w", path, err)
			}
			// Private first, so no unmount below propagates anywhere.
			if err := unix.Mount("", "/", "none", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return fmt.Errorf("remove %s: make mounts private: %w", path, err)
			}
			if err := unmountAll(filepath.Dir(path)); err != nil {
				return err
			}
			if err := unmountAll(path); err != nil {
				return err
			}
			return os.Remove(path)
		}()
	}()
	return <-done
}

// killProcsIn SIGKILLs every process (other than this one) whose network
// namespace is the one behind fd, such as grandchildren of a started
// process or a command a test ran through `ip netns exec`.
func killProcsIn(fd netns.NsHandle) error {
	var target unix.Stat_t
	if err := unix.Fstat(int(fd), &target); err != nil {
		return fmt.Errorf("stat namespace: %w", err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("list processes: %w", err)
	}
	self := os.Getpid()
	var errs []error
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) != nil {
			continue // gone, or a kernel thread
		}
		if st.Dev == target.Dev && st.Ino == target.Ino {
			if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("kill pid %d: %w", pid, err))
			}
		}
	}
	return errors.Join(errs...)
}

// sweepStale removes namespaces named npt-<pid>-<n> (in NetnsDir, or in
// /run/netns from older harness versions) whose creating process no longer
// exists (a test binary killed by a timeout runs no cleanups), killing the
// processes still inside them; with includeSelf it also removes those named
// with this process's PID. Other names are never touched. It returns the
// names it removed and an error naming each one it could not remove.
func sweepStale(includeSelf bool) ([]string, error) {
	var removed []string
	var errs []error
	seen := map[string]bool{}
	for _, dir := range []string{NetnsDir, ipNetnsDir} {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if seen[name] || !isStale(name, includeSelf) {
				continue
			}
			seen[name] = true
			if e.Type().IsRegular() {
				if fd, err := netns.GetFromPath(filepath.Join(dir, name)); err == nil {
					if err := killProcsIn(fd); err != nil {
						errs = append(errs, fmt.Errorf("stale namespace %s: %w", name, err))
					}
					fd.Close()
				}
			}
			if err := removeNamed(name); err != nil {
				errs = append(errs, fmt.Errorf("stale namespace %s: %w", name, err))
				continue
			}
			removed = append(removed, name)
		}
	}
	return removed, errors.Join(errs...)
}

// isStale reports whether name is a harness namespace whose process is gone
// (or, with includeSelf, is this one).
func isStale(name string, includeSelf bool) bool {
	m := staleNames.FindStringSubmatch(name)
	if m == nil {
		return false
	}
	pid, err := strconv.Atoi(m[1])
	if err != nil {
		return false
	}
	if pid == os.Getpid() {
		return includeSelf
	}
	return !processAlive(pid)
}

// processAlive reports whether pid names a live (or zombie) process.
func processAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

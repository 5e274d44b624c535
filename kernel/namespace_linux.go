//go:build linux

package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/netnsutil"
	"github.com/nodeplane/nodeplane/kernel/internal/nlutil"
)

// Namespace is one open network namespace: a duplicate of its descriptor,
// and the sockets opened in it on first use (a NETLINK_ROUTE socket for
// batched writes and streaming dumps, a netlink handle for links,
// addresses and conntrack, a WireGuard client). It implements Kernel. Its
// methods are safe for concurrent use; once Close has been called they
// fail with ErrClosed and never reach any other namespace.
//
// The function given to Do may call the other methods (but not Close).
// The callbacks of DumpRoutes and DumpInterfaceRoutes run while the route
// socket is held: they may use links, addresses, sysctls and Do, but not
// the methods that use that socket (routes, neighbours, FDB, rules).
type Namespace struct {
	mu     sync.Mutex
	idle   *sync.Cond // signalled when users drops to 0
	users  int        // calls in progress
	closed bool
	fd     int // the namespace descriptor, ours

	closing context.Context // cancelled by Close: ends subscriptions
	cancel  context.CancelFunc

	initMu sync.Mutex
	nl     *conn           // batched writes and dumps, opened on first use
	handle *netlink.Handle // NETLINK_ROUTE, for links and addresses
	ct     *netlink.Handle // NETLINK_NETFILTER, for conntrack
	wg     *wgctrl.Client  // the WireGuard client, opened on first use

	// watch is the template of Subscribe's nlutil options (tests shrink
	// its buffers).
	watch nlutil.WatchOptions
}

// Open opens the network namespace at path: a bind mount such as
// /run/netns/NAME, or /proc/PID/ns/net. A missing path fails with an
// error wrapping ErrNotFound; a file that is not a network namespace with
// ErrInvalid. Open opens the file and checks it; sockets are opened on
// first use.
func Open(path string) (*Namespace, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, classifyOpen(fmt.Errorf("kernel: open network namespace %s: %w", path, err))
	}
	if fd < 3 { // never 0: a zero descriptor is standard input to netns helpers
		nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
		unix.Close(fd)
		if err != nil {
			return nil, fmt.Errorf("kernel: open network namespace %s: %w", path, err)
		}
		fd = nfd
	}
	return newNamespace(fd, path)
}

// OpenFD opens the network namespace behind the descriptor fd (a
// netns.NsHandle, an open /run/netns/NAME). It duplicates fd: the caller
// keeps its own and may close it at once.
func OpenFD(fd int) (*Namespace, error) {
	if fd < 0 {
		return nil, invalid("namespace descriptor %d", fd)
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, errs.Also(fmt.Errorf("kernel: duplicate namespace descriptor %d: %w", fd, err), ErrInvalid)
	}
	return newNamespace(dup, fmt.Sprintf("descriptor %d", fd))
}

// OpenCurrent opens the network namespace of the calling thread, which is
// the process's unless the program moves threads between namespaces (lock
// the goroutine to its thread first if it does).
func OpenCurrent() (*Namespace, error) {
	return Open("/proc/thread-self/ns/net")
}

// classifyOpen attaches ErrNotFound to an open error of a missing file.
func classifyOpen(err error) error {
	if errors.Is(err, unix.ENOENT) {
		return errs.Also(err, ErrNotFound)
	}
	return err
}

// newNamespace checks that fd (ours) is a network namespace and wraps it.
func newNamespace(fd int, name string) (*Namespace, error) {
	typ, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE)
	if err != nil || typ != unix.CLONE_NEWNET {
		unix.Close(fd)
		if err == nil {
			err = fmt.Errorf("namespace type 0x%x", typ)
		}
		return nil, errs.Also(fmt.Errorf("kernel: %s is not a network namespace: %w", name, err), ErrInvalid)
	}
	ns := &Namespace{fd: fd}
	ns.closing, ns.cancel = context.WithCancel(context.Background())
	ns.idle = sync.NewCond(&ns.mu)
	return ns, nil
}

// acquire registers a call in progress; it fails with ErrClosed once
// Close has been called. Every successful acquire is paired with release.
func (ns *Namespace) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.idle == nil {
		return errNotOpened
	}
	if ns.closed {
		return ErrClosed
	}
	ns.users++
	return nil
}

// errNotOpened is the error of a Namespace that was not opened (a zero
// value): it has no descriptor, and never uses the process's namespace.
var errNotOpened = errs.Also(invalid("Namespace not opened with Open, OpenFD or OpenCurrent"), ErrClosed)

func (ns *Namespace) release() {
	ns.mu.Lock()
	ns.users--
	if ns.users == 0 {
		ns.idle.Broadcast()
	}
	ns.mu.Unlock()
}

// Close ends the subscriptions, waits for the calls in progress, and
// closes the sockets and the namespace descriptor. It is idempotent; every
// later call fails with ErrClosed. It must not be called from a callback
// or from a function given to Do.
func (ns *Namespace) Close() error {
	ns.mu.Lock()
	if ns.closed || ns.idle == nil {
		ns.mu.Unlock()
		return nil
	}
	ns.closed = true
	ns.cancel()
	for ns.users > 0 {
		ns.idle.Wait()
	}
	ns.mu.Unlock()
	var errList []error
	if ns.nl != nil {
		errList = append(errList, ns.nl.close())
	}
	for _, h := range []*netlink.Handle{ns.handle, ns.ct} {
		if h != nil {
			closeHandle(h)
		}
	}
	if ns.wg != nil {
		errList = append(errList, ns.wg.Close())
	}
	errList = append(errList, unix.Close(ns.fd))
	return errors.Join(errList...)
}

// closeHandle closes h's sockets but leaves them in place: a Handle whose
// socket map is nil falls back to fresh sockets in the calling thread's
// namespace, which would let a late call touch the host. With closed
// sockets every later call fails instead.
func closeHandle(h *netlink.Handle) {
	keep := *h
	h.Close()
	*h = keep
}

// FD returns the namespace descriptor, for APIs that take one. It belongs
// to ns: do not close it, and do not use it after Close (FD returns -1
// then).
func (ns *Namespace) FD() int {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.closed || ns.idle == nil {
		return -1
	}
	return ns.fd
}

// do runs fn on a thread inside the namespace; the caller holds a call.
// A thread that is already there (OpenCurrent) runs fn without entering
// the namespace again, which needs no privilege; otherwise netnsutil.Do
// moves a fresh thread in and back.
func (ns *Namespace) do(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if !threadIn(ns.fd) {
			runtime.UnlockOSThread()
			done <- netnsutil.Do(netns.NsHandle(ns.fd), fn)
			return
		}
		err := fn()
		if threadIn(ns.fd) {
			runtime.UnlockOSThread()
		} // else fn moved the thread: it stays locked and dies with this goroutine
		done <- err
	}()
	return <-done
}

// threadIn reports whether the calling thread's network namespace is the
// one behind fd.
func threadIn(fd int) bool {
	var self, target unix.Stat_t
	return unix.Stat("/proc/thread-self/ns/net", &self) == nil && unix.Fstat(fd, &target) == nil &&
		self.Dev == target.Dev && self.Ino == target.Ino
}

// Do runs fn on an OS thread locked inside the namespace and returns its
// error: sockets fn creates stay in the namespace (wgctrl,
// BPF attachments), and /proc/sys/net and /proc/thread-self/net show the
// namespace. The calling goroutine's thread never changes namespace. fn
// must not call runtime.Goexit (t.FailNow) nor Close.
func (ns *Namespace) Do(fn func() error) error {
	if fn == nil {
		return invalid("nil function")
	}
	if err := ns.acquire(context.Background()); err != nil {
		return err
	}
	defer ns.release()
	return ns.do(fn)
}

// Runner returns a runner whose processes start inside the namespace, as
// command.NetNS does (iptables-restore, ipset and nft act on it). Once ns
// is closed, Run fails with an error wrapping ErrClosed; Close waits for
// processes that are running.
func (ns *Namespace) Runner() command.Runner { return nsRunner{ns} }

// nsRunner is the Runner of a Namespace.
type nsRunner struct{ ns *Namespace }

// Run runs name inside the namespace.
func (r nsRunner) Run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	if err := r.ns.acquire(orBackground(ctx)); err != nil {
		return nil, fmt.Errorf("kernel: run %s: %w", name, errs.Also(err, command.ErrNetNS))
	}
	defer r.ns.release()
	return command.NetNS{FD: r.ns.fd}.Run(ctx, stdin, name, args...)
}

// rtnl returns the route socket, opened in the namespace on first use.
// The caller holds a call.
func (ns *Namespace) rtnl() (*conn, error) {
	ns.initMu.Lock()
	defer ns.initMu.Unlock()
	if ns.nl != nil {
		return ns.nl, nil
	}
	var s *socket
	if err := ns.do(func() (err error) { s, err = newSocket(); return err }); err != nil {
		if s != nil {
			s.close()
		}
		return nil, fmt.Errorf("kernel: open a netlink socket in the namespace: %w", err)
	}
	ns.nl = newConn(s)
	return ns.nl, nil
}

// netlinkHandle returns a handle of the netlink library with one socket
// of family, created inside the namespace on first use (so the calling
// thread never moves). The caller holds a call.
func (ns *Namespace) netlinkHandle(family int) (*netlink.Handle, error) {
	ns.initMu.Lock()
	defer ns.initMu.Unlock()
	slot := &ns.handle
	if family == unix.NETLINK_NETFILTER {
		slot = &ns.ct
	}
	if *slot != nil {
		return *slot, nil
	}
	var h *netlink.Handle
	if err := ns.do(func() (err error) { h, err = netlink.NewHandle(family); return err }); err != nil {
		if h != nil {
			h.Close()
		}
		return nil, classify(fmt.Errorf("kernel: open a netlink handle in the namespace: %w", err))
	}
	*slot = h
	return h, nil
}

// withConn runs fn with the route socket inside a call.
func (ns *Namespace) withConn(ctx context.Context, fn func(c *conn) error) error {
	if err := ns.acquire(ctx); err != nil {
		return err
	}
	defer ns.release()
	c, err := ns.rtnl()
	if err != nil {
		return err
	}
	return fn(c)
}

// withHandle runs fn with the NETLINK_ROUTE (or, for family
// NETLINK_NETFILTER, the conntrack) handle inside a call.
func (ns *Namespace) withHandle(ctx context.Context, family int, fn func(h *netlink.Handle) error) error {
	if err := ns.acquire(ctx); err != nil {
		return err
	}
	defer ns.release()
	h, err := ns.netlinkHandle(family)
	if err != nil {
		return err
	}
	return fn(h)
}

// applyWith runs a batched write inside a call: one error per op, each
// one the call's error when it could not start.
func applyWith[T any](ns *Namespace, ctx context.Context, ops []T, k *opCodec[T], apply func(c *conn, ctx context.Context, ops []T) []error) []error {
	ctx = orBackground(ctx)
	var out []error
	err := ns.withConn(ctx, func(c *conn) error {
		out = apply(c, ctx, ops)
		return nil
	})
	if err != nil {
		return failOps(ops, k, err)
	}
	return out
}

func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// DumpRoutes calls fn for every route of family in table (0: every table),
// parsing each straight from the receive buffer into a reused Route: fn
// must not keep the pointer (copy *r; NextHops, allocated per multipath
// route, may be kept). Cloned routes are never reported. The table is
// filtered in the kernel where it can (strict dump checking, Linux ≥
// 4.20) and in userspace in any case; a table that does not exist is
// empty. On an interrupted dump, reset (if not nil) is called and the dump
// starts over, at most DumpAttempts times; then the error wraps
// ErrDumpInterrupted. fn and reset must not call the route, neighbour,
// FDB or rule methods of ns (they hold its route socket).
func (ns *Namespace) DumpRoutes(ctx context.Context, family Family, table uint32, fn func(*Route) error, reset func()) error {
	ctx = orBackground(ctx)
	return ns.withConn(ctx, func(c *conn) error { return c.dumpRoutes(ctx, family, table, 0, fn, reset) })
}

// DumpInterfaceRoutes is DumpRoutes limited to the routes that leave
// through the interface with index oif (> 0, else ErrInvalid): as their
// output interface or one of their next hops. The kernel filters by
// interface under strict dump checking (but still walks the table).
func (ns *Namespace) DumpInterfaceRoutes(ctx context.Context, family Family, table uint32, oif int, fn func(*Route) error, reset func()) error {
	if oif <= 0 {
		return invalid("route dump: interface index %d", oif)
	}
	ctx = orBackground(ctx)
	return ns.withConn(ctx, func(c *conn) error { return c.dumpRoutes(ctx, family, table, oif, fn, reset) })
}

// ApplyRoutes writes ops in as few sendmsg calls as possible (each batch
// up to 64 KiB of requests, and no more than the socket receive buffer
// holds acknowledgements for) and returns one error per op, in order.
// Errors are *OpError values: a kernel refusal wraps its unix.Errno
// (ENODEV: no such interface, ENETDOWN: interface down, ENETUNREACH:
// gateway not reachable, EEXIST: OpAdd of an existing route, ESRCH:
// OpDelete of a missing one …) with ErrExists, ErrNotFound or
// ErrNotSupported attached where one applies, and carries the kernel's
// message. An invalid op (Route.Validate; a delete only needs the key)
// fails with ErrInvalid and is not sent. When ctx ends, the ops not yet
// sent fail with ctx's error. The kernel applies a batch in order.
func (ns *Namespace) ApplyRoutes(ctx context.Context, ops []RouteOp) []error {
	return applyWith(ns, ctx, ops, routeCodec, (*conn).applyRoutes)
}

// Neighbors lists the neighbour entries of family on the interface with
// index linkIndex (0: every interface), in every NUD state.
func (ns *Namespace) Neighbors(ctx context.Context, family Family, linkIndex int) ([]Neighbor, error) {
	ctx = orBackground(ctx)
	var out []Neighbor
	err := ns.withConn(ctx, func(c *conn) (err error) { out, err = c.neighbors(ctx, family, linkIndex); return err })
	return out, err
}

// ApplyNeighbors writes neighbour entries in batches, as ApplyRoutes does
// routes: OpReplace (NLM_F_REPLACE, state NUDPermanent unless the
// Neighbor says otherwise), OpAdd (fails with ErrExists when the entry
// exists) and OpDelete (by LinkIndex and IP; a missing entry fails with
// ErrNotFound).
func (ns *Namespace) ApplyNeighbors(ctx context.Context, ops []NeighborOp) []error {
	return applyWith(ns, ctx, ops, neighborCodec, (*conn).applyNeighbors)
}

// FDB lists the entries of the device's own forwarding database (NTF_SELF:
// a VXLAN device's MACs and their remote VTEPs, one entry per remote) of
// the interface with index linkIndex (0: every interface).
func (ns *Namespace) FDB(ctx context.Context, linkIndex int) ([]FDBEntry, error) {
	ctx = orBackground(ctx)
	var out []FDBEntry
	err := ns.withConn(ctx, func(c *conn) (err error) { out, err = c.fdb(ctx, linkIndex); return err })
	return out, err
}

// ApplyFDB writes FDB entries in batches into the device's own database
// (NTF_SELF), as `bridge fdb … self` does. OpReplace of a unicast MAC
// creates the entry or replaces its remote; OpReplace of the all-zeros MAC
// (the default entry that floods unknown destinations) or of a multicast
// MAC adds Dst to its list of remotes (NLM_F_APPEND), since a VXLAN device
// floods such frames to every remote listed. OpAdd fails with ErrExists
// when the MAC has an entry. OpDelete removes the remote Dst of the MAC
// (the whole entry when Dst is unset); a MAC without an entry fails with
// ErrNotFound, but a remote the MAC does not have is, as the kernel does
// it, no change and no error. Entries are written NUD_PERMANENT when
// Permanent, else NUD_REACHABLE (and then age out).
func (ns *Namespace) ApplyFDB(ctx context.Context, ops []FDBOp) []error {
	return applyWith(ns, ctx, ops, fdbCodec, (*conn).applyFDB)
}

// Rules lists the routing policy rules of family, in the kernel's order,
// with their action.
func (ns *Namespace) Rules(ctx context.Context, family Family) ([]Rule, error) {
	ctx = orBackground(ctx)
	var out []Rule
	err := ns.withConn(ctx, func(c *conn) (err error) { out, err = c.rules(ctx, family); return err })
	return out, err
}

// AddRule adds r (Rule.Validate): fields left zero are not sent
// (Priority 0 lets the kernel choose one; SuppressPrefixLen and
// SuppressIfGroup must be -1 when unset). A rule the kernel considers
// equal fails with an error wrapping ErrExists.
func (ns *Namespace) AddRule(ctx context.Context, r Rule) error {
	ctx = orBackground(ctx)
	return ns.withConn(ctx, func(c *conn) error { return c.writeRule(ctx, OpAdd, &r) })
}

// DeleteRule deletes the first rule that matches r's set fields, as the
// kernel does (zero fields, Action 0, Priority 0 and -1 suppressors match
// anything); none wraps ErrNotFound.
func (ns *Namespace) DeleteRule(ctx context.Context, r Rule) error {
	ctx = orBackground(ctx)
	return ns.withConn(ctx, func(c *conn) error { return c.writeRule(ctx, OpDelete, &r) })
}

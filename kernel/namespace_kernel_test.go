//go:build linux

package kernel

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// hasLink reports whether a namespace's link list names name.
func hasLink(t *testing.T, ns *Namespace, name string) bool {
	t.Helper()
	ls, err := ns.Links(context.Background())
	require.NoError(t, err)
	for _, l := range ls {
		if l.Name == name {
			return true
		}
	}
	return false
}

func TestKernelOpenPathFDAndCurrent(t *testing.T) {
	kns := kerneltest.NewNS(t)
	require.NoError(t, kns.Handle().LinkAdd(bridge("np-open")))

	byPath, err := Open(kns.Path())
	require.NoError(t, err)
	defer byPath.Close()
	assert.True(t, hasLink(t, byPath, "np-open"), "Open(path) reaches the namespace")

	fd, err := unix.Open(kns.Path(), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	byFD, err := OpenFD(fd)
	require.NoError(t, err)
	require.NoError(t, unix.Close(fd), "the caller keeps (and closes) its own descriptor")
	defer byFD.Close()
	assert.NotEqual(t, fd, byFD.FD())
	assert.True(t, hasLink(t, byFD, "np-open"), "OpenFD reaches the namespace after the caller closed its descriptor")
	same, err := command.SameNetNS(byPath.FD(), byFD.FD())
	require.NoError(t, err)
	assert.True(t, same)

	byHandle, err := OpenFD(int(kns.NsHandle()))
	require.NoError(t, err)
	defer byHandle.Close()
	assert.True(t, hasLink(t, byHandle, "np-open"))

	var current *Namespace
	require.NoError(t, kns.Do(func() error {
		var err error
		current, err = OpenCurrent()
		return err
	}))
	defer current.Close()
	assert.True(t, hasLink(t, current, "np-open"), "OpenCurrent opens the calling thread's namespace")

	self, err := OpenCurrent()
	require.NoError(t, err)
	defer self.Close()
	same, err = command.SameNetNS(self.FD(), byPath.FD())
	require.NoError(t, err)
	assert.False(t, same, "the test's own thread is in the host namespace")
}

func TestKernelOpenErrors(t *testing.T) {
	kerneltest.RequireKernel(t)
	_, err := Open("/run/netns/nodeplane-no-such-namespace")
	assert.ErrorIs(t, err, ErrNotFound)
	assert.ErrorIs(t, err, os.ErrNotExist)

	_, err = Open("/proc/self/ns/uts")
	assert.ErrorIs(t, err, ErrInvalid, "a namespace, but not a network namespace")
	_, err = Open("/etc/hostname")
	assert.ErrorIs(t, err, ErrInvalid, "not a namespace at all")

	_, err = OpenFD(-1)
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = OpenFD(1 << 20)
	assert.ErrorIs(t, err, ErrInvalid, "not an open descriptor")
	f, err := os.Open("/proc/self/ns/uts")
	require.NoError(t, err)
	defer f.Close()
	_, err = OpenFD(int(f.Fd()))
	assert.ErrorIs(t, err, ErrInvalid)
}

// Everything written through a Namespace lands in it, never in the
// process's namespace; the caller's thread never moves.
func TestKernelNamespaceNeverTouchesHost(t *testing.T) {
	e := newKernelEnv(t)
	ctx := context.Background()
	before, err := netns.Get()
	require.NoError(t, err)
	defer before.Close()

	name := "np-iso0"
	require.False(t, hostHas(t, name))
	l, err := e.ns.AddLink(ctx, Link{Name: name, Kind: KindBridge})
	require.NoError(t, err)
	require.NoError(t, e.ns.AddAddr(ctx, Addr{LinkIndex: l.Index, Prefix: netip.MustParsePrefix("198.51.100.1/24")}))
	require.NoError(t, e.ns.SetSysctl(ctx, "net.ipv4.conf."+name+".rp_filter", "2"))
	for _, err := range e.ns.ApplyRoutes(ctx, []RouteOp{{Kind: OpReplace, Route: Route{Family: IPv4, Table: 4242,
		Dst: netip.MustParsePrefix("203.0.113.0/24"), Type: RTNBlackhole}}}) {
		require.NoError(t, err)
	}

	assert.False(t, hostHas(t, name), "the link is absent from the host")
	_, err = os.Stat("/proc/sys/net/ipv4/conf/" + name)
	assert.ErrorIs(t, err, os.ErrNotExist, "the host has no sysctls of it")
	self, err := OpenCurrent()
	require.NoError(t, err)
	defer self.Close()
	hostRoutes := 0
	require.NoError(t, self.DumpRoutes(ctx, IPv4, 4242, func(*Route) error { hostRoutes++; return nil }, nil))
	assert.Zero(t, hostRoutes, "the host's table 4242 is empty")
	assert.True(t, hasLink(t, e.ns, name))

	after, err := netns.Get()
	require.NoError(t, err)
	defer after.Close()
	assert.True(t, after.Equal(before), "the caller's thread did not move")
}

func TestKernelDoAndRunnerRunInside(t *testing.T) {
	e := newKernelEnv(t)
	var inside netns.NsHandle
	require.NoError(t, e.ns.Do(func() error {
		var err error
		inside, err = netns.Get()
		return err
	}))
	defer inside.Close()
	same, err := command.SameNetNS(int(inside), e.ns.FD())
	require.NoError(t, err)
	assert.True(t, same, "Do runs fn inside the namespace")
	assert.ErrorIs(t, e.ns.Do(nil), ErrInvalid)

	out, err := e.ns.Runner().Run(context.Background(), nil, "ip", "-o", "link", "show")
	require.NoError(t, err)
	assert.Contains(t, string(out), "v0@v1", "the runner's process sees the namespace's links")
	assert.NotContains(t, string(out), "docker0")
	out, err = e.ns.Runner().Run(context.Background(), strings.NewReader("hello"), "cat")
	require.NoError(t, err)
	assert.Equal(t, "hello", string(out))
}

func TestKernelNFTables(t *testing.T) {
	kerneltest.RequireCommands(t, "nft")
	e := newKernelEnv(t)
	_, err := e.ns.Runner().Run(context.Background(), nil, "nft", "add", "table", "inet", "np_kernel_test")
	require.NoError(t, err)
	s, err := e.ns.OpenNFTablesSocket()
	require.NoError(t, err)
	defer s.Close()
	// A dump of every table, through the socket: it sees the namespace's
	// nf_tables, not the host's.
	var w nfnl.Writer
	w.End(w.Begin(nfnl.Type(nfnl.MsgGetTable), nfnl.FlagRequest|nfnl.FlagDump, 1, 0, 0))
	require.NoError(t, s.Send(w.B))
	var names []string
	buf := make([]byte, 1<<16)
	for done := false; !done; {
		n, err := s.Receive(buf, true)
		require.NoError(t, err)
		require.NoError(t, nfnl.ForEachMsg(buf[:n], func(m *nfnl.Msg) error {
			if m.Type == nfnl.MsgDone || m.Type == nfnl.MsgError {
				done = true
				return nil
			}
			for a := nfnl.NewAttrs(m.Data); a.Next(); {
				if a.Type() == nfnl.TableName {
					names = append(names, a.Str())
				}
			}
			return nil
		}))
	}
	assert.Equal(t, []string{"np_kernel_test"}, names)
	require.NoError(t, e.ns.Close())
	_, err = e.ns.OpenNFTablesSocket()
	assert.ErrorIs(t, err, ErrClosed)
}

func TestKernelClose(t *testing.T) {
	e := newKernelEnv(t)
	ctx := context.Background()
	_, err := e.ns.Links(ctx) // sockets opened
	require.NoError(t, err)
	require.NoError(t, e.ns.Close())
	require.NoError(t, e.ns.Close(), "Close is idempotent")
	assert.Equal(t, -1, e.ns.FD())

	calls := map[string]error{
		"Do":              e.ns.Do(func() error { return nil }),
		"DumpRoutes":      e.ns.DumpRoutes(ctx, IPv4, 0, func(*Route) error { return nil }, nil),
		"DumpIfRoutes":    e.ns.DumpInterfaceRoutes(ctx, IPv4, 0, 1, func(*Route) error { return nil }, nil),
		"ApplyRoutes":     e.ns.ApplyRoutes(ctx, genRoutes(true, 1, 100, 1))[0],
		"ApplyNeighbors":  e.ns.ApplyNeighbors(ctx, []NeighborOp{{Kind: OpReplace, Neighbor: neighbor(true, 1, 1)}})[0],
		"ApplyFDB":        e.ns.ApplyFDB(ctx, []FDBOp{{Kind: OpReplace, Entry: FDBEntry{LinkIndex: 1, MAC: mac(1)}}})[0],
		"AddRule":         e.ns.AddRule(ctx, rule(IPv4, 5, 6)),
		"DeleteRule":      e.ns.DeleteRule(ctx, rule(IPv4, 5, 6)),
		"DeleteLink":      e.ns.DeleteLink(ctx, 1),
		"SetLinkUp":       e.ns.SetLinkUp(ctx, 1, true),
		"SetLinkMTU":      e.ns.SetLinkMTU(ctx, 1, 1500),
		"SetLinkMAC":      e.ns.SetLinkMAC(ctx, 1, mac(1)),
		"AddAddr":         e.ns.AddAddr(ctx, Addr{LinkIndex: 1, Prefix: netip.MustParsePrefix("10.0.0.1/8")}),
		"DeleteAddr":      e.ns.DeleteAddr(ctx, Addr{LinkIndex: 1, Prefix: netip.MustParsePrefix("10.0.0.1/8")}),
		"SetSysctl":       e.ns.SetSysctl(ctx, "net.ipv4.ip_forward", "1"),
		"ApplyRoutes nil": nil,
	}
	_, calls["Links"] = e.ns.Links(ctx)
	_, calls["LinkByName"] = e.ns.LinkByName(ctx, "lo")
	_, calls["AddLink"] = e.ns.AddLink(ctx, Link{Name: "x", Kind: KindBridge})
	_, calls["Addrs"] = e.ns.Addrs(ctx, IPv4)
	_, calls["Rules"] = e.ns.Rules(ctx, IPv4)
	_, calls["Neighbors"] = e.ns.Neighbors(ctx, IPv4, 0)
	_, calls["FDB"] = e.ns.FDB(ctx, 0)
	_, calls["Sysctl"] = e.ns.Sysctl(ctx, "net.ipv4.ip_forward")
	_, calls["DeleteConntrack"] = e.ns.DeleteConntrack(ctx, IPv4, []netip.Addr{netip.MustParseAddr("10.0.0.1")})
	_, calls["Subscribe"] = e.ns.Subscribe(ctx, EventLinks)
	_, calls["OpenNFTablesSocket"] = e.ns.OpenNFTablesSocket()
	_, calls["Runner"] = e.ns.Runner().Run(ctx, nil, "true")
	delete(calls, "ApplyRoutes nil")
	for name, err := range calls {
		assert.ErrorIs(t, err, ErrClosed, name)
	}
	var oe *OpError
	assert.ErrorAs(t, calls["ApplyRoutes"], &oe, "batched writes fail per op")
	assert.ErrorIs(t, calls["Runner"], command.ErrNetNS)
}

// Close waits for the calls in progress; the calls that come after it
// fail with ErrClosed; nothing races.
func TestKernelCloseDuringCalls(t *testing.T) {
	e := newKernelEnv(t)
	ctx := context.Background()
	inDo := make(chan struct{})
	release := make(chan struct{})
	doErr := make(chan error, 1)
	go func() {
		doErr <- e.ns.Do(func() error {
			close(inDo)
			<-release
			_, err := e.ns.Links(ctx) // a call from inside Do, while Close waits
			return err
		})
	}()
	<-inDo
	closed := make(chan error, 1)
	go func() { closed <- e.ns.Close() }()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if _, err := e.ns.Links(ctx); err != nil {
					assert.ErrorIs(t, err, ErrClosed)
					return
				}
			}
		}()
	}
	close(release)
	err := <-doErr
	if err != nil { // Close got in first: the nested call was refused, never sent elsewhere
		assert.ErrorIs(t, err, ErrClosed)
	}
	require.NoError(t, <-closed)
	wg.Wait()
	_, err = e.ns.Links(ctx)
	assert.ErrorIs(t, err, ErrClosed)
}

func TestKernelNilContext(t *testing.T) {
	e := newKernelEnv(t)
	//lint:ignore SA1012 a nil context means context.Background()
	_, err := e.ns.Links(nil)
	assert.NoError(t, err)
	//lint:ignore SA1012 a nil context means context.Background()
	errs := e.ns.ApplyRoutes(nil, genRoutes(true, 2, 100, e.links.v0))
	assert.Equal(t, []error{nil, nil}, errs)
	//lint:ignore SA1012 a nil context means context.Background()
	assert.NoError(t, e.ns.DumpRoutes(nil, IPv4, 100, func(*Route) error { return nil }, nil))

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = e.ns.Links(canceled)
	assert.ErrorIs(t, err, context.Canceled)
	for _, err := range e.ns.ApplyRoutes(canceled, genRoutes(true, 2, 100, e.links.v0)) {
		assert.ErrorIs(t, err, context.Canceled)
	}
	assert.Empty(t, e.ns.ApplyRoutes(context.Background(), nil))
	assert.ErrorIs(t, e.ns.DumpInterfaceRoutes(context.Background(), IPv4, 0, 0, func(*Route) error { return nil }, nil), ErrInvalid)
}

// bridge is a bridge with no ports, for the netlink library.
func bridge(name string) *netlink.Bridge {
	return &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
}

// Bad input is refused before anything is sent: the socket sees only the
// valid operations.
func TestKernelInvalidOpsNeverSent(t *testing.T) {
	e := newKernelEnv(t)
	ctx := context.Background()
	c := e.conn(t)
	counted := &countingTransport{transport: c.t}
	c.t = counted
	vx := addVXLAN(t, e.kns.Handle(), "np-vx", e.links.v0, testAddr4.Addr())

	routes := genRoutes(true, 2, 100, e.links.v0)
	bad := routes[0]
	bad.Route.Dst = netip.MustParsePrefix("10.1.2.3/16")
	errs := e.ns.ApplyRoutes(ctx, []RouteOp{routes[0], bad, {Kind: 9, Route: routes[1].Route}, routes[1]})
	assert.Equal(t, []bool{false, true, true, false}, isInvalid(errs))
	neighs := e.ns.ApplyNeighbors(ctx, []NeighborOp{
		{Kind: OpReplace, Neighbor: Neighbor{LinkIndex: e.links.v0, IP: neighAddr(true, 1)}},
		{Kind: OpReplace, Neighbor: Neighbor{LinkIndex: e.links.v0, IP: neighAddr(true, 2), MAC: mac(2)}},
	})
	assert.Equal(t, []bool{true, false}, isInvalid(neighs))
	fdb := e.ns.ApplyFDB(ctx, []FDBOp{
		{Kind: OpReplace, Entry: FDBEntry{LinkIndex: vx, MAC: mac(1)[:3]}},
		{Kind: OpReplace, Entry: FDBEntry{LinkIndex: vx, MAC: mac(1), Dst: netip.MustParseAddr("192.0.2.1"), Permanent: true}},
	})
	assert.Equal(t, []bool{true, false}, isInvalid(fdb))
	assert.ErrorIs(t, e.ns.AddRule(ctx, Rule{Family: IPv4, Action: RuleLookup}), ErrInvalid, "lookup without a table")
	assert.Equal(t, 4, counted.sent, "two routes, one neighbour, one FDB entry, no rule")
	for _, err := range append(append(errs, neighs...), fdb...) {
		if err != nil {
			var oe *OpError
			assert.ErrorAs(t, err, &oe)
		}
	}
}

// isInvalid reports which errors wrap ErrInvalid (and that the others are
// nil).
func isInvalid(errs []error) []bool {
	out := make([]bool, len(errs))
	for i, err := range errs {
		out[i] = errors.Is(err, ErrInvalid)
		if err != nil && !out[i] {
			panic(err)
		}
	}
	return out
}

// Every method may be called from many goroutines at once.
func TestKernelConcurrentCalls(t *testing.T) {
	e := newKernelEnv(t)
	ctx := context.Background()
	const writers, n = 4, 500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(3)
		go func() {
			defer wg.Done()
			ops := genRoutes(w%2 == 0, n, uint32(100+w), e.links.v0)
			for i, err := range e.ns.ApplyRoutes(ctx, ops) {
				assert.NoError(t, err, "writer %d op %d", w, i)
			}
		}()
		go func() {
			defer wg.Done()
			for range 10 {
				_, err := e.ns.Neighbors(ctx, IPv4, 0)
				assert.NoError(t, err)
				_, err = e.ns.Links(ctx)
				assert.NoError(t, err)
			}
		}()
		go func() {
			defer wg.Done()
			for range 5 {
				_, err := e.ns.Sysctl(ctx, "net.ipv4.ip_forward")
				assert.NoError(t, err)
				err = e.ns.DumpRoutes(ctx, IPv6, 0, func(*Route) error { return nil }, nil)
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	for w := range writers {
		f := map[bool]Family{true: IPv4, false: IPv6}[w%2 == 0]
		assert.Len(t, e.ours(t, f, uint32(100+w)), n)
	}
}

//go:build linux

package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/routetable"
)

// Names and numbers the test's drivers own.
const (
	setPrefix   = "npi-"
	setName     = "allowed"
	chainPrefix = "npt-"
	chainName   = "npt-policy"
	routeTable  = 1000
	routeClass  = routetable.RouteClass(10)
	// waitFor bounds every wait for the loop to converge.
	waitFor = 20 * time.Second
	tick    = 20 * time.Millisecond
)

// policy is the test consumer's one message type: which sources may open
// TCP connections to the protected port, and whether the policy exists at
// all.
type policy struct {
	allowed []netip.Addr
	enabled bool
}

// policyManager turns a policy into desired state on three real drivers:
// an ip set of the allowed sources, an owned chain that accepts the port
// from the set and drops the rest of it, a jump to that chain from INPUT,
// and a route in a dedicated table. Disabled, it wants none of them.
type policyManager struct {
	sets   *ipsets.IPSets
	tbl    netfilter.Table
	routes *routetable.Table

	port       uint16
	routeIface string
	routeCIDR  netip.Prefix

	want  policy
	dirty bool
}

func (m *policyManager) OnUpdate(msg any) {
	if p, ok := msg.(policy); ok {
		m.want = policy{allowed: slices.Clone(p.allowed), enabled: p.enabled}
		m.dirty = true
	}
}

func (m *policyManager) CompleteDeferredWork(context.Context) error {
	if !m.dirty {
		return nil
	}
	if !m.want.enabled {
		if err := m.tbl.InsertRules("test", "INPUT", nil); err != nil {
			return err
		}
		if err := m.tbl.RemoveChains(chainName); err != nil {
			return err
		}
		if err := m.sets.RemoveSet(setName); err != nil {
			return err
		}
		if err := m.routes.SetRoutes(routeClass, m.routeIface, nil); err != nil {
			return err
		}
		m.dirty = false
		return nil
	}
	members := make([]netfilter.Member, 0, len(m.want.allowed))
	for _, a := range m.want.allowed {
		members = append(members, netfilter.IPMember(a))
	}
	if err := m.sets.AddOrReplaceSet(netfilter.SetMetadata{Name: setName, Type: netfilter.HashIP}, members); err != nil {
		return err
	}
	kname, err := m.sets.KernelName(setName)
	if err != nil {
		return err
	}
	port := netfilter.DestPorts(netfilter.Port(m.port))
	tcp := netfilter.Protocol(netfilter.ProtoTCP)
	if err := m.tbl.SetChains(netfilter.Chain{Name: chainName, Rules: []netfilter.Rule{
		{Matches: []netfilter.Match{tcp, port, netfilter.SourceIPSet(kname)}, Action: netfilter.Accept()},
		{Matches: []netfilter.Match{tcp, port}, Action: netfilter.Drop()},
	}}); err != nil {
		return err
	}
	if err := m.tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Jump(chainName)}}); err != nil {
		return err
	}
	if err := m.routes.SetRoutes(routeClass, m.routeIface, []routetable.Target{{CIDR: m.routeCIDR}}); err != nil {
		return err
	}
	m.dirty = false
	return nil
}

// call is one binary run by the ipsets or iptables driver.
type call struct {
	argv  string
	stdin string
	err   error
}

// recorder is a command.Runner that runs binaries in the namespace and logs
// every call, in the order they finish, across the drivers that share it.
type recorder struct {
	next command.Runner

	mu    sync.Mutex
	calls []call
}

func (r *recorder) Run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	var in []byte
	if stdin != nil {
		var err error
		if in, err = io.ReadAll(stdin); err != nil {
			return nil, err
		}
		stdin = bytes.NewReader(in)
	}
	out, err := r.next.Run(ctx, stdin, name, args...)
	r.mu.Lock()
	r.calls = append(r.calls, call{argv: strings.Join(append([]string{name}, args...), " "), stdin: string(in), err: err})
	r.mu.Unlock()
	return out, err
}

// Runner makes the recorder a kernel.Commands, the Kernel of a Table.
func (r *recorder) Runner() command.Runner { return r }

// since returns the calls logged from index from on, and the log's length.
func (r *recorder) since(from int) ([]call, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls[from:]), len(r.calls)
}

// family holds what differs between the IPv4 and IPv6 runs.
type family struct {
	fam        ipfamily.Family
	ipv        ipfamily.Family
	stack      kerneltest.Stack
	ipFlag     string // for ip(8)
	ipsetFam   string // for ipset(8)
	xtables    string // iptables-nft or ip6tables-nft
	ourRoute   netip.Prefix
	theirRoute netip.Prefix
}

var families = []family{
	{
		fam: ipfamily.IPv4, ipv: ipfamily.IPv4, stack: kerneltest.IPv4Only,
		ipFlag: "-4", ipsetFam: "inet", xtables: "iptables-nft",
		ourRoute:   netip.MustParsePrefix("192.0.2.0/24"),
		theirRoute: netip.MustParsePrefix("198.51.100.0/24"),
	},
	{
		fam: ipfamily.IPv6, ipv: ipfamily.IPv6, stack: kerneltest.IPv6Only,
		ipFlag: "-6", ipsetFam: "inet6", xtables: "ip6tables-nft",
		ourRoute:   netip.MustParsePrefix("2001:db8:1::/64"),
		theirRoute: netip.MustParsePrefix("2001:db8:f::/64"),
	},
}

func (f family) pick(v4, v6 netip.Addr) netip.Addr {
	if f.fam == ipfamily.IPv6 {
		return v6
	}
	return v4
}

// agent is one incarnation of the node agent: a Loop with the three
// drivers and the manager, running on the host namespace.
type agent struct {
	loop   *dataplane.Loop
	sets   *ipsets.IPSets
	tbl    *iptables.Table
	routes *routetable.Table
	inSync chan struct{}
	stop   func()
}

// env is one family's namespaces and what the agents share.
type env struct {
	f        family
	host     *kerneltest.Host
	rec      *recorder
	port     uint16
	veth     string
	foreign  func() foreignState
	snapshot foreignState
}

// startAgent builds a Loop and its drivers on the host namespace, queues
// msg and both in-sync markers before Run (so they are one batch), and
// starts Run. stop cancels the loop and waits for Run to return; it also
// runs at cleanup.
func startAgent(t *testing.T, e *env, msg policy) *agent {
	t.Helper()
	k, err := kernel.Open(e.host.NS.Path())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, k.Close()) })

	a := &agent{inSync: make(chan struct{})}
	a.sets, err = ipsets.New(ipsets.Options{Family: e.f.fam, Prefix: setPrefix, Kernel: e.rec})
	require.NoError(t, err)
	a.tbl, err = iptables.New(iptables.Options{
		Table: "filter", Family: e.f.ipv, Backend: iptables.BackendNFT, ChainPrefix: chainPrefix, Kernel: e.rec,
	})
	require.NoError(t, err)
	a.routes, err = routetable.New(routetable.Options{Kernel: k, Family: e.f.fam, Table: routeTable})
	require.NoError(t, err)

	var once sync.Once
	a.loop, err = dataplane.New(dataplane.Options{
		Coalesce:       5 * time.Millisecond,
		HealthInterval: -1,
		OnInSync:       func() { once.Do(func() { close(a.inSync) }) },
	})
	require.NoError(t, err)
	require.NoError(t, a.loop.AddManager(&policyManager{
		sets: a.sets, tbl: a.tbl, routes: a.routes,
		port: e.port, routeIface: e.veth, routeCIDR: e.f.ourRoute,
	}))
	for _, d := range []dataplane.Driver{a.sets, a.tbl, a.routes} {
		require.NoError(t, a.loop.AddDriver(d))
	}

	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, a.loop.Send(ctx, msg))
	a.loop.DatastoreInSync()
	a.loop.InterfacesInSync()
	done := make(chan error, 1)
	go func() { done <- a.loop.Run(ctx) }()
	var stopOnce sync.Once
	a.stop = func() {
		stopOnce.Do(func() {
			cancel()
			assert.NoError(t, <-done, "Run returns nil when its context ends")
			assert.False(t, a.loop.Health().Live)
		})
	}
	t.Cleanup(a.stop)
	return a
}

// waitInSync waits for OnInSync and checks that the loop got there without
// a single failure: the first pass, with everything in it, succeeded.
func (a *agent) waitInSync(t *testing.T) {
	t.Helper()
	select {
	case <-a.inSync:
	case <-time.After(waitFor):
		t.Fatalf("loop not in sync after %v: %+v", waitFor, a.loop.Health())
	}
	h := a.loop.Health()
	require.True(t, h.Ready)
	require.NoError(t, h.LastError)
	require.Zero(t, h.ConsecutiveFailures)
}

// foreignState is the kernel state the test created beside the agent's,
// as the kernel prints it.
type foreignState struct {
	set, rule, route string
}

// save returns the namespace's filter table as iptables-nft-save prints it.
func (e *env) save(t *testing.T) string {
	t.Helper()
	out, err := e.host.NS.Exec(context.Background(), e.f.xtables+"-save", "-t", "filter")
	require.NoError(t, err)
	return string(out)
}

// routes returns the namespace's routes of table routeTable, one a line.
func (e *env) routes(t *testing.T) []string {
	t.Helper()
	out, err := e.host.NS.Exec(context.Background(), "ip", e.f.ipFlag, "route", "show", "table", fmt.Sprint(routeTable))
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// setNames returns the names of the namespace's ip sets.
func (e *env) setNames(t *testing.T) []string {
	t.Helper()
	out, err := e.host.NS.Exec(context.Background(), "ipset", "list", "-n")
	require.NoError(t, err)
	return strings.Fields(string(out))
}

// lineWith returns the first line of lines that contains every part, or "".
func lineWith(lines []string, parts ...string) string {
	for _, l := range lines {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return l
		}
	}
	return ""
}

// TestKernelLoopAppliesDriversInPhaseOrder drives real ipsets, iptables
// (nft backend) and routetable drivers through one dataplane.Loop on a host
// namespace with two pods, and proves the loop's apply order in the kernel:
// a chain that matches a set which does not exist yet is written in the
// same pass that creates the set, and removing the policy removes the jump
// and chain before it destroys the set, in one pass, with no error. Real
// TCP traffic from the pods follows the rules, foreign state survives, and
// a restarted agent adopts the kernel without writing anything.
func TestKernelLoopAppliesDriversInPhaseOrder(t *testing.T) {
	kerneltest.RequireCommands(t, "ipset", "ip", "iptables-nft", "iptables-nft-save", "iptables-nft-restore",
		"ip6tables-nft", "ip6tables-nft-save", "ip6tables-nft-restore")
	for _, f := range families {
		t.Run(f.fam.String(), func(t *testing.T) { testPhaseOrder(t, f) })
	}
}

func testPhaseOrder(t *testing.T, f family) {
	ctx := context.Background()
	topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 1, PodsPerHost: 2, Stack: f.stack})
	host := topo.Hosts[0]
	allowedPod, otherPod := host.Pods[0], host.Pods[1]
	allowed, other := f.pick(allowedPod.IPv4, allowedPod.IPv6), f.pick(otherPod.IPv4, otherPod.IPv6)
	hostAddr := f.pick(host.UnderlayIPv4.Addr(), host.UnderlayIPv6.Addr())

	server, _ := host.NS.ListenTCP(t, netip.AddrPortFrom(hostAddr, 0))
	fromAllowed := kerneltest.TCPCheck(allowedPod.NS, server)
	fromOther := kerneltest.TCPCheck(otherPod.NS, server)
	// Without the policy both pods reach the server.
	kerneltest.Eventually(t, waitFor, fromAllowed)
	kerneltest.Eventually(t, waitFor, fromOther)

	e := &env{f: f, host: host, rec: &recorder{next: host.NS}, port: server.Port(), veth: allowedPod.HostVeth}

	// Foreign state beside ours: a set without our prefix, a rule (without
	// our hash) that matches it, and a route of another protocol in our
	// table.
	ns := host.NS
	_, err := ns.Exec(ctx, "ipset", "create", "foreign-set", "hash:ip", "family", f.ipsetFam)
	require.NoError(t, err)
	_, err = ns.Exec(ctx, "ipset", "add", "foreign-set", other.String())
	require.NoError(t, err)
	_, err = ns.Exec(ctx, f.xtables, "-A", "INPUT", "-p", "udp", "--dport", "9",
		"-m", "set", "--match-set", "foreign-set", "src", "-j", "ACCEPT")
	require.NoError(t, err)
	_, err = ns.Exec(ctx, "ip", f.ipFlag, "route", "add", f.theirRoute.String(), "dev", otherPod.HostVeth,
		"table", fmt.Sprint(routeTable), "proto", "static")
	require.NoError(t, err)
	e.foreign = func() foreignState {
		out, err := ns.Exec(ctx, "ipset", "list", "foreign-set")
		require.NoError(t, err)
		return foreignState{
			set:   string(out),
			rule:  lineWith(strings.Split(e.save(t), "\n"), "-A INPUT", "foreign-set"),
			route: lineWith(e.routes(t), f.theirRoute.String()),
		}
	}
	e.snapshot = e.foreign()
	require.Contains(t, e.snapshot.set, other.String())
	require.NotEmpty(t, e.snapshot.rule)
	require.NotEmpty(t, e.snapshot.route)
	kname := setPrefix + setName

	// Step 1: the policy and both in-sync markers in one batch. The chain
	// matches a set that does not exist before this pass.
	require.NotContains(t, e.setNames(t), kname)
	first := startAgent(t, e, policy{allowed: []netip.Addr{allowed}, enabled: true})
	first.waitInSync(t)
	calls, mark := e.rec.since(0)
	setCreated := indexOf(calls, func(c call) bool {
		return c.argv == "ipset restore" && strings.Contains(c.stdin, "create "+kname)
	})
	chainWritten := indexOf(calls, func(c call) bool {
		return strings.HasPrefix(c.argv, f.xtables+"-restore") && strings.Contains(c.stdin, "--match-set "+kname)
	})
	require.GreaterOrEqual(t, setCreated, 0, "the set is created: %v", argvs(calls))
	require.GreaterOrEqual(t, chainWritten, 0, "the chain is written: %v", argvs(calls))
	assert.Less(t, setCreated, chainWritten, "the set is created before the rules that match it: %v", argvs(calls))
	require.NoError(t, calls[setCreated].err)
	require.NoError(t, calls[chainWritten].err)
	assert.Zero(t, first.tbl.WorkStats().RestoreErrors, "no restore failed, not even once within an Apply")

	members, err := ns.Exec(ctx, "ipset", "list", kname)
	require.NoError(t, err)
	assert.Contains(t, string(members), allowed.String())
	assert.NotContains(t, string(members), other.String())
	saved := strings.Split(e.save(t), "\n")
	assert.NotEmpty(t, lineWith(saved, ":"+chainName))
	assert.NotEmpty(t, lineWith(saved, "-A INPUT", "-j "+chainName))
	assert.NotEmpty(t, lineWith(saved, "-A "+chainName, "--match-set "+kname+" src", "-j ACCEPT"))
	assert.NotEmpty(t, lineWith(e.routes(t), f.ourRoute.String(), "dev "+e.veth))
	e.requireForeignIntact(t)

	// Real traffic follows the rules: the allowed pod connects, the other
	// pod's SYNs are dropped.
	kerneltest.Eventually(t, waitFor, fromAllowed)
	kerneltest.Eventually(t, waitFor, kerneltest.Not(fromOther))
	// The kernel refuses to destroy a set a rule refers to: this is why
	// the order of the next pass matters.
	_, err = ns.Exec(ctx, "ipset", "destroy", kname)
	require.Error(t, err, "a set in use by a rule cannot be destroyed")
	require.Contains(t, e.setNames(t), kname)

	// Step 3 (before step 2): kill the agent and start a new one with the
	// same desired state. It adopts what it finds and writes nothing.
	first.stop()
	_, mark = e.rec.since(mark)
	second := startAgent(t, e, policy{allowed: []netip.Addr{allowed}, enabled: true})
	second.waitInSync(t)
	calls, mark = e.rec.since(mark)
	for _, c := range calls {
		assert.NotEqual(t, "ipset restore", c.argv, "a restarted agent writes no set: %q", c.stdin)
		assert.False(t, strings.HasPrefix(c.argv, "ipset destroy"), "a restarted agent destroys no set: %s", c.argv)
		assert.NoError(t, c.err, c.argv)
	}
	assert.Zero(t, second.tbl.WorkStats().Restores, "a restarted agent writes no rule")
	assert.Zero(t, second.routes.Counters().RouteWrites, "a restarted agent writes no route")
	kerneltest.Require(t, fromAllowed)

	// Step 2: disable. In one pass the jump and chain go (PhaseTables)
	// before the set is destroyed (PhaseIPSetsDelete).
	require.NoError(t, second.loop.Send(ctx, policy{}))
	// The recorder logs a call when its process has exited, which can be
	// after the kernel shows the effect: wait for the log too.
	destroyLogged := func() bool {
		calls, _ := e.rec.since(mark)
		return slices.ContainsFunc(calls, func(c call) bool { return c.argv == "ipset destroy "+kname })
	}
	require.Eventually(t, func() bool {
		saved := strings.Split(e.save(t), "\n")
		return !slices.Contains(e.setNames(t), kname) &&
			lineWith(saved, chainName) == "" &&
			lineWith(e.routes(t), f.ourRoute.String()) == "" &&
			destroyLogged()
	}, waitFor, tick, "the set, the chain, the jump and the route are removed")
	calls, _ = e.rec.since(mark)
	var destroys []int
	for i, c := range calls {
		if c.argv == "ipset destroy "+kname {
			destroys = append(destroys, i)
		}
	}
	require.Len(t, destroys, 1, "the set is destroyed at the first try: %v", argvs(calls))
	require.NoError(t, calls[destroys[0]].err)
	unhooked := indexOf(calls, func(c call) bool {
		return strings.HasPrefix(c.argv, f.xtables+"-restore") && strings.Contains(c.stdin, chainName)
	})
	require.GreaterOrEqual(t, unhooked, 0, "the chain is removed: %v", argvs(calls))
	require.NoError(t, calls[unhooked].err)
	assert.Less(t, unhooked, destroys[0], "the rules go before the set they match: %v", argvs(calls))
	h := second.loop.Health()
	assert.NoError(t, h.LastError)
	assert.Zero(t, h.ConsecutiveFailures)
	assert.Zero(t, second.tbl.WorkStats().RestoreErrors)
	e.requireForeignIntact(t)

	// Without the policy, both pods reach the server again.
	kerneltest.Eventually(t, waitFor, fromAllowed)
	kerneltest.Eventually(t, waitFor, fromOther)
	second.stop()
}

// requireForeignIntact checks that the foreign set, rule and route are
// exactly as they were created.
func (e *env) requireForeignIntact(t *testing.T) {
	t.Helper()
	got := e.foreign()
	assert.Equal(t, e.snapshot.set, got.set, "the foreign set is untouched")
	assert.Equal(t, e.snapshot.rule, got.rule, "the foreign rule is untouched")
	assert.Equal(t, e.snapshot.route, got.route, "the foreign route is untouched")
}

// indexOf returns the index of the first call that matches, or -1.
func indexOf(calls []call, match func(call) bool) int {
	return slices.IndexFunc(calls, match)
}

// argvs lists the calls' command lines and errors, for failure messages.
func argvs(calls []call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.argv
		if c.err != nil {
			out[i] += " (" + c.err.Error() + ")"
		}
	}
	return out
}

//go:build linux

package nftables_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nfmigrate"
	"github.com/nodeplane/nodeplane/nftables"
)

// kenv is a fresh namespace and the kernel.Namespace opened on it.
type kenv struct {
	ns *kerneltest.NS
	k  *kernel.Namespace
}

func newKenv(t *testing.T) *kenv {
	t.Helper()
	kerneltest.RequireCommands(t, "nft")
	ns := kerneltest.NewNS(t)
	k, err := kernel.Open(ns.Path())
	require.NoError(t, err)
	t.Cleanup(func() { k.Close() })
	return &kenv{ns: ns, k: k}
}

// nft runs nft in the namespace.
func (e *kenv) nft(t *testing.T, args ...string) string {
	t.Helper()
	out, err := e.ns.Exec(context.Background(), "nft", args...)
	require.NoError(t, err, "nft %s", strings.Join(args, " "))
	return string(out)
}

// nftInput runs nft -f - with input in the namespace.
func (e *kenv) nftInput(t *testing.T, input string) {
	t.Helper()
	_, err := e.ns.ExecInput(context.Background(), strings.NewReader(input), "nft", "-f", "-")
	require.NoError(t, err, input)
}

func kopts(e *kenv, f ipfamily.Family) nftables.Options {
	return nftables.Options{Name: "np", Family: f, Role: nftables.Filter, Kernel: e.k, PostWriteRecheck: []time.Duration{}}
}

// handlesRE strips rule handles from `nft -a` output.
var handlesRE = regexp.MustCompile(` # handle \d+`)

func TestKernelSetsAndVerdictMaps(t *testing.T) {
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		t.Run(f.String(), func(t *testing.T) {
			e := newKenv(t)
			tbl := newTable(t, kopts(e, f))
			a := func(v4, v6 string) netip.Addr {
				if f == ipfamily.IPv6 {
					return addr(v6)
				}
				return addr(v4)
			}
			p := func(v4, v6 string) netip.Prefix {
				if f == ipfamily.IPv6 {
					return pfx(v6)
				}
				return pfx(v4)
			}
			require.NoError(t, tbl.SetSets(
				nftables.Set{Name: "ips", Key: []nftables.KeyType{nftables.TypeAddr}, Elements: []nftables.Element{
					nftables.Elem(nftables.Addr(a("10.0.0.1", "fd00::1"))), nftables.Elem(nftables.Addr(a("10.0.0.2", "fd00::2")))}},
				nftables.Set{Name: "nets", Key: []nftables.KeyType{nftables.TypeAddr}, Interval: true, Elements: []nftables.Element{
					nftables.Elem(nftables.Prefix(p("10.0.0.0/8", "fd00::/8"))), nftables.Elem(nftables.Prefix(p("10.1.0.0/16", "fd00:1::/32"))),
					nftables.Elem(nftables.Prefix(p("192.168.0.0/24", "2001:db8::/32"))), nftables.Elem(nftables.Prefix(p("192.168.1.0/24", "2001:db9::/32")))}},
				nftables.Set{Name: "ports", Key: []nftables.KeyType{nftables.TypePort}, Interval: true, Elements: []nftables.Element{
					nftables.Elem(nftables.PortRange(netfilter.Ports(1000, 2000))), nftables.Elem(nftables.Port(22)), nftables.Elem(nftables.Port(65535))}},
				nftables.Set{Name: "conns", Key: []nftables.KeyType{nftables.TypeAddr, nftables.TypeProto, nftables.TypePort}, Elements: []nftables.Element{
					nftables.Elem(nftables.Addr(a("10.0.0.1", "fd00::1")), nftables.Proto(netfilter.ProtoUDP), nftables.Port(53))}},
				nftables.Set{Name: "ranges", Key: []nftables.KeyType{nftables.TypeAddr, nftables.TypePort}, Interval: true, Elements: []nftables.Element{
					nftables.Elem(nftables.Prefix(p("10.2.0.0/16", "fd02::/16")), nftables.PortRange(netfilter.Ports(80, 90)))}},
				nftables.Set{Name: "svc", Key: svcKey, Verdict: true, Elements: []nftables.Element{
					{Key: []nftables.Value{nftables.Addr(a("10.96.0.1", "fd96::1")), nftables.Proto(netfilter.ProtoTCP), nftables.Port(80)}, Verdict: netfilter.Goto("svc-a")},
					{Key: []nftables.Value{nftables.Addr(a("10.96.0.2", "fd96::2")), nftables.Proto(netfilter.ProtoTCP), nftables.Port(443)}, Verdict: netfilter.Drop()}}},
			))
			require.NoError(t, tbl.SetChains(
				netfilter.Chain{Name: "svc-a", Rules: []netfilter.Rule{{Action: netfilter.Accept()}}},
				netfilter.Chain{Name: "fw", Rules: []netfilter.Rule{
					{Matches: []netfilter.Match{netfilter.SourceIPSet("ips")}, Action: netfilter.Accept()},
					{Matches: []netfilter.Match{netfilter.SourceIPSet("nets")}, Action: netfilter.Return()},
					{Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestIPSet("ports")}, Action: netfilter.Accept()},
					{Matches: []netfilter.Match{netfilter.IPSet("conns", netfilter.Dst, netfilter.Dst)}, Action: netfilter.Accept()},
					{Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP), netfilter.IPSet("ranges", netfilter.Src, netfilter.Dst)}, Action: netfilter.Accept()},
					{Action: netfilter.VerdictMap("svc", netfilter.Dst, netfilter.Dst)},
				}}))
			require.NoError(t, tbl.InsertRules("test", netfilter.HookForward, []netfilter.Rule{jump("fw")}))
			apply(t, tbl)
			out := e.nft(t, "list", "table", familyName(f), "np")
			want := map[ipfamily.Family][]string{
				ipfamily.IPv4: {"elements = { 10.0.0.1, 10.0.0.2 }", "elements = { 10.0.0.0/8, 192.168.0.0/23 }",
					"elements = { 22, 1000-2000, 65535 }", "elements = { 10.0.0.1 . udp . 53 }", "elements = { 10.2.0.0/16 . 80-90 }",
					"10.96.0.1 . tcp . 80 : goto svc-a", "10.96.0.2 . tcp . 443 : drop",
					"type filter hook forward priority filter - 10; policy accept;",
					"ip daddr . meta l4proto . th dport vmap @svc", "ip saddr . tcp dport @ranges"},
				ipfamily.IPv6: {"elements = { fd00::1, fd00::2 }", "elements = { 2001:db8::/31, fd00::/8 }",
					"elements = { 22, 1000-2000, 65535 }", "elements = { fd00::1 . udp . 53 }", "elements = { fd02::/16 . 80-90 }",
					"fd96::1 . tcp . 80 : goto svc-a", "fd96::2 . tcp . 443 : drop",
					"ip6 daddr . meta l4proto . th dport vmap @svc"},
			}
			flat := strings.Join(strings.Fields(out), " ")
			for _, w := range want[f] {
				assert.Contains(t, flat, strings.Join(strings.Fields(w), " "))
			}
			// A restarted Table reads it all back as it wrote it.
			again := newTable(t, kopts(e, f))
			require.NoError(t, again.SetSets(
				nftables.Set{Name: "ips", Key: []nftables.KeyType{nftables.TypeAddr}, Elements: []nftables.Element{
					nftables.Elem(nftables.Addr(a("10.0.0.1", "fd00::1"))), nftables.Elem(nftables.Addr(a("10.0.0.2", "fd00::2")))}}))
			n, err := nftables.PendingAfterRead(again)
			require.NoError(t, err)
			assert.NotZero(t, n, "sets and chains it does not declare are to go")
			t.Log(out)
		})
	}
}

func familyName(f ipfamily.Family) string {
	if f == ipfamily.IPv6 {
		return "ip6"
	}
	return "ip"
}

// monitor runs `nft monitor` in the namespace; marks delimit what it saw.
type monitor struct {
	e *kenv
	p *kerneltest.Process
	n int
}

func startMonitor(t *testing.T, e *kenv) *monitor {
	t.Helper()
	p, err := e.ns.Start(context.Background(), "stdbuf", "-oL", "nft", "monitor")
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop() })
	m := &monitor{e: e, p: p}
	m.mark(t) // subscribed once the first mark shows
	return m
}

// mark makes a change the monitor must report and waits until it did; it
// returns the output up to it.
func (m *monitor) mark(t *testing.T) string {
	t.Helper()
	m.n++
	name := fmt.Sprintf("np-mark-%d", m.n)
	deadline := time.Now().Add(30 * time.Second)
	for {
		m.e.nft(t, "add", "table", "inet", name)
		m.e.nft(t, "delete", "table", "inet", name)
		for range 50 {
			if out := string(m.p.Stdout()); strings.Contains(out, "delete table inet "+name) {
				return out
			}
			time.Sleep(10 * time.Millisecond)
		}
		require.True(t, time.Now().Before(deadline), "nft monitor never reported the mark: %s %s", m.p.Stdout(), m.p.Stderr())
	}
}

// between returns what the monitor reported after the previous mark and
// before the next one.
func (m *monitor) between(t *testing.T) string {
	t.Helper()
	prev := fmt.Sprintf("delete table inet np-mark-%d", m.n)
	out := m.mark(t)
	next := fmt.Sprintf("add table inet np-mark-%d", m.n)
	i := strings.LastIndex(out, prev)
	j := strings.LastIndex(out, next)
	require.True(t, i >= 0 && j > i, out)
	// The marks' own generations are nft's.
	return strings.TrimSpace(marksGen.ReplaceAllString(out[i+len(prev):j], ""))
}

var marksGen = regexp.MustCompile(`(?m)^# new generation \d+ by process \d+ \(nft\)\n?`)

// canonical returns `nft list table` output with its blocks (sets, maps,
// chains) sorted and rule handles removed: the table's content, whatever
// the order objects were created in.
func canonical(listing string) string {
	listing = handlesRE.ReplaceAllString(listing, "")
	var blocks []string
	var cur strings.Builder
	depth := 0
	for _, line := range strings.Split(listing, "\n") {
		switch {
		case strings.HasPrefix(line, "table ") || line == "}" || line == "":
			continue
		}
		cur.WriteString(strings.TrimSpace(line) + "\n")
		depth += strings.Count(line, "{") - strings.Count(line, "}")
		if depth == 0 {
			blocks = append(blocks, cur.String())
			cur.Reset()
		}
	}
	slices.Sort(blocks)
	return strings.Join(blocks, "")
}

func TestKernelRestartAdoptionWritesNothing(t *testing.T) {
	e := newKenv(t)
	tbl := newTable(t, kopts(e, ipfamily.IPv4))
	declareBasic(t, tbl)
	apply(t, tbl)
	before := e.nft(t, "-a", "list", "ruleset")
	m := startMonitor(t, e)
	_ = m.between(t)

	again := newTable(t, kopts(e, ipfamily.IPv4))
	declareBasic(t, again)
	apply(t, again)
	apply(t, again)
	again.QueueResync()
	apply(t, again)
	assert.Empty(t, m.between(t), "a restarted Table declaring the same state writes nothing")
	assert.Zero(t, again.WorkStats().Transactions)
	assert.Equal(t, before, e.nft(t, "-a", "list", "ruleset"), "handles and all")

	// The monitor does see our writes.
	require.NoError(t, again.SetChains(netfilter.Chain{Name: "svc-a", Rules: []netfilter.Rule{acceptFrom("10.9.0.0/16")}}))
	apply(t, again)
	seen := m.between(t)
	assert.Contains(t, seen, "rule ip np svc-a ip saddr 10.9.0.0/16 accept")
	assert.Contains(t, seen, "delete rule ip np svc-a")
}

func TestKernelExternalChangesRepaired(t *testing.T) {
	e := newKenv(t)
	tbl := newTable(t, kopts(e, ipfamily.IPv4))
	declareBasic(t, tbl)
	apply(t, tbl)
	list := func() string {
		out, _ := e.ns.Exec(context.Background(), "nft", "list", "table", "ip", "np")
		return canonical(string(out))
	}
	want := list()
	fwHandles := regexp.MustCompile(`# handle (\d+)`).FindAllStringSubmatch(e.nft(t, "-a", "list", "chain", "ip", "np", "fw"), -1)
	require.Len(t, fwHandles, 4)
	steps := []struct {
		name string
		do   []string
	}{
		{"a rule", []string{"delete", "rule", "ip", "np", "fw", "handle", fwHandles[2][1]}},
		{"an element", []string{"delete", "element", "ip", "np", "svc", "{", "10.96.0.1", ".", "tcp", ".", "80", "}"}},
		{"an interval element", []string{"delete", "element", "ip", "np", "nets", "{", "192.168.0.0/16", "}"}},
		{"a foreign rule", []string{"add", "rule", "ip", "np", "fw", "drop"}},
		{"a foreign chain", []string{"add", "chain", "ip", "np", "stray"}},
		{"a flushed chain", []string{"flush", "chain", "ip", "np", "svc-a"}},
		{"a base chain", []string{"delete", "chain", "ip", "np", "INPUT"}},
		{"a base chain's policy", []string{"add", "chain", "ip", "np", "INPUT", "{", "policy", "drop", ";", "}"}},
		{"a dormant table", []string{"add", "table", "ip", "np", "{", "flags", "dormant", ";", "}"}},
		{"the whole table", []string{"delete", "table", "ip", "np"}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.name == "a base chain" {
				e.nft(t, "flush", "chain", "ip", "np", "INPUT")
			}
			e.nft(t, s.do...)
			assert.NotEqual(t, want, list())
			tbl.QueueResync()
			apply(t, tbl)
			assert.Equal(t, want, list(), "repaired")
		})
	}
}

// foreignState is what must stay byte for byte: a kube-proxy-like nft
// table, and rules of iptables-nft and iptables-legacy.
func foreignState(t *testing.T, e *kenv) func() string {
	t.Helper()
	kerneltest.RequireCommands(t, "iptables-nft-restore", "iptables-legacy-restore", "iptables-nft-save", "iptables-legacy-save")
	e.nftInput(t, `table ip kube-proxy {
	chain service-dns {
		ip daddr 10.96.0.10 counter accept
	}
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.10 . udp . 53 : goto service-dns }
	}
	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips
	}
	chain filter-forward {
		type filter hook forward priority -110; policy accept;
		ct state new jump services
	}
	chain nat-prerouting {
		type nat hook prerouting priority -100; policy accept;
		jump services
	}
}
table inet np {
	chain c {
		accept comment "np:AAAAAAAAAAAAAAAA"
	}
}
`)
	for _, b := range []iptables.Backend{iptables.BackendNFT, iptables.BackendLegacy} {
		_, err := e.ns.ExecInput(context.Background(), strings.NewReader(`*filter
:KUBE-FORWARD - [0:0]
:npfw - [0:0]
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A FORWARD -s 10.0.0.0/8 -m comment --comment "not np:AAAAAAAAAAAAAAAA" -j ACCEPT
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
COMMIT
`), b.RestoreCommand(ipfamily.IPv4), "--noflush")
		require.NoError(t, err)
	}
	return func() string {
		var b strings.Builder
		b.WriteString(e.nft(t, "list", "table", "ip", "kube-proxy"))
		b.WriteString(e.nft(t, "list", "table", "inet", "np"))
		for _, bk := range []iptables.Backend{iptables.BackendNFT, iptables.BackendLegacy} {
			out, err := e.ns.Exec(context.Background(), bk.SaveCommand(ipfamily.IPv4), "-t", "filter")
			require.NoError(t, err)
			b.WriteString(regexp.MustCompile(`(?m)^#.*\n`).ReplaceAllString(string(out), ""))
		}
		return b.String()
	}
}

func TestKernelForeignTablesAndIPTablesUntouched(t *testing.T) {
	e := newKenv(t)
	state := foreignState(t, e)
	before := state()
	tbl := newTable(t, kopts(e, ipfamily.IPv4))
	declareBasic(t, tbl)
	apply(t, tbl)
	assert.Equal(t, before, state(), "after the first write")
	require.NoError(t, tbl.AddElements("nets", nftables.Elem(nftables.Prefix(pfx("172.16.0.0/12")))))
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "svc-a", Rules: []netfilter.Rule{acceptFrom("10.9.0.0/16")}}))
	apply(t, tbl)
	tbl.QueueResync()
	apply(t, tbl)
	assert.Equal(t, before, state(), "after changes and a resync")
	again := newTable(t, kopts(e, ipfamily.IPv4))
	apply(t, again) // declares nothing: our table goes
	assert.NotContains(t, e.nft(t, "list", "tables"), "table ip np\n")
	assert.Equal(t, before, state(), "after our table went")
}

func TestKernelBackendSwitchLeavesNothing(t *testing.T) {
	e := newKenv(t)
	state := foreignState(t, e)
	before := state()
	ctx := context.Background()
	// An agent ran on iptables, both backends (say, it switched once
	// already), both families.
	for _, b := range []iptables.Backend{iptables.BackendNFT, iptables.BackendLegacy} {
		for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			ipt, err := iptables.New(iptables.Options{Table: "filter", Family: f, Backend: b, ChainPrefix: "np-", Kernel: e.k, PostWriteRecheck: []time.Duration{}})
			require.NoError(t, err)
			require.NoError(t, ipt.SetChains(netfilter.Chain{Name: "np-fw2", Rules: []netfilter.Rule{{Action: netfilter.Accept()}}}))
			require.NoError(t, ipt.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Jump("np-fw2")}}))
			_, err = ipt.Apply(ctx)
			require.NoError(t, err)
		}
	}
	// It switches to nftables.
	require.NoError(t, nfmigrate.RemoveLeftovers(ctx, e.k, nfmigrate.NFTables, nfmigrate.Owned{ChainPrefix: "np-", NFTablesTables: []string{"np"}}))
	for _, b := range []iptables.Backend{iptables.BackendNFT, iptables.BackendLegacy} {
		for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			out, err := e.ns.Exec(ctx, b.SaveCommand(f))
			require.NoError(t, err)
			assert.NotContains(t, string(out), "np-fw2", "%s %v", b, f)
			assert.NotRegexp(t, `--comment "?np:[A-Za-z0-9_-]{16}"? -j`, string(out), "%s %v", b, f)
		}
	}
	assert.Equal(t, before, state(), "foreign iptables rules and chains stay")
	tbl := newTable(t, kopts(e, ipfamily.IPv4))
	declareBasic(t, tbl)
	apply(t, tbl)
	// And back to iptables.
	require.NoError(t, nfmigrate.RemoveLeftovers(ctx, e.k, nfmigrate.IPTablesNFT, nfmigrate.Owned{ChainPrefix: "np-", NFTablesTables: []string{"np"}}),
		"the IPv6 table that is not there is no error")
	assert.NotContains(t, e.nft(t, "list", "tables"), "table ip np\n")
	assert.Equal(t, before, state())
}

// failingKernel fails the next n transactions (before they are sent).
type failingKernel struct {
	kernel.NFTables
	fail *int
}

func (f failingKernel) OpenNFTablesSocket() (kernel.NFTablesSocket, error) {
	s, err := f.NFTables.OpenNFTablesSocket()
	return failingSocket{s, f.fail}, err
}

type failingSocket struct {
	kernel.NFTablesSocket
	fail *int
}

func (s failingSocket) Send(b []byte) error {
	if *s.fail > 0 && len(b) > 5 && b[4] == 0x10 && b[5] == 0 { // a batch
		*s.fail--
		return syscall.EIO
	}
	return s.NFTablesSocket.Send(b)
}

func TestKernelRebuildAfterRepeatedFailures(t *testing.T) {
	e := newKenv(t)
	fail := 0
	o := kopts(e, ipfamily.IPv4)
	o.Kernel = failingKernel{e.k, &fail}
	tbl := newTable(t, o)
	declareBasic(t, tbl)
	apply(t, tbl)
	e.nft(t, "add", "chain", "ip", "np", "stray")
	require.NoError(t, tbl.AddElements("svc", svcElem("10.96.0.9", 9, "svc-a")))
	fail = nftables.DefaultRebuildAfter
	for range nftables.DefaultRebuildAfter {
		_, err := tbl.Apply(context.Background())
		require.ErrorIs(t, err, nftables.ErrWrite, "%v", err)
	}
	m := startMonitor(t, e)
	_ = m.between(t)
	apply(t, tbl)
	seen := m.between(t)
	assert.Equal(t, 1, tbl.WorkStats().Rebuilds)
	// One transaction: the table is deleted and everything added after.
	assert.Equal(t, 1, strings.Count(seen, "# new generation"), seen)
	del, add := strings.Index(seen, "delete table ip np"), strings.Index(seen, "add table ip np")
	assert.True(t, del >= 0 && add > del, seen)
	assert.Less(t, strings.Index(seen, "add table ip np"), strings.Index(seen, "add chain ip np INPUT"), seen)
	assert.NotContains(t, e.nft(t, "list", "table", "ip", "np"), "stray")
	assert.Contains(t, e.nft(t, "list", "table", "ip", "np"), "10.96.0.9 . tcp . 9 : goto svc-a")
}

func TestKernelRefusedObjectsAreIsolated(t *testing.T) {
	e := newKenv(t)
	tbl := newTable(t, kopts(e, ipfamily.IPv4))
	// The kernel refuses an address type looked up on the input interface
	// in a chain reached from OUTPUT (it can only tell once the chain is
	// reached), and an element overlapping another in a set of
	// concatenated ranges.
	require.NoError(t, tbl.SetSets(nftables.Set{Name: "ranges", Key: []nftables.KeyType{nftables.TypeAddr, nftables.TypePort}, Interval: true,
		Elements: []nftables.Element{
			nftables.Elem(nftables.Prefix(pfx("10.0.0.0/8")), nftables.PortRange(netfilter.Ports(80, 90))),
			nftables.Elem(nftables.Prefix(pfx("10.1.0.0/16")), nftables.PortRange(netfilter.Ports(85, 95))),
			nftables.Elem(nftables.Prefix(pfx("192.168.0.0/16")), nftables.Port(443)),
		}}))
	require.NoError(t, tbl.SetChains(
		netfilter.Chain{Name: "by-iface", Rules: []netfilter.Rule{{Matches: []netfilter.Match{
			netfilter.MatchAddrType{Types: netfilter.AddrTypeLocal, Dir: netfilter.Dst, LimitIfaceIn: true}}, Action: netfilter.Accept()}}},
		netfilter.Chain{Name: "fine", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8"),
			{Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP), netfilter.IPSet("ranges", netfilter.Src, netfilter.Dst)}, Action: netfilter.Accept()}}},
	))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookOutput, []netfilter.Rule{jump("fine"), jump("by-iface")}))
	res, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, dataplane.ErrPartial, "%v", err)
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	var names []string
	for _, o := range pe.Objects() {
		names = append(names, string(o.Kind)+" "+o.Name)
	}
	t.Log(err)
	assert.Positive(t, res.RetryAfter)
	assert.Contains(t, names, "element ranges 10.1.0.0/16 . 85-95")
	assert.Contains(t, names, "chain by-iface")
	out := e.nft(t, "list", "table", "ip", "np")
	assert.Contains(t, out, "ip saddr 10.0.0.0/8 accept", "the other chains are written")
	assert.Contains(t, out, "192.168.0.0/16 . 443")
	assert.Contains(t, out, "10.0.0.0/8 . 80-90")
	assert.NotContains(t, out, "fib daddr . iif type local")
	assert.Contains(t, out, "chain by-iface {\n\t}", "created empty, so the jump to it stays valid")
	assert.True(t, errors.Is(err, nftables.ErrRefused))
}

func TestKernelElementsInSeveralTransactions(t *testing.T) {
	e := newKenv(t)
	o := kopts(e, ipfamily.IPv4)
	o.ElementsPerTransaction = 1000
	tbl := newTable(t, o)
	s := nftables.Set{Name: "many", Key: []nftables.KeyType{nftables.TypeAddr}}
	for i := range 5500 {
		s.Elements = append(s.Elements, nftables.Elem(nftables.Addr(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}))))
	}
	require.NoError(t, tbl.SetSets(s))
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "c", ForceProgramming: true, Rules: []netfilter.Rule{{Matches: []netfilter.Match{netfilter.SourceIPSet("many")}, Action: netfilter.Accept()}}}))
	apply(t, tbl)
	assert.Equal(t, 6, tbl.WorkStats().Transactions, "the chains, set, rule and 1000 elements, then 1000 per transaction")
	again := newTable(t, o)
	require.NoError(t, again.SetSets(s))
	require.NoError(t, again.SetChains(netfilter.Chain{Name: "c", ForceProgramming: true, Rules: []netfilter.Rule{{Matches: []netfilter.Match{netfilter.SourceIPSet("many")}, Action: netfilter.Accept()}}}))
	apply(t, again)
	assert.Zero(t, again.WorkStats().Transactions, "all there")
	assert.Equal(t, 5500, again.WorkStats().Elements)
}

// TestKernelOverlappingRangesRefusedAlike: which element of an overlapping
// pair of concatenated ranges the kernel refuses depends on the order they
// are written in (it checks the later one's first and last keys against
// the earlier); the Table writes them in the order of their keys, so that
// it is the same element in every set, however the set's maps order them:
// the one starting inside the other, and the one the other contains.
func TestKernelOverlappingRangesRefusedAlike(t *testing.T) {
	e := newKenv(t)
	tbl := newTable(t, kopts(e, ipfamily.IPv4))
	const sets = 16 // each holding its elements in an order of its own
	var decl []nftables.Set
	var refused []string
	type elem struct {
		e    nftables.Element
		text string
	}
	var kept []elem
	for i := range sets {
		el := func(p string, lo, hi uint16) elem {
			r, text := nftables.PortRange(netfilter.Ports(lo, hi)), fmt.Sprintf("%s . %d-%d", p, lo, hi)
			if lo == hi {
				r, text = nftables.Port(lo), fmt.Sprintf("%s . %d", p, lo)
			}
			return elem{nftables.Elem(nftables.Prefix(pfx(p)), r), text}
		}
		first := el(fmt.Sprintf("10.%d.0.0/16", i), 80, 90)
		startsInside := el(fmt.Sprintf("10.%d.1.0/24", i), 85, 95)
		outer := el(fmt.Sprintf("172.16.%d.0/24", i), 1000, 2000)
		inside := el(fmt.Sprintf("172.16.%d.128/25", i), 1500, 1500)
		s := nftables.Set{Name: fmt.Sprintf("r%d", i), Key: []nftables.KeyType{nftables.TypeAddr, nftables.TypePort}, Interval: true}
		all := []elem{startsInside, inside, first, outer}
		if i%2 == 1 {
			slices.Reverse(all)
		}
		for _, x := range all {
			s.Elements = append(s.Elements, x.e)
		}
		decl = append(decl, s)
		refused = append(refused, "element "+s.Name+" "+startsInside.text, "element "+s.Name+" "+inside.text)
		kept = append(kept, first, outer)
	}
	require.NoError(t, tbl.SetSets(decl...))
	_, err := tbl.Apply(context.Background())
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe, "%v", err)
	var names []string
	for _, o := range pe.Objects() {
		assert.ErrorIs(t, o, nftables.ErrRefused)
		names = append(names, string(o.Kind)+" "+o.Name)
	}
	assert.ElementsMatch(t, refused, names)
	out := strings.Join(strings.Fields(e.nft(t, "list", "table", "ip", "np")), " ")
	for _, x := range kept {
		assert.Contains(t, out, x.text)
	}
}

// A Table named after another program's table (kube-proxy's here) writes
// nothing to it: Plan and Apply fail with ErrForeignTable and every table
// stays as it was; iptables-nft's names are refused outright, by New and
// by RemoveTable. A table of that name that holds no rule (nothing to
// lose) is taken over, as a table of ours with empty chains is.
func TestKernelForeignTableOfTheSameName(t *testing.T) {
	e := newKenv(t)
	state := foreignState(t, e)
	before := state()
	o := kopts(e, ipfamily.IPv4)
	o.Name = "kube-proxy"
	tbl := newTable(t, o)
	declareBasic(t, tbl)
	_, err := tbl.Plan(context.Background())
	require.ErrorIs(t, err, nftables.ErrForeignTable)
	_, err = tbl.Apply(context.Background())
	require.ErrorIs(t, err, nftables.ErrForeignTable)
	require.ErrorIs(t, err, nftables.ErrRead)
	assert.ErrorContains(t, err, "choose another Options.Name")
	assert.Equal(t, before, state(), "kube-proxy's table and the others are untouched")

	for _, name := range nftables.IPTablesNFTTables {
		o.Name = name
		_, err := nftables.New(o)
		require.ErrorIs(t, err, nftables.ErrInvalidOptions, name)
		require.ErrorIs(t, nftables.RemoveTable(context.Background(), e.k, ipfamily.IPv4, name), nftables.ErrInvalidOptions, name)
	}
	assert.Equal(t, before, state())

	e.nftInput(t, "table ip empty {\n\tchain c {\n\t}\n}\n")
	o.Name = "empty"
	tbl = newTable(t, o)
	declareBasic(t, tbl)
	apply(t, tbl)
	assert.NotContains(t, e.nft(t, "list", "table", "ip", "empty"), "chain c ", "the rule-less table was taken over")
}

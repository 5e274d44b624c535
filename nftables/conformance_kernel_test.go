//go:build linux

package nftables_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	nf "github.com/nodeplane/nodeplane/netfilter"
	. "github.com/nodeplane/nodeplane/nftables"
)

// TestConformance runs the driver conformance suite on a fake namespace.
func TestConformance(t *testing.T) { drivertest.Run(t, drivertest.Fake, confSubject) }

// TestKernelConformance runs the driver conformance suite in fresh network
// namespaces of the running kernel.
func TestKernelConformance(t *testing.T) { drivertest.Run(t, drivertest.Kernel, confSubject) }

// The suite hands a driver a kernel.Kernel (a drivertest.Recorder in front
// of the namespace) and counts and fails the writes that go through it. A
// Table writes through a netfilter socket of its own instead, so the
// adapter below gives it one to the same namespace (the namespace itself,
// or the nftablesfake.Namespace of a kernelfake one) and mirrors
// every transaction as a write through the Recorder: the run of
// `nft -f /dev/null`, which writes nothing, which the Recorder counts, and
// which it fails when told to, and then the transaction is not sent. So
// "writes nothing" means "sends no transaction", and failures mid-apply are
// transactions that fail as a whole.

// confNS finds the namespace behind a kernel.Kernel: Setup writes a marker
// sysctl (net.core.somaxconn) in every namespace the suite opens, and
// registers the namespace's nf_tables under it.
var confNS = struct {
	sync.Mutex
	next int
	by   map[int]kernel.NFTables
}{by: map[int]kernel.NFTables{}}

const confMarker = "net.core.somaxconn"

func confRegister(t testing.TB, k kernel.Kernel) {
	confNS.Lock()
	confNS.next++
	id := confNS.next
	var nk kernel.NFTables
	switch k := k.(type) {
	case *kernelfake.Namespace:
		nk = k.NFTables() // the fake's nf_tables, which the suite inspects
	case kernel.NFTables:
		nk = k // a *kernel.Namespace
	default:
		t.Fatalf("the suite's namespace %T has no nf_tables", k)
	}
	confNS.by[id] = nk
	confNS.Unlock()
	if err := k.SetSysctl(context.Background(), confMarker, strconv.Itoa(100000+id)); err != nil {
		t.Fatalf("marking the namespace: %v", err)
	}
}

func confLookup(k kernel.Kernel) (kernel.NFTables, error) {
	v, err := k.Sysctl(context.Background(), confMarker)
	if err != nil {
		return nil, err
	}
	id, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return nil, err
	}
	confNS.Lock()
	defer confNS.Unlock()
	nk := confNS.by[id-100000]
	if nk == nil {
		return nil, fmt.Errorf("namespace %d not registered", id)
	}
	return nk, nil
}

// mirrored is the Kernel a Table gets in the suite: the namespace's
// nf_tables, its transactions mirrored through the Recorder.
type mirrored struct {
	k   kernel.NFTables
	rec kernel.Commands
}

func (m *mirrored) OpenNFTablesSocket() (kernel.NFTablesSocket, error) {
	s, err := OpenSocket(m.k)
	if err != nil {
		return nil, err
	}
	return &mirrorSocket{NFTablesSocket: s, rec: m.rec}, nil
}

type mirrorSocket struct {
	kernel.NFTablesSocket
	rec kernel.Commands
}

func (s *mirrorSocket) Send(b []byte) error {
	if len(b) >= nfnl.HdrLen && nfnl.IsBatch(b) {
		_, err := s.rec.Runner().Run(context.Background(), nil, "nft", "-f", "/dev/null")
		if errors.Is(err, drivertest.ErrInjected) {
			return fmt.Errorf("transaction not sent: %w", err)
		}
	}
	return s.NFTablesSocket.Send(b)
}

// confVariant is one Table identity: a family and a role.
type confVariant struct {
	f    ipfamily.Family
	role Role
}

func (c confVariant) String() string { return fmt.Sprintf("%s-%v", c.role, c.f) }

// net returns 10.<a>.<b>.0/24 or 2001:db8:<a>:<b>::/64.
func (c confVariant) net(a, b int) netip.Prefix {
	if c.f == ipfamily.IPv6 {
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(a), 0, byte(b)}), 64)
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(a), byte(b), 0}), 24)
}

func (c confVariant) addr(a, b, h int) netip.Addr {
	p := c.net(a, b).Addr().As16()
	if c.f == ipfamily.IPv6 {
		p[15] = byte(h)
		return netip.AddrFrom16(p)
	}
	return netip.AddrFrom4([4]byte{10, byte(a), byte(b), byte(h)})
}

func (c confVariant) sets() []Set {
	svc := Set{Name: "np-svc", Key: []KeyType{TypeAddr, TypeProto, TypePort}, Verdict: true}
	for i := range 12 {
		svc.Elements = append(svc.Elements, Element{Key: []Value{Addr(c.addr(96, 0, i+1)), Proto(nf.ProtoTCP), Port(80)},
			Verdict: nf.Goto(fmt.Sprintf("np-svc-%d", i%3))})
	}
	nets := Set{Name: "np-nets", Key: []KeyType{TypeAddr}, Interval: true}
	for i := range 6 {
		nets.Elements = append(nets.Elements, Elem(Prefix(c.net(20, i))))
	}
	return []Set{svc, nets, {Name: "np-ports", Key: []KeyType{TypePort}, Elements: []Element{Elem(Port(22)), Elem(Port(443))}}}
}

func (c confVariant) chains() []nf.Chain {
	rule := func(a nf.Action, ms ...nf.Match) nf.Rule { return nf.Rule{Matches: ms, Action: a} }
	tcp := nf.Protocol(nf.ProtoTCP)
	var pods []nf.Rule
	for i := range 8 {
		pods = append(pods, rule(nf.Accept(), nf.SourceNet(c.net(30, i))), rule(nf.Accept(), nf.DestNet(c.net(30, i)), tcp, nf.DestPorts(nf.Port(uint16(8000+i)))))
	}
	chains := []nf.Chain{
		{Name: "np-fw", Rules: []nf.Rule{
			rule(nf.Accept(), nf.ConntrackState(nf.CTStateEstablished, nf.CTStateRelated)),
			rule(nf.Return(), nf.SourceIPSet("np-nets")),
			rule(nf.Jump("np-pods"), nf.InInterface("veth+")),
			rule(nf.VerdictMap("np-svc", nf.Dst, nf.Dst)),
			{Matches: []nf.Match{tcp, nf.DestIPSet("np-ports")}, Action: nf.Accept(), Comments: []string{"ssh and https"}},
			rule(nf.Log("np drop: ")),
		}},
		{Name: "np-pods", Rules: pods},
	}
	for i := range 3 {
		chains = append(chains, nf.Chain{Name: fmt.Sprintf("np-svc-%d", i), Rules: []nf.Rule{rule(nf.Accept(), nf.SourceNet(c.net(40, i)))}})
	}
	return chains
}

func (c confVariant) hooks() (insert, appendRules map[nf.Hook][]nf.Rule) {
	return map[nf.Hook][]nf.Rule{
			nf.HookForward: {{Action: nf.Jump("np-fw")}},
			nf.HookInput:   {{Matches: []nf.Match{nf.InInterface("eth0")}, Action: nf.Jump("np-fw")}},
		}, map[nf.Hook][]nf.Rule{
			nf.HookForward: {{Matches: []nf.Match{nf.OutInterface("eth9")}, Action: nf.Drop()}},
			nf.HookOutput:  {{Matches: []nf.Match{nf.DestNet(c.net(50, 0))}, Action: nf.Reject(nf.RejectAdminProhibited)}},
		}
}

// confDeclare declares the representative state on tbl.
func confDeclare(tbl *Table, c confVariant) error {
	if err := tbl.SetSets(c.sets()...); err != nil {
		return err
	}
	if err := tbl.SetChains(c.chains()...); err != nil {
		return err
	}
	insert, appendRules := c.hooks()
	for _, h := range c.role.Hooks() {
		if err := tbl.InsertRules("test", h, insert[h]); err != nil {
			return err
		}
		if err := tbl.AppendRules("test", h, appendRules[h]); err != nil {
			return err
		}
	}
	return nil
}

// confDump renders the namespace's nftables ruleset one line per object,
// each line prefixed with the objects it is in ("table ip x | chain y |
// rule"): `nft list ruleset` on the kernel, the fake's Dump on the fake.
func confDump(t testing.TB, k kernel.Kernel) []string {
	nk, err := confLookup(k)
	if err != nil {
		t.Fatalf("%v", err)
	}
	var text string
	if fake, ok := nk.(*nftablesfake.Namespace); ok {
		text = fake.Dump()
	} else {
		text = drivertest.Exec(t, k, "nft", "list", "ruleset")
	}
	var out, path []string
	for _, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		if trimmed == "" || trimmed == "}" {
			continue
		}
		depth := (len(l) - len(strings.TrimLeft(l, " \t"))) / 1
		if strings.HasPrefix(l, "\t") {
			depth = len(l) - len(strings.TrimLeft(l, "\t"))
		} else {
			depth /= 2
		}
		if depth > len(path) {
			depth = len(path)
		}
		path = append(path[:depth], strings.TrimSuffix(trimmed, " {"))
		out = append(out, strings.Join(path, " | "))
	}
	return out
}

var confSubject = drivertest.Subject[*Table, confVariant]{
	Variants: []confVariant{{ipfamily.IPv4, Filter}, {ipfamily.IPv6, Filter}},
	Binaries: []string{"nft"},
	Setup:    func(t testing.TB, k kernel.Kernel, _ confVariant) { confRegister(t, k) },
	New: func(k kernel.Kernel, clk clock.Clock, c confVariant) (*Table, error) {
		nk, err := confLookup(k)
		if err != nil {
			return nil, err
		}
		return New(Options{Name: "np", Family: c.f, Role: c.role, ChainPrefix: "np-", Kernel: &mirrored{k: nk, rec: k}, Clock: clk})
	},
	Declare: confDeclare,
	Withdraw: func(tbl *Table, c confVariant) error {
		for _, h := range c.role.Hooks() {
			if err := tbl.InsertRules("test", h, nil); err != nil {
				return err
			}
			if err := tbl.AppendRules("test", h, nil); err != nil {
				return err
			}
		}
		var names []string
		for _, ch := range c.chains() {
			names = append(names, ch.Name)
		}
		if err := tbl.RemoveChains(names...); err != nil {
			return err
		}
		return tbl.RemoveSets("np-svc", "np-nets", "np-ports")
	},
	Check: func(t testing.TB, k kernel.Kernel, c confVariant) {
		// A new Table declaring the state reads the kernel and finds
		// nothing to write: the kernel holds its chains, rules (by hash),
		// sets and elements, and nothing else in the table.
		nk, err := confLookup(k)
		if err != nil {
			t.Fatalf("%v", err)
		}
		tbl, err := New(Options{Name: "np", Family: c.f, Role: c.role, ChainPrefix: "np-", Kernel: nk, PostWriteRecheck: []time.Duration{}})
		if err != nil {
			t.Fatalf("%v", err)
		}
		defer tbl.Close()
		if err := confDeclare(tbl, c); err != nil {
			t.Fatalf("%v", err)
		}
		if n, err := PendingAfterRead(tbl); err != nil || n != 0 {
			t.Errorf("the kernel differs from the declared state: %d requests to write (%v)\n%s", n, err, strings.Join(confDump(t, k), "\n"))
		}
	},
	Dump: func(t testing.TB, k kernel.Kernel, _ confVariant) []string { return confDump(t, k) },
	Foreign: func(t testing.TB, k kernel.Kernel, c confVariant, at drivertest.Stage) {
		fam, ff := "ip", nftablesfake.IPv4
		other, of := "ip6", nftablesfake.IPv6
		if c.f == ipfamily.IPv6 {
			fam, ff, other, of = "ip6", nftablesfake.IPv6, "ip", nftablesfake.IPv4
		}
		nk, err := confLookup(k)
		if err != nil {
			t.Fatalf("%v", err)
		}
		fake, isFake := nk.(*nftablesfake.Namespace)
		run := func(args ...string) { drivertest.Exec(t, k, "nft", args...) }
		switch at {
		case drivertest.BeforeApply:
			// Our table's name in the other family, and a table of the same
			// family with our chain names and a comment holding our hash.
			if isFake {
				a := fake.Admin()
				must(t, a.AddTable(of, "np"))
				must(t, a.AddChain(of, "np", "np-fw"))
				must(t, a.AddTable(ff, "np-other"))
				must(t, a.AddChain(ff, "np-other", "INPUT-insert"))
				must(t, a.AddRule(ff, "np-other", "INPUT-insert", "np:AAAAAAAAAAAAAAAA"))
				return
			}
			run("add", "table", other, "np")
			run("add", "chain", other, "np", "np-fw")
			run("add", "table", fam, "np-other")
			run("add", "chain", fam, "np-other", "INPUT-insert", "{", "type", "filter", "hook", "input", "priority", "-10", ";", "}")
			run("add", "rule", fam, "np-other", "INPUT-insert", "accept", "comment", `"np:AAAAAAAAAAAAAAAA"`)
		case drivertest.AfterApply:
			if isFake {
				must(t, fake.Admin().AddTable(ff, "kube-proxy"))
				must(t, fake.Admin().AddChain(ff, "kube-proxy", "services"))
				must(t, fake.Admin().AddRule(ff, "kube-proxy", "services", "theirs"))
				return
			}
			run("add", "table", fam, "kube-proxy")
			run("add", "chain", fam, "kube-proxy", "services")
			run("add", "rule", fam, "kube-proxy", "services", "accept", "comment", `"theirs"`)
		case drivertest.InPlace:
			// Beside the table that was just repaired: nothing in it can be
			// foreign.
			if isFake {
				must(t, fake.Admin().AddTable(ff, "np-beside"))
				if len(fake.Chains(ff, "np-beside")) == 0 {
					must(t, fake.Admin().AddChain(ff, "np-beside", "np-fw"))
				}
				must(t, fake.Admin().AddRule(ff, "np-beside", "np-fw", "added beside"))
				return
			}
			run("add", "table", fam, "np-beside")
			run("add", "chain", fam, "np-beside", "np-fw")
			run("add", "rule", fam, "np-beside", "np-fw", "accept", "comment", `"added beside"`)
		}
	},
	Delete: func(t testing.TB, k kernel.Kernel, c confVariant) {
		fam, ff := "ip", nftablesfake.IPv4
		if c.f == ipfamily.IPv6 {
			fam, ff = "ip6", nftablesfake.IPv6
		}
		nk, err := confLookup(k)
		if err != nil {
			t.Fatalf("%v", err)
		}
		if fake, ok := nk.(*nftablesfake.Namespace); ok {
			a := fake.Admin()
			must(t, a.DeleteRule(ff, "np", "np-pods", 3))
			must(t, a.DeleteElement(ff, "np", "np-svc", 0))
			return
		}
		out := drivertest.Exec(t, k, "nft", "-a", "list", "chain", fam, "np", "np-pods")
		var handles []string
		for _, l := range strings.Split(out, "\n") {
			if _, h, ok := strings.Cut(l, "# handle "); ok && !strings.Contains(l, "chain ") {
				handles = append(handles, strings.TrimSpace(h))
			}
		}
		if len(handles) < 4 {
			t.Fatalf("np-pods holds %d rules:\n%s", len(handles), out)
		}
		drivertest.Exec(t, k, "nft", "delete", "rule", fam, "np", "np-pods", "handle", handles[3])
		drivertest.Exec(t, k, "nft", "delete", "element", fam, "np", "np-svc", "{", c.addr(96, 0, 1).String(), ".", "tcp", ".", "80", "}")
	},
	BadInputs: []drivertest.BadInput[*Table, confVariant]{
		{Name: "chain without the prefix", Declare: func(tbl *Table, _ confVariant) error { return tbl.SetChains(nf.Chain{Name: "fw"}) }},
		{Name: "base chain name", Declare: func(tbl *Table, _ confVariant) error { return tbl.SetChains(nf.Chain{Name: "INPUT"}) }},
		{Name: "rule of the other family", Declare: func(tbl *Table, c confVariant) error {
			o := confVariant{f: ipfamily.IPv6, role: c.role}
			if c.f == ipfamily.IPv6 {
				o.f = ipfamily.IPv4
			}
			return tbl.SetChains(nf.Chain{Name: "np-x", Rules: []nf.Rule{{Matches: []nf.Match{nf.SourceNet(o.net(1, 1))}, Action: nf.Accept()}}})
		}},
		{Name: "unknown set", Declare: func(tbl *Table, _ confVariant) error {
			return tbl.SetChains(nf.Chain{Name: "np-x", Rules: []nf.Rule{{Matches: []nf.Match{nf.SourceIPSet("np-none")}, Action: nf.Accept()}}})
		}},
		{Name: "masquerade in filter", Declare: func(tbl *Table, _ confVariant) error {
			return tbl.InsertRules("test", nf.HookForward, []nf.Rule{{Action: nf.Masquerade()}})
		}},
		{Name: "hook of another role", Declare: func(tbl *Table, _ confVariant) error {
			return tbl.InsertRules("test", nf.HookPrerouting, []nf.Rule{{Action: nf.Accept()}})
		}},
		{Name: "set name too long", Declare: func(tbl *Table, _ confVariant) error {
			return tbl.SetSets(Set{Name: strings.Repeat("s", 40), Key: []KeyType{TypeAddr}})
		}},
		{Name: "element of the other family", Declare: func(tbl *Table, c confVariant) error {
			a := netip.MustParseAddr("fd00::1")
			if c.f == ipfamily.IPv6 {
				a = netip.MustParseAddr("10.0.0.1")
			}
			return tbl.AddElements("np-ports", Elem(Addr(a)))
		}},
	},
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%v", err)
	}
}

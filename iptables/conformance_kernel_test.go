package iptables_test

import (
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	nf "github.com/nodeplane/nodeplane/netfilter"
)

// TestConformance runs the driver conformance suite on a fake namespace.
func TestConformance(t *testing.T) { drivertest.Run(t, drivertest.Fake, confSubject) }

// TestKernelConformance runs the driver conformance suite in fresh network
// namespaces of the running kernel.
func TestKernelConformance(t *testing.T) { drivertest.Run(t, drivertest.Kernel, confSubject) }

// confVariant is one Table identity: a backend and a family, in the filter
// table, with the prefix "np-".
type confVariant struct {
	b iptables.Backend
	v ipfamily.Family
}

func (c confVariant) String() string { return fmt.Sprintf("%s-%v", c.b, c.v) }

// net returns 10.<a>.<b>.0/24 or 2001:db8:<a>:<b>::/64.
func (c confVariant) net(a, b int) netip.Prefix {
	if c.v == ipfamily.IPv6 {
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(a), 0, byte(b)}), 64)
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(a), byte(b), 0}), 24)
}

// confChains and confHooks are the representative state.
func (c confVariant) chains() []nf.Chain {
	src, dst := nf.SourceNet, nf.DestNet
	tcp, udp := nf.Protocol(nf.ProtoTCP), nf.Protocol(nf.ProtoUDP)
	rule := func(a nf.Action, ms ...nf.Match) nf.Rule { return nf.Rule{Matches: ms, Action: a} }
	var pods, svc []nf.Rule
	pods = append(pods, rule(nf.Return(), nf.InInterface("veth+")))
	for i := range 8 {
		pods = append(pods, rule(nf.Accept(), src(c.net(20, i))), rule(nf.Accept(), dst(c.net(20, i))))
	}
	for i := range 10 {
		svc = append(svc, rule(nf.Accept(), dst(c.net(30, i)), tcp, nf.DestPorts(nf.Port(uint16(8000+i)))))
	}
	svc = append(svc, rule(nf.Accept(), udp, nf.DestPorts(nf.Port(53), nf.Ports(5000, 5010))))
	return []nf.Chain{
		{Name: "np-fw", Rules: []nf.Rule{
			rule(nf.Accept(), nf.ConntrackState(nf.CTStateEstablished, nf.CTStateRelated)),
			rule(nf.Jump("np-pods"), src(c.net(20, 0))),
			rule(nf.Jump("np-svc")),
			rule(nf.Accept(), nf.Mark(0x10, 0x10)),
			{Matches: []nf.Match{nf.Not(src(c.net(1, 0)))}, Action: nf.Jump("np-log"), Comments: []string{"np: not ours, just a comment"}},
		}},
		{Name: "np-pods", Rules: pods},
		{Name: "np-svc", Rules: svc},
		{Name: "np-log", Rules: []nf.Rule{rule(nf.Log("np drop: ")), rule(nf.Drop())}},
	}
}

// hooks are our rules in built-in chains: inserted at the top, appended
// at the bottom.
func (c confVariant) hooks() (insert, appendRules map[nf.Hook][]nf.Rule) {
	return map[nf.Hook][]nf.Rule{
			nf.HookForward: {{Action: nf.Jump("np-fw")}},
			nf.HookInput:   {{Matches: []nf.Match{nf.InInterface("eth0")}, Action: nf.Jump("np-svc")}},
		}, map[nf.Hook][]nf.Rule{
			nf.HookForward: {{Matches: []nf.Match{nf.OutInterface("eth9")}, Action: nf.Drop()}},
			nf.HookOutput:  {{Matches: []nf.Match{nf.DestNet(c.net(40, 0))}, Action: nf.Reject(nf.RejectAdminProhibited)}},
		}
}

var confBuiltins = []nf.Hook{nf.HookInput, nf.HookForward, nf.HookOutput}

var confSubject = drivertest.Subject[*iptables.Table, confVariant]{
	Variants: []confVariant{
		{iptables.BackendNFT, ipfamily.IPv4}, {iptables.BackendNFT, ipfamily.IPv6},
		{iptables.BackendLegacy, ipfamily.IPv4}, {iptables.BackendLegacy, ipfamily.IPv6},
	},
	Binaries: []string{"iptables-nft-restore", "iptables-nft-save", "iptables-nft", "ip6tables-nft-restore", "ip6tables-nft-save", "ip6tables-nft",
		"iptables-legacy-restore", "iptables-legacy-save", "iptables-legacy", "ip6tables-legacy-restore", "ip6tables-legacy-save", "ip6tables-legacy"},
	New: func(k kernel.Kernel, clk clock.Clock, c confVariant) (*iptables.Table, error) {
		return iptables.New(iptables.Options{Table: "filter", Family: c.v, Backend: c.b, ChainPrefix: "np-", Kernel: k, Clock: clk})
	},
	Declare: func(tbl *iptables.Table, c confVariant) error {
		if err := tbl.SetChains(c.chains()...); err != nil {
			return err
		}
		insert, appendRules := c.hooks()
		for _, h := range confBuiltins {
			if err := tbl.InsertRules("test", h, insert[h]); err != nil {
				return err
			}
			if err := tbl.AppendRules("test", h, appendRules[h]); err != nil {
				return err
			}
		}
		return nil
	},
	Withdraw: func(tbl *iptables.Table, c confVariant) error {
		for _, h := range confBuiltins {
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
		return tbl.RemoveChains(names...)
	},
	Check: func(t testing.TB, k kernel.Kernel, c confVariant) {
		saved := confSave(t, k, c)
		want := map[string][]string{}
		for _, ch := range c.chains() {
			want[ch.Name] = confArgs(t, c, ch.Rules)
		}
		var owned []string
		for name := range saved {
			if strings.HasPrefix(name, "np-") {
				owned = append(owned, name)
			}
		}
		slices.Sort(owned)
		if wantNames := slices.Sorted(maps.Keys(want)); !slices.Equal(owned, wantNames) {
			t.Errorf("owned chains %v, want %v", owned, wantNames)
		}
		for name, rules := range want {
			got, hashed := confStrip(saved[name])
			if !slices.Equal(got, rules) || hashed != len(got) {
				t.Errorf("chain %s holds (%d with our hash):\n\t%s\nwant:\n\t%s", name, hashed, strings.Join(got, "\n\t"), strings.Join(rules, "\n\t"))
			}
		}
		insert, appendRules := c.hooks()
		for _, h := range confBuiltins {
			lines := saved[string(h)]
			top, bottom := confArgs(t, c, insert[h]), confArgs(t, c, appendRules[h])
			var ours []string
			for i, l := range lines {
				if s, n := confStrip([]string{l}); n == 1 {
					ours = append(ours, s[0])
					if i >= len(top) && i < len(lines)-len(bottom) {
						t.Errorf("%s: our rule %q is in the middle, among foreign rules", h, s[0])
					}
				}
			}
			if want := slices.Concat(top, bottom); !slices.Equal(ours, want) {
				t.Errorf("%s: our rules\n\t%s\nwant\n\t%s", h, strings.Join(ours, "\n\t"), strings.Join(want, "\n\t"))
			}
		}
	},
	Dump: func(t testing.TB, k kernel.Kernel, c confVariant) []string {
		var lines []string
		for _, l := range strings.Split(drivertest.Exec(t, k, c.b.SaveCommand(c.v), "-t", "filter"), "\n") {
			switch {
			case strings.HasPrefix(l, "-A "):
				lines = append(lines, l)
			case strings.HasPrefix(l, ":"):
				// Packet counters change with traffic on lo.
				lines = append(lines, confCounters.ReplaceAllString(l, "[counters]"))
			}
		}
		return lines
	},
	Foreign: func(t testing.TB, k kernel.Kernel, c confVariant, at drivertest.Stage) {
		var cmds [][]string
		switch at {
		case drivertest.BeforeApply:
			cmds = [][]string{
				{"-N", "NP-fw"}, {"-A", "NP-fw", "-s", c.net(1, 1).String(), "-j", "RETURN"},
				{"-N", "npfw"},
				{"-A", "FORWARD", "-s", c.net(2, 0).String(), "-m", "comment", "--comment", "a copy of np:AAAAAAAAAAAAAAAA", "-j", "DROP"},
				{"-A", "FORWARD", "-m", "comment", "--comment", "np:AAAAAAAAAAAAAAAA -j np-fw", "-j", "ACCEPT"},
				{"-A", "FORWARD", "-j", "NP-fw"},
				{"-A", "INPUT", "-i", "lo", "-j", "ACCEPT"},
			}
		case drivertest.AfterApply:
			cmds = [][]string{
				{"-I", "FORWARD", "1", "-s", c.net(3, 0).String(), "-j", "ACCEPT"},
				{"-A", "FORWARD", "-o", "eth5", "-j", "DROP"},
				{"-A", "OUTPUT", "-j", "NP-fw"},
				{"-N", "NP-extra"},
			}
		case drivertest.InPlace:
			cmds = [][]string{{"-I", "FORWARD", "1", "-s", c.net(4, 0).String(), "-j", "DROP"}}
		}
		confRun(t, k, c, cmds...)
	},
	Delete: func(t testing.TB, k kernel.Kernel, c confVariant) {
		// Our rule at the top of FORWARD, and the content of a chain.
		confRun(t, k, c, []string{"-D", "FORWARD", "1"}, []string{"-F", "np-pods"})
	},
	BadInputs: []drivertest.BadInput[*iptables.Table, confVariant]{
		{Name: "chain without the prefix", Declare: func(tbl *iptables.Table, _ confVariant) error {
			return tbl.SetChains(nf.Chain{Name: "fw", Rules: []nf.Rule{{Action: nf.Accept()}}})
		}},
		{Name: "chain name too long", Declare: func(tbl *iptables.Table, _ confVariant) error {
			return tbl.SetChains(nf.Chain{Name: "np-" + strings.Repeat("x", 40)})
		}},
		{Name: "chain given twice", Declare: func(tbl *iptables.Table, _ confVariant) error {
			return tbl.SetChains(nf.Chain{Name: "np-a"}, nf.Chain{Name: "np-a"})
		}},
		{Name: "rule without action", Declare: func(tbl *iptables.Table, _ confVariant) error {
			return tbl.SetChains(nf.Chain{Name: "np-a", Rules: []nf.Rule{{}}})
		}},
		{Name: "prefix of the other family", Declare: func(tbl *iptables.Table, c confVariant) error {
			other := confVariant{v: ipfamily.IPv6}
			if c.v == ipfamily.IPv6 {
				other.v = ipfamily.IPv4
			}
			return tbl.SetChains(nf.Chain{Name: "np-a", Rules: []nf.Rule{{Matches: []nf.Match{nf.SourceNet(other.net(1, 0))}, Action: nf.Accept()}}})
		}},
		{Name: "host bits", Declare: func(tbl *iptables.Table, c confVariant) error {
			p := c.net(1, 0)
			return tbl.SetChains(nf.Chain{Name: "np-a", Rules: []nf.Rule{{Matches: []nf.Match{nf.SourceNet(netip.PrefixFrom(p.Addr().Next(), p.Bits()))}, Action: nf.Accept()}}})
		}},
		{Name: "port without protocol", Declare: func(tbl *iptables.Table, _ confVariant) error {
			return tbl.SetChains(nf.Chain{Name: "np-a", Rules: []nf.Rule{{Matches: []nf.Match{nf.DestPorts(nf.Port(80))}, Action: nf.Accept()}}})
		}},
		{Name: "comment too long", Declare: func(tbl *iptables.Table, _ confVariant) error {
			return tbl.SetChains(nf.Chain{Name: "np-a", Rules: []nf.Rule{{Action: nf.Accept(), Comments: []string{strings.Repeat("c", iptables.MaxCommentLength+1)}}}})
		}},
		{Name: "jump to itself", Declare: func(tbl *iptables.Table, _ confVariant) error {
			return tbl.SetChains(nf.Chain{Name: "np-a", Rules: []nf.Rule{{Action: nf.Jump("np-a")}}})
		}},
		{Name: "jump to a built-in chain", Declare: func(tbl *iptables.Table, _ confVariant) error {
			return tbl.SetChains(nf.Chain{Name: "np-a", Rules: []nf.Rule{{Action: nf.Jump("INPUT")}}})
		}},
		{Name: "MASQUERADE in filter", Declare: func(tbl *iptables.Table, _ confVariant) error {
			return tbl.SetChains(nf.Chain{Name: "np-a", Rules: []nf.Rule{{Action: nf.Masquerade()}}})
		}},
		{Name: "hook outside the table", Declare: func(tbl *iptables.Table, _ confVariant) error {
			return tbl.InsertRules("test", nf.HookPrerouting, []nf.Rule{{Action: nf.Accept()}})
		}},
		{Name: "-o in INPUT", Declare: func(tbl *iptables.Table, _ confVariant) error {
			return tbl.InsertRules("test", nf.HookInput, []nf.Rule{{Matches: []nf.Match{nf.OutInterface("eth0")}, Action: nf.Accept()}})
		}},
		{Name: "good chains with a bad one", Declare: func(tbl *iptables.Table, c confVariant) error {
			return tbl.SetChains(append(c.chains(), nf.Chain{Name: "fw"})...)
		}},
		{Name: "removing a chain without the prefix", Declare: func(tbl *iptables.Table, _ confVariant) error {
			return tbl.RemoveChains("np-fw", "FORWARD")
		}},
	},
}

// confCounters matches the packet counters of a chain line.
var confCounters = regexp.MustCompile(`\[\d+:\d+\]`)

// confHash matches our hash comment.
var confHash = regexp.MustCompile(`^np:[A-Za-z0-9_-]{16}$`)

// confRun runs single iptables commands of c's backend and family in the
// filter table, as another agent would.
func confRun(t testing.TB, k kernel.Kernel, c confVariant, cmds ...[]string) {
	bin := "iptables-" + string(c.b)
	if c.v == ipfamily.IPv6 {
		bin = "ip6tables-" + string(c.b)
	}
	for _, cmd := range cmds {
		drivertest.Exec(t, k, bin, append([]string{"-w", "5", "-t", "filter"}, cmd...)...)
	}
}

// confSave returns the rules of every chain of the filter table, as
// iptables-save prints them without "-A CHAIN", by chain.
func confSave(t testing.TB, k kernel.Kernel, c confVariant) map[string][]string {
	chains := map[string][]string{}
	for _, l := range strings.Split(drivertest.Exec(t, k, c.b.SaveCommand(c.v), "-t", "filter"), "\n") {
		if name, ok := strings.CutPrefix(l, ":"); ok {
			chains[strings.Fields(name)[0]] = nil
		}
		if rest, ok := strings.CutPrefix(l, "-A "); ok {
			name, rule, _ := strings.Cut(rest, " ")
			chains[name] = append(chains[name], rule)
		}
	}
	return chains
}

// confArgs renders rules as RuleArgs does, one line of arguments each.
func confArgs(t testing.TB, c confVariant, rules []nf.Rule) []string {
	var out []string
	for _, r := range rules {
		args, err := iptables.RuleArgs(r, c.v)
		if err != nil {
			t.Fatalf("RuleArgs(%v): %v", r, err)
		}
		out = append(out, strings.Join(args, " "))
	}
	return out
}

// confStrip splits saved rules into arguments (as iptables-restore does:
// double quotes group, a backslash in them takes the next character),
// takes out our hash comment, and joins them again; it also returns how
// many rules had exactly one hash comment of ours.
func confStrip(rules []string) ([]string, int) {
	var out []string
	hashed := 0
	for _, r := range rules {
		var args []string
		var cur strings.Builder
		in, quoted := false, false
		for i := 0; i < len(r); i++ {
			switch ch := r[i]; {
			case ch == '"':
				in, quoted = !in, true
			case ch == '\\' && in && i+1 < len(r):
				i++
				cur.WriteByte(r[i])
			case ch == ' ' && !in:
				if cur.Len() > 0 || quoted {
					args = append(args, cur.String())
				}
				cur.Reset()
				quoted = false
			default:
				cur.WriteByte(ch)
			}
		}
		if cur.Len() > 0 || quoted {
			args = append(args, cur.String())
		}
		n := 0
		for i := 0; i+3 < len(args); i++ {
			if args[i] == "-m" && args[i+1] == "comment" && args[i+2] == "--comment" && confHash.MatchString(args[i+3]) {
				args = slices.Delete(args, i, i+4)
				n++
				i--
			}
		}
		if n == 1 {
			hashed++
		}
		out = append(out, strings.Join(args, " "))
	}
	return out, hashed
}

package iptables_test

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// benchDecl declares n rules in chains of 10 and a FORWARD jump to each.
func benchDecl(n int) ([]netfilter.Chain, []netfilter.Rule) {
	var chains []netfilter.Chain
	var jumps []netfilter.Rule
	for c := 0; c < n/10; c++ {
		name := fmt.Sprintf("np-%04d", c)
		rules := make([]netfilter.Rule, 10)
		for j := range rules {
			k := c*10 + j + 1
			rules[j] = netfilter.Rule{
				Matches: []netfilter.Match{
					netfilter.SourceNet(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(k >> 16), byte(k >> 8), byte(k)}), 32)),
					netfilter.Protocol(netfilter.ProtoTCP),
					netfilter.DestPorts(netfilter.Port(uint16(1000 + j))),
				},
				Action: netfilter.Accept(),
			}
		}
		chains = append(chains, netfilter.Chain{Name: name, Rules: rules})
		jumps = append(jumps, netfilter.Rule{Action: netfilter.Jump(name)})
	}
	return chains, jumps
}

// BenchmarkDeclare measures rendering and hashing 10k rules.
func BenchmarkDeclare(b *testing.B) {
	chains, jumps := benchDecl(10_000)
	for b.Loop() {
		tbl, _ := iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-", Kernel: kernelfake.New(kernelfake.Options{})})
		if err := tbl.SetChains(chains...); err != nil {
			b.Fatal(err)
		}
		if err := tbl.InsertRules("test", "FORWARD", jumps); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAdopt measures a restarted Table adopting 11k rules that are
// already right: declare, read, parse, diff (the fake's save included).
func BenchmarkAdopt(b *testing.B) {
	chains, jumps := benchDecl(10_000)
	ns, _ := newFake()
	opts := iptables.Options{Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-", Kernel: ns, PostWriteRecheck: []time.Duration{}}
	first, _ := iptables.New(opts)
	_ = first.SetChains(chains...)
	_ = first.InsertRules("test", "FORWARD", jumps)
	if _, err := first.Apply(context.Background()); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		tbl, _ := iptables.New(opts)
		_ = tbl.SetChains(chains...)
		_ = tbl.InsertRules("test", "FORWARD", jumps)
		if _, err := tbl.Apply(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// emptyKernel answers every save with an empty filter table and swallows
// restores, so a benchmark measures the Table alone.
var emptyKernel = command.RunnerFunc(func(_ context.Context, stdin io.Reader, name string, _ ...string) ([]byte, error) {
	if stdin != nil {
		_, _ = io.Copy(io.Discard, stdin)
		return nil, nil
	}
	return []byte("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"), nil
})

// BenchmarkInitialApply measures the Go side of programming 11k rules into
// an empty table: declare, read, diff and render the restore input.
func BenchmarkInitialApply(b *testing.B) {
	chains, jumps := benchDecl(10_000)
	opts := iptables.Options{Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-", Kernel: commands(emptyKernel), PostWriteRecheck: []time.Duration{}}
	for b.Loop() {
		tbl, _ := iptables.New(opts)
		_ = tbl.SetChains(chains...)
		_ = tbl.InsertRules("test", "FORWARD", jumps)
		if _, err := tbl.Apply(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// inSyncTable returns a Table that has programmed benchDecl(n) into a fake
// kernel and trusts it (no rechecks). Once programmed, the
// kernel swallows restores, so that benchmarks measure the Table alone.
func inSyncTable(b *testing.B, n int) (*iptables.Table, []netfilter.Chain, []netfilter.Rule) {
	b.Helper()
	chains, jumps := benchDecl(n)
	k := iptablesfake.New()
	swallow := false
	r := command.RunnerFunc(func(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
		if swallow && stdin != nil {
			_, err := io.Copy(io.Discard, stdin)
			return nil, err
		}
		return k.Run(ctx, stdin, name, args...)
	})
	defer func() { swallow = true }()
	tbl, err := iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-", Kernel: commands(r), PostWriteRecheck: []time.Duration{}})
	if err != nil {
		b.Fatal(err)
	}
	if err := tbl.SetChains(chains...); err != nil {
		b.Fatal(err)
	}
	if err := tbl.InsertRules("test", "FORWARD", jumps); err != nil {
		b.Fatal(err)
	}
	if _, err := tbl.Apply(context.Background()); err != nil {
		b.Fatal(err)
	}
	return tbl, chains, jumps
}

// BenchmarkChangeOne measures changing one rule of one chain in a table of
// 11k rules in sync: UpdateChain and an Apply that writes one line.
func BenchmarkChangeOne(b *testing.B) {
	tbl, chains, _ := inSyncTable(b, 10_000)
	base := chains[len(chains)/2]
	changed := netfilter.Chain{Name: base.Name, Rules: append([]netfilter.Rule(nil), base.Rules...)}
	changed.Rules[4] = netfilter.Rule{Action: netfilter.Drop()}
	versions := [2]netfilter.Chain{changed, base}
	i := 0
	for b.Loop() {
		if err := tbl.SetChains(versions[i%2]); err != nil {
			b.Fatal(err)
		}
		if _, err := tbl.Apply(context.Background()); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if st := tbl.WorkStats(); st.Saves != 1 || st.Restores != i+1 {
		b.Fatalf("%d saves and %d restores for %d changes", st.Saves, st.Restores, i)
	}
}

// BenchmarkRedeclareUnchanged measures an agent that declares its whole
// state again (11k rules, nothing changed) and applies: the declarations
// are compared with the cached rendering and Apply runs nothing.
func BenchmarkRedeclareUnchanged(b *testing.B) {
	tbl, chains, jumps := inSyncTable(b, 10_000)
	for b.Loop() {
		if err := tbl.SetChains(chains...); err != nil {
			b.Fatal(err)
		}
		if err := tbl.InsertRules("test", "FORWARD", jumps); err != nil {
			b.Fatal(err)
		}
		if _, err := tbl.Apply(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	if st := tbl.WorkStats(); st.Saves != 1 || st.Restores != 1 {
		b.Fatalf("%d saves and %d restores, want 1 and 1", st.Saves, st.Restores)
	}
}

// BenchmarkNoopApply measures an Apply with nothing changed and nothing
// due.
func BenchmarkNoopApply(b *testing.B) {
	tbl, _, _ := inSyncTable(b, 10_000)
	for b.Loop() {
		if _, err := tbl.Apply(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInitialPlan is BenchmarkInitialApply with Plan instead of
// Apply: the same read and decision, the writes listed instead of run.
func BenchmarkInitialPlan(b *testing.B) {
	chains, jumps := benchDecl(10_000)
	opts := iptables.Options{Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-", Kernel: commands(emptyKernel), PostWriteRecheck: []time.Duration{}}
	for b.Loop() {
		tbl, _ := iptables.New(opts)
		_ = tbl.SetChains(chains...)
		_ = tbl.InsertRules("test", "FORWARD", jumps)
		p, err := tbl.Plan(context.Background())
		if err != nil || len(p.Writes) != 1001 {
			b.Fatal(len(p.Writes), err)
		}
	}
}

// BenchmarkPlanChangeOne measures the Plan of one changed rule of one chain
// in a table of 11k rules in sync (BenchmarkChangeOne's Apply, dry).
func BenchmarkPlanChangeOne(b *testing.B) {
	tbl, chains, _ := inSyncTable(b, 10_000)
	changed := netfilter.Chain{Name: chains[len(chains)/2].Name, Rules: append([]netfilter.Rule(nil), chains[len(chains)/2].Rules...)}
	changed.Rules[4] = netfilter.Rule{Action: netfilter.Drop()}
	if err := tbl.SetChains(changed); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		p, err := tbl.Plan(context.Background())
		if err != nil || len(p.Writes) != 1 {
			b.Fatal(p, err)
		}
	}
}

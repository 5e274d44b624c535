package iptables_test

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/iptables/iptablesfake"
)

// benchDecl declares n rules in chains of 10 and a FORWARD jump to each.
func benchDecl(n int) ([]iptables.Chain, []iptables.Rule) {
	var chains []iptables.Chain
	var jumps []iptables.Rule
	for c := 0; c < n/10; c++ {
		name := fmt.Sprintf("np-%04d", c)
		rules := make([]iptables.Rule, 10)
		for j := range rules {
			k := c*10 + j + 1
			rules[j] = iptables.Rule{
				Match: iptables.Match{
					iptables.SourceNet(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(k >> 16), byte(k >> 8), byte(k)}), 32)),
					iptables.Protocol(iptables.ProtoTCP),
					iptables.DestPorts(iptables.Port(uint16(1000 + j))),
				},
				Action: iptables.Accept(),
			}
		}
		chains = append(chains, iptables.Chain{Name: name, Rules: rules})
		jumps = append(jumps, iptables.Rule{Action: iptables.Jump(name)})
	}
	return chains, jumps
}

// BenchmarkDeclare measures rendering and hashing 10k rules.
func BenchmarkDeclare(b *testing.B) {
	chains, jumps := benchDecl(10_000)
	for b.Loop() {
		tbl, _ := iptables.New(iptables.Options{Table: "filter", IPVersion: iptables.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-", Runner: iptablesfake.New()})
		if err := tbl.UpdateChains(chains...); err != nil {
			b.Fatal(err)
		}
		if err := tbl.InsertRules("FORWARD", jumps); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAdopt measures a restarted Table adopting 11k rules that are
// already right: declare, read, parse, diff (the fake's save included).
func BenchmarkAdopt(b *testing.B) {
	chains, jumps := benchDecl(10_000)
	k := iptablesfake.New()
	opts := iptables.Options{Table: "filter", IPVersion: iptables.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-", Runner: k, PostWriteRecheck: []time.Duration{}}
	first, _ := iptables.New(opts)
	_ = first.UpdateChains(chains...)
	_ = first.InsertRules("FORWARD", jumps)
	if _, err := first.Apply(context.Background()); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		tbl, _ := iptables.New(opts)
		_ = tbl.UpdateChains(chains...)
		_ = tbl.InsertRules("FORWARD", jumps)
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
	opts := iptables.Options{Table: "filter", IPVersion: iptables.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-", Runner: emptyKernel, PostWriteRecheck: []time.Duration{}}
	for b.Loop() {
		tbl, _ := iptables.New(opts)
		_ = tbl.UpdateChains(chains...)
		_ = tbl.InsertRules("FORWARD", jumps)
		if _, err := tbl.Apply(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// inSyncTable returns a Table that has programmed benchDecl(n) into a fake
// kernel and trusts it (no rechecks, no refresh). Once programmed, the
// kernel swallows restores, so that benchmarks measure the Table alone.
func inSyncTable(b *testing.B, n int) (*iptables.Table, []iptables.Chain, []iptables.Rule) {
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
	tbl, err := iptables.New(iptables.Options{Table: "filter", IPVersion: iptables.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-", Runner: r, PostWriteRecheck: []time.Duration{}})
	if err != nil {
		b.Fatal(err)
	}
	if err := tbl.UpdateChains(chains...); err != nil {
		b.Fatal(err)
	}
	if err := tbl.InsertRules("FORWARD", jumps); err != nil {
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
	changed := iptables.Chain{Name: base.Name, Rules: append([]iptables.Rule(nil), base.Rules...)}
	changed.Rules[4] = iptables.Rule{Action: iptables.Drop()}
	versions := [2]iptables.Chain{changed, base}
	i := 0
	for b.Loop() {
		if err := tbl.UpdateChain(versions[i%2]); err != nil {
			b.Fatal(err)
		}
		if _, err := tbl.Apply(context.Background()); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if st := tbl.Stats(); st.Saves != 1 || st.Restores != i+1 {
		b.Fatalf("%d saves and %d restores for %d changes", st.Saves, st.Restores, i)
	}
}

// BenchmarkRedeclareUnchanged measures an agent that declares its whole
// state again (11k rules, nothing changed) and applies: the declarations
// are compared with the cached rendering and Apply runs nothing.
func BenchmarkRedeclareUnchanged(b *testing.B) {
	tbl, chains, jumps := inSyncTable(b, 10_000)
	for b.Loop() {
		if err := tbl.UpdateChains(chains...); err != nil {
			b.Fatal(err)
		}
		if err := tbl.InsertRules("FORWARD", jumps); err != nil {
			b.Fatal(err)
		}
		if _, err := tbl.Apply(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	if st := tbl.Stats(); st.Saves != 1 || st.Restores != 1 {
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

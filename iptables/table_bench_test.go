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
		if err := tbl.InsertOrAppendRules("FORWARD", jumps); err != nil {
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
	_ = first.InsertOrAppendRules("FORWARD", jumps)
	if _, err := first.Apply(context.Background()); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		tbl, _ := iptables.New(opts)
		_ = tbl.UpdateChains(chains...)
		_ = tbl.InsertOrAppendRules("FORWARD", jumps)
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
		_ = tbl.InsertOrAppendRules("FORWARD", jumps)
		if _, err := tbl.Apply(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

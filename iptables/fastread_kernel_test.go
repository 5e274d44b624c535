//go:build linux

package iptables

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
)

// readInProcess reads a table of k in process, as a Table does, but
// without falling back to iptables-save.
func readInProcess(k *kernel.Namespace, b Backend, f ipfamily.Family, table string, p *saveParser) (*kernelTable, error) {
	var chains []fastChain
	err := k.Do(func() (err error) {
		chains, err = fastRead(b, f, table, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return p.fromChains(chains), nil
}

// fastView is what a read yields, in a form both reads must agree on: per
// chain the hashes, the foreign references and where the texts of our
// rules are (the in-process read leaves them empty).
type fastView struct {
	Hashes      []string
	ForeignRefs int
	Texts       int
	OurTexts    []int
}

func viewOf(t *testing.T, kt *kernelTable, fast bool) map[string]fastView {
	t.Helper()
	out := map[string]fastView{}
	for name, kc := range kt.chains {
		v := fastView{ForeignRefs: kc.foreignRefs, Texts: len(kc.texts)}
		for i := range kc.rules() {
			v.Hashes = append(v.Hashes, kc.hash(i))
		}
		for i, text := range kc.texts {
			if kc.hash(i) != "" {
				v.OurTexts = append(v.OurTexts, i)
				assert.Equal(t, fast, text == "", "text of our rule %d of %s (in process: %v)", i, name, fast)
			} else {
				assert.Empty(t, text, "text of foreign rule %d of %s", i, name)
			}
		}
		out[name] = v
	}
	return out
}

// fakeHash returns a valid-looking hash numbered i.
func fakeHash(tag string, i int) string {
	return fmt.Sprintf("%s%0*d", tag, HashLength-len(tag), i)
}

// differentialInput builds an iptables-restore input for table with our
// chains, foreign chains, empty chains, policies, interleaved foreign and
// our rules in the built-in chains, and rules with several comments. size
// adds that many rules to one owned chain.
func differentialInput(table string, v ipfamily.Family, variant, size int) string {
	net := func(i int) string {
		if v == ipfamily.IPv6 {
			return fmt.Sprintf("2001:db8:%x::/48", i)
		}
		return fmt.Sprintf("10.%d.0.0/16", i)
	}
	h := func(i int) string { return `"np:` + fakeHash(fmt.Sprintf("T%dV%d", len(table), variant), i) + `"` }
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", table)
	for i, c := range tableChains[table] {
		policy := "ACCEPT"
		if table != "nat" && (i+variant)%2 == 1 {
			policy = "DROP"
		}
		fmt.Fprintf(&b, ":%s %s [0:0]\n", c, policy)
	}
	for _, c := range []string{"np-a", "np-b", "np-c", "np-empty", "KUBE-X", "KUBE-EMPTY", "np2-other"} {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	b0 := tableChains[table][0]
	b1 := tableChains[table][len(tableChains[table])-1]
	lines := []string{
		"-A " + b0 + " -m comment --comment " + h(1) + " -j np-a",
		"-A " + b0 + " -s " + net(1) + " -j ACCEPT",
		"-A " + b0 + " -m comment --comment c1 -m comment --comment " + h(2) + " -j np-c",
		"-A " + b0 + " -m comment --comment " + h(3) + " -m comment --comment " + h(4) + " -j RETURN",
		"-A " + b0 + " -j KUBE-X",
		"-A " + b0 + " -s " + net(2) + " -j np-b",
		"-A " + b0 + " -g np-c",
		"-A " + b0 + ` -m comment --comment "np:short" -j ACCEPT`,
		"-A " + b0 + ` -m comment --comment "np:` + fakeHash("X", 5) + ` x" -j ACCEPT`,
		"-A " + b0 + ` -m comment --comment "np:` + fakeHash("X", 6) + `x" -j ACCEPT`,
		"-A " + b0 + ` -m comment --comment "other:` + fakeHash("X", 7) + `" -j ACCEPT`,
		"-A " + b0 + " -m comment --comment " + h(8),
		"-A np-a -m comment --comment " + h(10) + " -j ACCEPT",
		"-A np-a -s " + net(3) + " -j np-c",
		"-A np-a -m comment --comment " + h(11) + " -j np-b",
		"-A np-a -m comment --comment " + h(11) + " -g np-c",
		"-A np-b -m comment --comment first -m comment --comment second -m comment --comment " + h(12) + " -j RETURN",
		"-A KUBE-X -j np-a",
		"-A KUBE-X -m comment --comment " + h(13) + " -j np-a",
		"-A KUBE-X -j KUBE-EMPTY",
		"-A np2-other -j np-b",
		"-A " + b1 + " -s " + net(4) + " -j np-a",
		"-A " + b1 + " -m comment --comment " + h(14) + " -j ACCEPT",
	}
	if variant%2 == 1 {
		lines = append(lines[len(lines)/2:], lines[:len(lines)/2]...)
	}
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	for i := range size {
		fmt.Fprintf(&b, "-A np-c -s %s -m comment --comment %s -j ACCEPT\n", net(i%250), h(100+i))
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// nativeRules are nft rules iptables-nft-save calls incompatible.
var nativeRules = []string{
	"ct state established accept",
	"limit rate 10 kbytes/second accept",
	"limit rate over 10/second accept",
	"log prefix x accept",
}

// TestKernelFastReadMatchesSave builds varied tables in every table of
// every backend and IP family and checks that the in-process read yields
// exactly what the iptables-save parser does, and that both refuse a
// table holding a native nftables rule.
func TestKernelFastReadMatchesSave(t *testing.T) {
	kerneltest.RequireCommands(t, "iptables-legacy-restore", "iptables-nft-restore", "ip6tables-legacy-restore", "ip6tables-nft-restore", "nft")
	ctx := context.Background()
	for _, b := range []Backend{BackendLegacy, BackendNFT} {
		for _, v := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			t.Run(fmt.Sprintf("%s-%v", b, v), func(t *testing.T) {
				ns := kerneltest.NewNS(t)
				k := OpenKernelForTest(t, ns)
				family := map[ipfamily.Family]string{ipfamily.IPv4: "ip", ipfamily.IPv6: "ip6"}[v]
				for _, table := range []string{"filter", "nat", "mangle", "raw"} {
					p := &saveParser{table: table, chainPrefix: "np-", hashPrefix: "np:", foreign: []string{"KUBE-X", "KUBE-MISSING"}}
					check := func(t *testing.T, populated bool) {
						t.Helper()
						out, err := ns.Exec(ctx, b.SaveCommand(v), "-t", table)
						require.NoError(t, err)
						want, err := p.parse(bytes.NewReader(out))
						require.NoError(t, err)
						got, err := readInProcess(k, b, v, table, p)
						require.NoError(t, err)
						assert.Equal(t, viewOf(t, want, false), viewOf(t, got, true), "save output:\n%s", out)
						assert.Equal(t, want.exists, got.exists, "foreign chains")
						assert.Equal(t, populated, want.exists["KUBE-X"])
						assert.False(t, want.exists["KUBE-MISSING"])
						hasOurs := false
						for _, c := range tableChains[table] {
							hasOurs = hasOurs || strings.Trim(want.chains[c].hashes, "\x00") != ""
						}
						if populated { // the comparison is not between two empty pictures
							assert.True(t, hasOurs, "rules of ours in built-in chains")
							assert.Positive(t, want.chains["np-a"].foreignRefs, "foreign jumps to np-a")
							assert.Positive(t, want.chains["np-a"].rules(), "rules of np-a")
							assert.Contains(t, want.chains, "np-empty")
						}
					}
					t.Run(table+"/empty", func(t *testing.T) {
						// Create the table (legacy loads it on first use).
						_, err := ns.Run(ctx, strings.NewReader("*"+table+"\nCOMMIT\n"), b.RestoreCommand(v))
						require.NoError(t, err)
						check(t, false)
					})
					for variant, size := range []int{0, 3, 300} {
						t.Run(fmt.Sprintf("%s/%d-%d", table, variant, size), func(t *testing.T) {
							in := differentialInput(table, v, variant, size)
							_, err := ns.Run(ctx, strings.NewReader(in), b.RestoreCommand(v))
							require.NoError(t, err, in)
							if b == BackendNFT {
								// A comment in the rule's user data, as the nft
								// tool (and older iptables-nft) stores it.
								for i, chain := range []string{"np-a", tableChains[table][0]} {
									_, err := ns.Exec(ctx, "nft", "add", "rule", family, table, chain, "counter", "accept",
										"comment", `"np:`+fakeHash(fmt.Sprintf("U%dV%d", i, variant), size)+`"`)
									require.NoError(t, err)
								}
							}
							check(t, true)
						})
					}
					for _, native := range nativeRules {
						if b != BackendNFT {
							break
						}
						t.Run(table+"/native/"+native, func(t *testing.T) {
							chain := tableChains[table][0]
							_, err := ns.Exec(ctx, "nft", append([]string{"add", "rule", family, table, chain}, strings.Fields(native)...)...)
							require.NoError(t, err)
							out, err := ns.Exec(ctx, b.SaveCommand(v), "-t", table)
							require.NoError(t, err)
							_, err = p.parse(bytes.NewReader(out))
							require.ErrorIs(t, err, ErrIncompatible, "save output:\n%s", out)
							_, err = readInProcess(k, b, v, table, p)
							assert.Error(t, err, "the in-process read refuses it too")
							_, err = ns.Exec(ctx, "nft", "flush", "chain", family, table, chain)
							require.NoError(t, err)
						})
					}
				}
			})
		}
	}
}

//go:build linux

package iptables

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// TestKernelGoldenRulesResyncWritesNothing is the kernel side of item 6:
// every golden rule (each criterion and action, in the table and built-in
// chain it belongs to) is declared through a Table, in its built-in chain
// and in a forced owned chain of its table, and written once: a resync
// writes nothing, however the kernel normalises what it prints (port ranges,
// negations, protocol names, quoting, marks, prefixes); and removing it
// all deletes every rule of ours by the text the kernel prints.
func TestKernelGoldenRulesResyncWritesNothing(t *testing.T) {
	ctx := context.Background()
	for _, b := range []Backend{BackendLegacy, BackendNFT} {
		for _, v := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			t.Run(fmt.Sprintf("%s-%v", b, v), func(t *testing.T) {
				kerneltest.RequireCommands(t, b.RestoreCommand(v), b.SaveCommand(v), "ipset")
				ns := kerneltest.NewNS(t)
				k := OpenKernelForTest(t, ns)
				family := map[ipfamily.Family]string{ipfamily.IPv4: "inet", ipfamily.IPv6: "inet6"}[v]
				for _, set := range rmSetNames[v] {
					_, err := ns.Exec(ctx, "ipset", "create", set[0], set[1], "family", family)
					require.NoError(t, err)
				}
				_, err := ns.Run(ctx, strings.NewReader("*filter\n:"+rmTarget+" - [0:0]\nCOMMIT\n"), b.RestoreCommand(v), "--noflush")
				require.NoError(t, err)
				cases := map[string]map[string][]netfilter.Rule{}
				for _, tc := range rmGoldenCases() {
					if tc.v != v {
						continue
					}
					if cases[tc.table] == nil {
						cases[tc.table] = map[string][]netfilter.Rule{}
					}
					cases[tc.table][tc.chain] = append(cases[tc.table][tc.chain], tc.rule)
				}
				for _, table := range rmTables {
					tbl, err := New(Options{Table: table, Family: v, Backend: b, ChainPrefix: "np-", Kernel: k, PostWriteRecheck: []time.Duration{}})
					require.NoError(t, err)
					var owned []string
					for chain, rules := range cases[table] {
						require.NoError(t, tbl.AppendRules("test", netfilter.Hook(chain), rules), "%s %s", table, chain)
						name := "np-" + strings.ToLower(chain)
						owned = append(owned, name)
						require.NoError(t, tbl.SetChains(netfilter.Chain{Name: name, Rules: rules, ForceProgramming: true}), "%s %s", table, chain)
					}
					_, err = tbl.Apply(ctx)
					require.NoError(t, err, table)
					require.Equal(t, 1, tbl.WorkStats().Restores, table)
					tbl.QueueResync()
					_, err = tbl.Apply(ctx)
					require.NoError(t, err, table)
					assert.Equal(t, 1, tbl.WorkStats().Restores, "%s: the resync wrote", table)
					assert.Zero(t, tbl.WorkStats().Saves, "%s: every rule read in process", table)

					for chain := range cases[table] {
						require.NoError(t, tbl.AppendRules("test", netfilter.Hook(chain), nil))
					}
					require.NoError(t, tbl.RemoveChains(owned...))
					tbl.QueueResync()
					_, err = tbl.Apply(ctx)
					require.NoError(t, err, table)
					out, err := ns.Exec(ctx, b.SaveCommand(v), "-t", table)
					require.NoError(t, err)
					assert.NotContains(t, string(out), "np-", "%s: everything of ours is gone", table)
					if len(cases[table]) > 0 {
						assert.Equal(t, 1, tbl.WorkStats().Saves, "%s: the texts of our rules in built-in chains", table)
					}
				}
			})
		}
	}
}

// TestKernelRandomRulesResyncWritesNothing widens the sample: rules drawn
// at random (the generator of FuzzRuleArgs, seeded) that a Table accepts
// are each written into an owned chain of their own, so that each is one
// object. The kernel takes every one of them but those whose jump target
// or set it does not have (left out as objects), and a resync writes
// nothing.
func TestKernelRandomRulesResyncWritesNothing(t *testing.T) {
	ctx := context.Background()
	for _, b := range []Backend{BackendLegacy, BackendNFT} {
		for _, v := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			t.Run(fmt.Sprintf("%s-%v", b, v), func(t *testing.T) {
				kerneltest.RequireCommands(t, b.RestoreCommand(v), b.SaveCommand(v))
				ns := kerneltest.NewNS(t)
				rng := rand.New(rand.NewPCG(uint64(len(b)), uint64(v)))
				for _, table := range rmTables {
					tbl, err := New(Options{Table: table, Family: v, Backend: b, ChainPrefix: "np-", Kernel: OpenKernelForTest(t, ns), PostWriteRecheck: []time.Duration{}})
					require.NoError(t, err)
					dependent := map[string]bool{} // chains whose rule needs a chain or a set
					for i := 0; len(dependent) < 400 && i < 20000; i++ {
						data := make([]byte, 48)
						for j := range data {
							data[j] = byte(rng.IntN(256))
						}
						r, _ := rmFuzzRule(data)
						name := fmt.Sprintf("np-r%d", i)
						if tbl.SetChains(netfilter.Chain{Name: name, Rules: []netfilter.Rule{r}, ForceProgramming: true}) != nil {
							continue
						}
						args, err := RuleArgs(r, v)
						require.NoError(t, err)
						dependent[name] = r.JumpTarget() != "" || slices.Contains(args, "--match-set")
					}
					_, err = tbl.Apply(ctx)
					var pe *dataplane.PartialError
					if errors.As(err, &pe) {
						for _, o := range pe.Objects() {
							assert.True(t, dependent[o.Name], "%s: the kernel refused a rule the Table accepted: %v", table, o)
						}
					} else {
						require.NoError(t, err)
					}
					st := tbl.WorkStats()
					tbl.QueueResync()
					_, _ = tbl.Apply(ctx)
					assert.Equal(t, st.Restores, tbl.WorkStats().Restores, "%s: the resync wrote", table)
					assert.Equal(t, st.Saves, tbl.WorkStats().Saves, "%s: every rule read in process", table)
				}
			})
		}
	}
}

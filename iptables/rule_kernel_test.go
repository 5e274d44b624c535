//go:build linux

package iptables

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// rmBuiltinChains are the built-in chains of each table the golden rules
// use.
var rmBuiltinChains = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"mangle": {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"raw":    {"PREROUTING", "OUTPUT"},
}

// TestKernelGoldenRules feeds the golden files to iptables-restore of both
// backends and both IP versions in a fresh namespace: every rule must be
// accepted in its table and chain, iptables-save must print it back as
// RuleArgs rendered it (unless the case says why not), and `-D CHAIN
// <same args>` must delete every one of them again.
func TestKernelGoldenRules(t *testing.T) {
	prefixes := map[ipfamily.Family]string{ipfamily.IPv4: "iptables", ipfamily.IPv6: "ip6tables"}
	for _, backend := range []string{"legacy", "nft"} {
		for _, v := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			restore := prefixes[v] + "-" + backend + "-restore"
			save := prefixes[v] + "-" + backend + "-save"
			t.Run(backend+"/"+v.String(), func(t *testing.T) {
				kerneltest.RequireCommands(t, restore, save, "ipset")
				ns := kerneltest.NewNS(t)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()

				family := map[ipfamily.Family]string{ipfamily.IPv4: "inet", ipfamily.IPv6: "inet6"}[v]
				for _, set := range rmSetNames[v] {
					_, err := ns.Exec(ctx, "ipset", "create", set[0], set[1], "family", family)
					require.NoError(t, err)
				}

				golden, err := os.ReadFile(rmGoldenPath(v))
				require.NoError(t, err)
				_, err = ns.ExecInput(ctx, bytes.NewReader(golden), restore, "--noflush", "-w", "5")
				require.NoError(t, err, "iptables-restore refused the golden file %s", rmGoldenPath(v))

				// What iptables-save prints, per table and chain, must be
				// the rendering, rule by rule in order.
				want := map[string]map[string][]rmCase{}
				for _, tc := range rmGoldenCases() {
					if tc.v != v {
						continue
					}
					if want[tc.table] == nil {
						want[tc.table] = map[string][]rmCase{}
					}
					want[tc.table][tc.chain] = append(want[tc.table][tc.chain], tc)
				}
				checked := 0
				for _, table := range rmTables {
					got := rmSavedRules(ctx, t, ns, save, table)
					for _, chain := range rmBuiltinChains[table] {
						cases := want[table][chain]
						if !assert.Len(t, got[chain], len(cases), "%s %s rules", table, chain) {
							continue
						}
						for i, tc := range cases {
							args, err := RuleArgs(tc.rule, v)
							require.NoError(t, err)
							if tc.saveDiffers != "" {
								continue
							}
							assert.Equal(t, args, got[chain][i], "%s: iptables-save prints it back differently", tc.name)
							checked++
						}
					}
				}
				assert.Positive(t, checked)

				del := rmRestoreInput(t, v, "-D")
				_, err = ns.ExecInput(ctx, strings.NewReader(del), restore, "--noflush", "-w", "5")
				require.NoError(t, err, "deleting with the same arguments:\n%s", del)
				for _, table := range rmTables {
					got := rmSavedRules(ctx, t, ns, save, table)
					for _, chain := range rmBuiltinChains[table] {
						assert.Empty(t, got[chain], "%s %s still has rules after -D", table, chain)
					}
				}
			})
		}
	}
}

// rmSavedRules runs save for table and returns the arguments of each rule,
// per chain, without "-A CHAIN".
func rmSavedRules(ctx context.Context, t *testing.T, ns *kerneltest.NS, save, table string) map[string][][]string {
	t.Helper()
	out, err := ns.Exec(ctx, save, "-t", table)
	require.NoError(t, err)
	rules := map[string][][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "-A ") {
			continue
		}
		tok := rmSaveTokens(line)
		require.GreaterOrEqual(t, len(tok), 2, line)
		rules[tok[1]] = append(rules[tok[1]], tok[2:])
	}
	require.NoError(t, sc.Err())
	return rules
}

// rmSaveTokens splits an iptables-save line into arguments, as the save
// parser does (nextArg).
func rmSaveTokens(line string) []string {
	var out []string
	for rest := []byte(line); ; {
		a, r, ok, _ := nextArg(rest)
		if !ok {
			return out
		}
		out = append(out, string(a))
		rest = r
	}
}

func TestSaveTokens(t *testing.T) {
	assert.Equal(t, []string{"-A", "X", "--comment", "it's a b", "", "-j", "Y"},
		rmSaveTokens(`-A X --comment "it\'s a b" "" -j  Y`))
}

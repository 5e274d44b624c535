package iptables_test

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

var update = flag.Bool("update-restore", false, "rewrite the golden files in testdata/restore")

// lastRestore returns the input of the last restore call, or "" when the
// last Apply ran none.
func lastRestore(k *iptablesfake.Kernel) string {
	calls := k.Calls()
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Op == iptablesfake.OpRestore {
			return calls[i].Stdin
		}
	}
	return ""
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "restore", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -run %s -update-restore to create it", t.Name())
	assert.Equal(t, string(want), got, "restore input differs from %s (go test -update-restore rewrites it)", path)
}

// TestGoldenRestoreInput pins the rendered restore transactions of a
// sequence of changes: what is declared, replaced, deleted and in which
// order.
func TestGoldenRestoreInput(t *testing.T) {
	ns, k := newFake()
	b, v := iptables.BackendLegacy, ipfamily.IPv4
	require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-A", "FORWARD", "-s", "192.0.2.1", "-j", "DROP"))
	opts := fakeOpts(ns)
	opts.Backend = b
	tbl := newTable(t, opts)
	web := netfilter.Rule{
		Matches: []netfilter.Match{
			netfilter.DestNet(netip.MustParsePrefix("10.244.1.0/24")),
			netfilter.Protocol(netfilter.ProtoTCP),
			netfilter.DestPorts(netfilter.Port(80), netfilter.Port(443)),
		},
		Action:   netfilter.Accept(),
		Comments: []string{"web traffic"},
	}
	established := netfilter.Rule{Matches: []netfilter.Match{netfilter.ConntrackState(netfilter.CTStateEstablished, netfilter.CTStateRelated)}, Action: netfilter.Accept()}
	pods := []netfilter.Rule{
		{Matches: []netfilter.Match{netfilter.InInterface("veth+"), netfilter.Mark(0x100, 0x100)}, Action: netfilter.Return()},
		acceptFrom("10.244.0.0/16"),
		{Action: netfilter.Drop()},
	}
	steps := []struct {
		name   string
		change func()
	}{
		{"initial", func() {
			require.NoError(t, tbl.SetChains(
				netfilter.Chain{Name: "np-fw", Rules: []netfilter.Rule{established, web, jump("np-pods")}},
				netfilter.Chain{Name: "np-pods", Rules: pods},
				netfilter.Chain{Name: "np-old", Rules: []netfilter.Rule{acceptFrom("10.9.0.0/16")}},
				netfilter.Chain{Name: "np-unused", Rules: []netfilter.Rule{acceptFrom("10.8.0.0/16")}},
			))
			require.NoError(t, tbl.InsertRules("test", "FORWARD", []netfilter.Rule{jump("np-fw")}))
			require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-old")}))
			require.NoError(t, tbl.AppendRules("test", "FORWARD", []netfilter.Rule{{Action: netfilter.Drop(), Comments: []string{"default deny"}}}))
		}},
		{"change-one-rule", func() {
			changed := append([]netfilter.Rule(nil), pods...)
			changed[1] = acceptFrom("10.245.0.0/16")
			require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-pods", Rules: changed}))
		}},
		{"shrink-grow-rehook-remove", func() {
			require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-pods", Rules: pods[:1]}))
			require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-fw", Rules: []netfilter.Rule{established, web, jump("np-pods"), acceptFrom("10.7.0.0/16")}}))
			require.NoError(t, tbl.InsertRules("test", "FORWARD", []netfilter.Rule{acceptFrom("10.6.0.0/16"), jump("np-fw")}))
			require.NoError(t, tbl.InsertRules("test", "INPUT", nil))
			require.NoError(t, tbl.RemoveChains("np-old"))
		}},
		{"remove-everything", func() {
			require.NoError(t, tbl.RemoveChains("np-fw", "np-pods", "np-unused"))
			require.NoError(t, tbl.InsertRules("test", "FORWARD", nil))
			require.NoError(t, tbl.AppendRules("test", "FORWARD", nil))
		}},
	}
	for _, step := range steps {
		step.change()
		apply(t, tbl)
		golden(t, step.name, lastRestore(k))
		// Whatever the step wrote, a fresh read finds nothing to do.
		k.ResetCalls()
		tbl.QueueResync()
		apply(t, tbl)
		require.Zero(t, k.Count(iptablesfake.OpRestore), "step %s did not converge", step.name)
	}
	assert.Equal(t, []string{"-s 192.0.2.1/32 -j DROP"}, k.Rules(iptablesfake.Backend(b), v, "filter", "FORWARD"))
	assert.Equal(t, []string{"INPUT", "FORWARD", "OUTPUT"}, k.Chains(iptablesfake.Backend(b), v, "filter"))
}

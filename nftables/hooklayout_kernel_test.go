//go:build linux

package nftables_test

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// A hook's InsertRules and AppendRules rules are the top and the bottom
// of one base chain, as in iptables' built-in chain: an accept among the
// first ends the packet's walk of our rules before the second.
func TestInsertAndAppendShareOneBaseChain(t *testing.T) {
	ns := nftablesfake.New()
	tbl := newTable(t, fakeOpts(ns))
	drop := netfilter.Rule{Matches: []netfilter.Match{src("10.0.0.0/8")}, Action: netfilter.Drop()}
	require.NoError(t, tbl.AppendRules("test", netfilter.HookInput, []netfilter.Rule{drop}))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{acceptFrom("10.1.0.0/16"), acceptFrom("10.2.0.0/16")}))
	require.NoError(t, tbl.SetPolicy(netfilter.HookInput, nftables.PolicyDrop))
	apply(t, tbl)
	chains := ns.Chains(v4, "np")
	require.Len(t, chains, 1)
	c := chains[0]
	assert.Equal(t, "INPUT", c.Name)
	require.True(t, c.Base)
	assert.Equal(t, uint32(nfnl.HookInput), c.Hook)
	assert.Equal(t, int32(-10), c.Priority)
	assert.Equal(t, uint32(nfnl.PolicyDrop), c.Policy)
	require.Len(t, c.Rules, 3)
	h := handles(ns, v4, "np", "INPUT")

	// Changing one group rewrites only its rules; the other keeps its place.
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{acceptFrom("10.1.0.0/16")}))
	apply(t, tbl)
	assert.Equal(t, []uint64{h[0], h[2]}, handles(ns, v4, "np", "INPUT"))
	require.NoError(t, tbl.AppendRules("test", netfilter.HookInput, nil))
	apply(t, tbl)
	assert.Equal(t, []uint64{h[0]}, handles(ns, v4, "np", "INPUT"))

	// The same rule in both groups is two rules.
	require.NoError(t, tbl.AppendRules("test", netfilter.HookInput, []netfilter.Rule{acceptFrom("10.1.0.0/16")}))
	apply(t, tbl)
	assert.Len(t, handles(ns, v4, "np", "INPUT"), 2)
	n, err := nftables.PendingAfterRead(tbl)
	require.NoError(t, err)
	assert.Zero(t, n)
}

// oldLayout writes a table as a Table wrote it when each hook had two
// base chains, INPUT-insert (priority -10) and INPUT-append (+10).
func oldLayout(t *testing.T, ns *nftablesfake.Namespace) {
	t.Helper()
	a := ns.Admin()
	require.NoError(t, a.AddTable(v4, "np"))
	require.NoError(t, a.AddBaseChain(v4, "np", "INPUT-insert", "filter", nfnl.HookInput, -10))
	require.NoError(t, a.AddBaseChain(v4, "np", "INPUT-append", "filter", nfnl.HookInput, 10))
	require.NoError(t, a.AddRule(v4, "np", "INPUT-insert", "np:AAAAAAAAAAAAAAAA"))
	require.NoError(t, a.AddRule(v4, "np", "INPUT-append", "np:BBBBBBBBBBBBBBBB"))
}

// A table written with two base chains per hook is moved to one by the
// next Apply, in one transaction (the kernel commits it whole: the hook is
// never without our rules, nor with both layouts), and a restart on the
// new layout writes nothing.
func TestOldTwoChainLayoutMigratedInOneTransaction(t *testing.T) {
	ns := nftablesfake.New()
	oldLayout(t, ns)
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{acceptFrom("10.1.0.0/16")}))
	require.NoError(t, tbl.AppendRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Drop()}}))
	ns.ResetCounts()
	apply(t, tbl)
	tx, committed, _, _ := ns.Counts()
	assert.Equal(t, 1, tx)
	assert.Equal(t, 1, committed)
	assert.Equal(t, []string{"INPUT"}, chainNames(ns, v4, "np"))

	restarted := newTable(t, fakeOpts(ns))
	require.NoError(t, restarted.InsertRules("test", netfilter.HookInput, []netfilter.Rule{acceptFrom("10.1.0.0/16")}))
	require.NoError(t, restarted.AppendRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Drop()}}))
	ns.ResetCounts()
	apply(t, restarted)
	tx, _, _, _ = ns.Counts()
	assert.Zero(t, tx, "a restart on the new layout writes nothing")
}

// While the kernel refuses the new base chain, the old layout's chains of
// its hook stay: the hook keeps the rules it had.
func TestOldLayoutKeptWhileNewBaseChainRefused(t *testing.T) {
	ns := nftablesfake.New()
	oldLayout(t, ns)
	ns.Refuse(func(r nftablesfake.Request) syscall.Errno {
		if r.Op == "newchain" && r.Chain == "INPUT" {
			return syscall.EPERM
		}
		return 0
	})
	opts := fakeOpts(ns)
	tbl := newTable(t, opts)
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{acceptFrom("10.1.0.0/16")}))
	_, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, nftables.ErrRefused)
	assert.ElementsMatch(t, []string{"INPUT-insert", "INPUT-append"}, chainNames(ns, v4, "np"))

	ns.Refuse(nil)
	opts.Clock.(*clock.Fake).Advance(time.Minute)
	apply(t, tbl)
	assert.Equal(t, []string{"INPUT"}, chainNames(ns, v4, "np"))
}

// TestKernelOldTwoChainLayoutMigrated writes, with nft, a table as a Table
// wrote it when each hook had two base chains — an accept at -10 and a
// drop at +10, which dropped the loopback connection the accept was for —
// and checks that the next Apply moves it to one base chain in one
// transaction (the kernel commits it whole), after which the connection
// passes, and that a restart on the new layout writes nothing. IPv4 and
// IPv6.
func TestKernelOldTwoChainLayoutMigrated(t *testing.T) {
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		t.Run(f.String(), func(t *testing.T) {
			e := newKenv(t)
			fam, lo := familyName(f), "127.0.0.1:9999"
			if f == ipfamily.IPv6 {
				lo = "[::1]:9999"
			}
			var ln net.Listener
			require.NoError(t, e.ns.Do(func() (err error) { ln, err = net.Listen("tcp", lo); return err }))
			t.Cleanup(func() { ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
			dial := func(timeout time.Duration) error {
				return e.ns.Do(func() error {
					c, err := net.DialTimeout("tcp", lo, timeout)
					if err == nil {
						c.Close()
					}
					return err
				})
			}
			e.nftInput(t, fmt.Sprintf(`table %[1]s np {
	chain INPUT-insert { type filter hook input priority -10; policy accept; tcp dport 9999 accept comment "np:AAAAAAAAAAAAAAAA"; }
	chain INPUT-append { type filter hook input priority 10; policy accept; tcp dport 9999 drop comment "np:BBBBBBBBBBBBBBBB"; }
}
`, fam))
			require.Error(t, dial(time.Second), "the old layout drops what its first chain accepts")

			declare := func(tbl *nftables.Table) {
				dport := netfilter.DestPorts(netfilter.Port(9999))
				tcp := netfilter.Protocol(netfilter.ProtoTCP)
				require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Matches: []netfilter.Match{tcp, dport}, Action: netfilter.Accept()}}))
				require.NoError(t, tbl.AppendRules("test", netfilter.HookInput, []netfilter.Rule{{Matches: []netfilter.Match{tcp, dport}, Action: netfilter.Drop()}}))
			}
			tbl := newTable(t, kopts(e, f))
			declare(tbl)
			apply(t, tbl)
			assert.Equal(t, 1, tbl.WorkStats().Transactions, "one transaction: the hook is never without our rules")
			list := e.nft(t, "list", "table", fam, "np")
			assert.NotContains(t, list, "INPUT-insert")
			assert.NotContains(t, list, "INPUT-append")
			assert.Contains(t, list, "chain INPUT {")
			require.NoError(t, dial(10*time.Second), "accepted at the top of the one chain")

			restarted := newTable(t, kopts(e, f))
			declare(restarted)
			apply(t, restarted)
			assert.Zero(t, restarted.WorkStats().Transactions, "a restart on the new layout writes nothing")
		})
	}
}

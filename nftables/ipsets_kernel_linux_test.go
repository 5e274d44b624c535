//go:build linux

package nftables_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/masquerade"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// flat returns nft output with its whitespace collapsed, for matching
// lines that nft indents and wraps.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestKernelIPSetsUnderMasquerade runs the masquerade manager on a nat Table
// and its IPSets in a dataplane.Loop, in a fresh namespace: nft lists the
// pools' sets in the Table's table and the rule matching them; a pool
// removed leaves the set's elements; a restarted agent writes nothing.
func TestKernelIPSetsUnderMasquerade(t *testing.T) {
	for _, f := range ipfamily.All {
		t.Run(f.String(), func(t *testing.T) {
			e := newKenv(t)
			pool, svc := pfx("10.244.0.0/16"), pfx("10.96.0.0/12")
			want := []string{
				"set all-pools { type ipv4_addr flags interval elements = { 10.96.0.0/12, 10.244.0.0/16 } }",
				"set masq-pools { type ipv4_addr flags interval elements = { 10.244.0.0/16 } }",
				"ip saddr @masq-pools ip daddr != @all-pools",
			}
			if f == ipfamily.IPv6 {
				pool, svc = pfx("fd44::/48"), pfx("fd96::/108")
				want = []string{
					"set all-pools { type ipv6_addr flags interval elements = { fd44::/48, fd96::/108 } }",
					"set masq-pools { type ipv6_addr flags interval elements = { fd44::/48 } }",
					"ip6 saddr @masq-pools ip6 daddr != @all-pools",
				}
			}
			build := func() (*nftables.Table, *nftables.IPSets, *masquerade.Manager) {
				nat := newTable(t, nftables.Options{Name: "npm-nat", Family: f, Role: nftables.NAT, ChainPrefix: "npm-", Kernel: e.k,
					PostWriteRecheck: []time.Duration{}})
				sets := newIPSets(t, nat, "")
				m, err := masquerade.New(masquerade.Options{Family: f, Sets: sets, Table: nat, Chain: "npm-masq"})
				require.NoError(t, err)
				return nat, sets, m
			}
			nat, sets, m := build()
			loop := managertest.StartLoop(t, dataplane.Options{}, []dataplane.Manager{m}, sets, nat)
			managertest.Send(t, loop,
				cluster.Pool{ID: "pods", CIDR: pool, Masquerade: true},
				cluster.Pool{ID: "services", CIDR: svc})
			managertest.InSync(loop)
			managertest.WaitReady(t, loop, 30*time.Second)
			out := e.nft(t, "list", "table", familyName(f), "npm-nat")
			t.Log(out)
			for _, w := range want {
				assert.Contains(t, flat(out), w)
			}
			assert.Regexp(t, `masquerade (random-fully|fully-random)`, out)
			assert.Contains(t, out, "chain POSTROUTING")
			assert.Equal(t, 1, nat.WorkStats().Transactions, "sets, chains and rules in one transaction")

			// The services pool goes: its element goes, nothing else.
			before := nat.WorkStats()
			managertest.Send(t, loop, cluster.PoolRemove{ID: "services"})
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(flat(e.nft(t, "list", "set", familyName(f), "npm-nat", "all-pools")), "elements = { "+pool.String()+" }") {
				require.True(t, time.Now().Before(deadline), "the services pool never left all-pools")
				time.Sleep(10 * time.Millisecond)
			}
			after := nat.WorkStats()
			assert.Equal(t, 1, after.Transactions-before.Transactions)
			assert.LessOrEqual(t, after.Messages-before.Messages, 2, "the range's elements only")

			// A restarted agent (new Table, IPSets and Manager on the same
			// pools) adopts the table and writes nothing.
			nat2, sets2, m2 := build()
			m2.OnUpdate(cluster.Pool{ID: "pods", CIDR: pool, Masquerade: true})
			_, err := managertest.Pass(context.Background(), []dataplane.Manager{m2}, sets2, nat2)
			require.NoError(t, err)
			assert.Equal(t, 1, nat2.WorkStats().Reads)
			assert.Zero(t, nat2.WorkStats().Transactions, "nothing to write")
		})
	}
}

// TestKernelIPSetsMatchPackets: the kernel drops what a hash:ip set of an
// IPSets holds, and follows its members as they change; sets of every type
// IPSets holds are created as nft shows them.
func TestKernelIPSetsMatchPackets(t *testing.T) {
	kerneltest.RequireCommands(t, "ping")
	e := newKenv(t)
	ctx := context.Background()
	tbl := newTable(t, kopts(e, ipfamily.IPv4))
	sets := newIPSets(t, tbl, "np4-")
	blocked, open := addr("127.0.0.2"), addr("127.0.0.3")
	require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "blocked", Type: netfilter.HashIP}, []netfilter.Member{netfilter.IPMember(blocked)}))
	require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "svcs", Type: netfilter.HashIPPort},
		[]netfilter.Member{netfilter.IPPortMember(addr("10.96.0.1"), netfilter.ProtoTCP, 80), netfilter.IPPortMember(addr("10.96.0.1"), netfilter.ProtoUDP, 53)}))
	require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "ports", Type: netfilter.BitmapPort, Range: netfilter.PortRange{First: 1000, Last: 2000}},
		[]netfilter.Member{netfilter.PortMember(1000), netfilter.PortMember(1999)}))
	require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "nets", Type: netfilter.HashNet},
		[]netfilter.Member{netfilter.NetMember(pfx("10.0.0.0/8")), netfilter.NetMember(pfx("192.168.0.0/24")), netfilter.NetMember(pfx("192.168.1.0/24"))}))
	kn := func(n string) string {
		k, err := sets.KernelName(n)
		require.NoError(t, err)
		return k
	}
	require.NoError(t, tbl.InsertRules("test", netfilter.HookOutput, []netfilter.Rule{
		{Matches: []netfilter.Match{netfilter.DestIPSet(kn("blocked"))}, Action: netfilter.Drop()},
		{Matches: []netfilter.Match{netfilter.IPSet(kn("svcs"), netfilter.Dst, netfilter.Dst)}, Action: netfilter.Accept()},
		{Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestIPSet(kn("ports"))}, Action: netfilter.Accept()},
		{Matches: []netfilter.Match{netfilter.SourceIPSet(kn("nets"))}, Action: netfilter.Accept()},
	}))
	pass := func() {
		t.Helper()
		_, err := managertest.Pass(ctx, nil, sets, tbl)
		require.NoError(t, err)
	}
	pass()
	out := flat(e.nft(t, "list", "table", "ip", "np"))
	t.Log(out)
	for _, w := range []string{
		"set np4-blocked { type ipv4_addr elements = { 127.0.0.2 } }",
		"set np4-svcs { type ipv4_addr . inet_proto . inet_service elements = { ", "10.96.0.1 . tcp . 80", "10.96.0.1 . udp . 53",
		"set np4-ports { type inet_service elements = { 1000, 1999 } }",
		"set np4-nets { type ipv4_addr flags interval elements = { 10.0.0.0/8, 192.168.0.0/23 } }",
		"ip daddr @np4-blocked drop",
		"ip daddr . meta l4proto . th dport @np4-svcs accept",
		"tcp dport @np4-ports accept",
		"ip saddr @np4-nets accept",
	} {
		assert.Contains(t, out, w)
	}
	reach := func(a netip.Addr) error { return e.ns.Ping(ctx, a) }
	require.NoError(t, reach(open))
	require.ErrorIs(t, reach(blocked), kerneltest.ErrUnreachable, "dropped by the set's rule")

	// Members follow: open is blocked, blocked is open.
	require.NoError(t, sets.AddMembers("blocked", []netfilter.Member{netfilter.IPMember(open)}))
	require.NoError(t, sets.RemoveMembers("blocked", []netfilter.Member{netfilter.IPMember(blocked)}))
	before := tbl.WorkStats()
	pass()
	assert.Equal(t, 1, tbl.WorkStats().Transactions-before.Transactions)
	assert.Equal(t, 2, tbl.WorkStats().Messages-before.Messages, "one element added, one deleted")
	assert.Contains(t, flat(e.nft(t, "list", "set", "ip", "np", "np4-blocked")), "elements = { 127.0.0.3 }")
	require.NoError(t, reach(blocked))
	require.ErrorIs(t, reach(open), kerneltest.ErrUnreachable)

	// An element deleted behind our back is repaired by the Table's resync.
	e.nft(t, "delete", "element", "ip", "np", "np4-blocked", "{", "127.0.0.3", "}")
	require.NoError(t, reach(open))
	tbl.QueueResync()
	pass()
	require.ErrorIs(t, reach(open), kerneltest.ErrUnreachable)

	// The set goes once its rule goes, in one pass.
	require.NoError(t, sets.RemoveSet("blocked"))
	_, err := managertest.Pass(ctx, nil, sets, tbl)
	require.True(t, errors.Is(err, netfilter.ErrSetInUse), "%v", err)
	assert.Contains(t, e.nft(t, "list", "sets", "ip"), "np4-blocked", "still used")
	require.NoError(t, tbl.InsertRules("test", netfilter.HookOutput, nil))
	pass()
	assert.NotContains(t, e.nft(t, "list", "sets", "ip"), "np4-blocked")
	require.NoError(t, reach(open))
}

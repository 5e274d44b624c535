//go:build linux

package nftables_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

func TestKernelSmoke(t *testing.T) {
	ns := kerneltest.NewNS(t)
	k, err := kernel.Open(ns.Path())
	require.NoError(t, err)
	defer k.Close()
	tbl, err := nftables.New(nftables.Options{Name: "np-filter", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: k, Counters: true})
	require.NoError(t, err)
	defer tbl.Close()
	require.NoError(t, tbl.SetSets(nftables.Set{Name: "svc", Key: []nftables.KeyType{nftables.TypeAddr, nftables.TypeProto, nftables.TypePort}, Verdict: true,
		Elements: []nftables.Element{{Key: []nftables.Value{nftables.Addr(netip.MustParseAddr("10.96.0.1")), nftables.Proto(6), nftables.Port(80)}, Verdict: netfilter.Goto("svc-1")}}},
		nftables.Set{Name: "nets", Key: []nftables.KeyType{nftables.TypeAddr}, Interval: true, Elements: []nftables.Element{
			nftables.Elem(nftables.Prefix(netip.MustParsePrefix("10.0.0.0/8"))), nftables.Elem(nftables.Prefix(netip.MustParsePrefix("192.168.0.0/16")))}}))
	require.NoError(t, tbl.SetChains(
		netfilter.Chain{Name: "svc-1", Rules: []netfilter.Rule{{Matches: []netfilter.Match{netfilter.SourceNet(netip.MustParsePrefix("10.0.0.0/8"))}, Action: netfilter.Accept()}}},
		netfilter.Chain{Name: "fw", Rules: []netfilter.Rule{
			{Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestPorts(netfilter.Port(22), netfilter.Ports(8000, 8080))}, Action: netfilter.Accept(), Comments: []string{"ssh"}},
			{Matches: []netfilter.Match{netfilter.SourceIPSet("nets")}, Action: netfilter.Return()},
			{Action: netfilter.VerdictMap("svc", netfilter.Dst, netfilter.Dst)},
			{Matches: []netfilter.Match{netfilter.ConntrackState(netfilter.CTStateNew)}, Action: netfilter.Drop()},
		}}))
	require.NoError(t, tbl.InsertRules(netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Jump("fw")}}))
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	out, err := ns.Exec(context.Background(), "nft", "list", "ruleset")
	require.NoError(t, err)
	t.Logf("%s", out)
	t.Logf("%+v", tbl.Stats())
	// A second writer adopts and writes nothing.
	tbl2, err := nftables.New(nftables.Options{Name: "np-filter", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: k, Counters: true})
	require.NoError(t, err)
	defer tbl2.Close()
	require.NoError(t, tbl2.SetSets(nftables.Set{Name: "svc", Key: []nftables.KeyType{nftables.TypeAddr, nftables.TypeProto, nftables.TypePort}, Verdict: true,
		Elements: []nftables.Element{{Key: []nftables.Value{nftables.Addr(netip.MustParseAddr("10.96.0.1")), nftables.Proto(6), nftables.Port(80)}, Verdict: netfilter.Goto("svc-1")}}},
		nftables.Set{Name: "nets", Key: []nftables.KeyType{nftables.TypeAddr}, Interval: true, Elements: []nftables.Element{
			nftables.Elem(nftables.Prefix(netip.MustParsePrefix("10.0.0.0/8"))), nftables.Elem(nftables.Prefix(netip.MustParsePrefix("192.168.0.0/16")))}}))
	require.NoError(t, tbl2.SetChains(
		netfilter.Chain{Name: "svc-1", Rules: []netfilter.Rule{{Matches: []netfilter.Match{netfilter.SourceNet(netip.MustParsePrefix("10.0.0.0/8"))}, Action: netfilter.Accept()}}},
		netfilter.Chain{Name: "fw", Rules: []netfilter.Rule{
			{Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestPorts(netfilter.Port(22), netfilter.Ports(8000, 8080))}, Action: netfilter.Accept(), Comments: []string{"ssh"}},
			{Matches: []netfilter.Match{netfilter.SourceIPSet("nets")}, Action: netfilter.Return()},
			{Action: netfilter.VerdictMap("svc", netfilter.Dst, netfilter.Dst)},
			{Matches: []netfilter.Match{netfilter.ConntrackState(netfilter.CTStateNew)}, Action: netfilter.Drop()},
		}}))
	require.NoError(t, tbl2.InsertRules(netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Jump("fw")}}))
	_, err = tbl2.Apply(context.Background())
	require.NoError(t, err)
	t.Logf("%+v", tbl2.Stats())
	require.Zero(t, tbl2.Stats().Transactions)
}

//go:build linux

package nftables_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// TestKernelLimitRules writes limit matches at the edges of what
// netfilter.MatchLimit allows, reads them back with nft, and checks that a
// restarted Table adopts them without a write.
func TestKernelLimitRules(t *testing.T) {
	e := newKenv(t)
	declare := func(tbl interface {
		SetChains(...netfilter.Chain) error
		InsertRules(string, netfilter.Hook, []netfilter.Rule) error
	}) {
		require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "limited", Rules: []netfilter.Rule{
			{Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP), netfilter.Limit(netfilter.MaxLimitRatePerSecond, netfilter.PerSecond, 0)}, Action: netfilter.Log("np-limited:")},
			{Matches: []netfilter.Match{netfilter.Limit(1, netfilter.PerHour, netfilter.MaxLimitBurst)}, Action: netfilter.Accept()},
			{Matches: []netfilter.Match{netfilter.Limit(7, netfilter.PerMinute, 3)}, Action: netfilter.Return()},
		}}))
		require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{jump("limited")}))
	}
	tbl := newTable(t, kopts(e, ipfamily.IPv4))
	declare(tbl)
	apply(t, tbl)
	out := e.nft(t, "list", "chain", "ip", "np", "limited")
	assert.Contains(t, out, "meta l4proto tcp limit rate 10000/second log", "nft leaves out the default burst of 5")
	assert.Contains(t, out, "limit rate 1/hour burst 10000 packets")
	assert.Contains(t, out, "limit rate 7/minute burst 3 packets")

	again := newTable(t, kopts(e, ipfamily.IPv4))
	declare(again)
	apply(t, again)
	assert.Zero(t, again.WorkStats().Transactions, "a restarted Table adopts the limit rules")
}

//go:build linux

package nftables_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeOpts returns options for an IPv4 filter table "np" on k, with a fake
// clock and without rechecks (tests that need them set them).
func fakeOpts(k kernel.NFTables) nftables.Options {
	return nftables.Options{
		Name:             "np",
		Family:           ipfamily.IPv4,
		Role:             nftables.Filter,
		Kernel:           k,
		Clock:            clock.NewFake(t0),
		PostWriteRecheck: []time.Duration{},
	}
}

func newTable(t testing.TB, opts nftables.Options) *nftables.Table {
	t.Helper()
	tbl, err := nftables.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tbl.Close() })
	return tbl
}

func apply(t testing.TB, tbl *nftables.Table) dataplane.ApplyResult {
	t.Helper()
	res, err := tbl.Apply(context.Background())
	require.NoError(t, err)
	return res
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func addr(s string) netip.Addr  { return netip.MustParseAddr(s) }

func src(cidr string) netfilter.Match { return netfilter.SourceNet(pfx(cidr)) }

// acceptFrom is a rule accepting packets from cidr.
func acceptFrom(cidr string) netfilter.Rule {
	return netfilter.Rule{Matches: []netfilter.Match{src(cidr)}, Action: netfilter.Accept()}
}

func jump(chain string) netfilter.Rule { return netfilter.Rule{Action: netfilter.Jump(chain)} }

// svcKey is the key of a kube-proxy-style service map: VIP . proto . port.
var svcKey = []nftables.KeyType{nftables.TypeAddr, nftables.TypeProto, nftables.TypePort}

// svcElem is a service map element sending vip:port/tcp to chain.
func svcElem(vip string, port uint16, chain string) nftables.Element {
	return nftables.Element{
		Key:     []nftables.Value{nftables.Addr(addr(vip)), nftables.Proto(netfilter.ProtoTCP), nftables.Port(port)},
		Verdict: netfilter.Goto(chain),
	}
}

// comments returns the comments of a chain's rules in the fake, or nil
// when the chain does not exist.
func comments(ns *nftablesfake.Namespace, family uint8, table, chain string) []string {
	for _, c := range ns.Chains(family, table) {
		if c.Name == chain {
			out := []string{}
			for _, r := range c.Rules {
				out = append(out, r.Comment)
			}
			return out
		}
	}
	return nil
}

// chainNames returns the names of a table's chains in the fake.
func chainNames(ns *nftablesfake.Namespace, family uint8, table string) []string {
	var out []string
	for _, c := range ns.Chains(family, table) {
		out = append(out, c.Name)
	}
	return out
}

// handles returns the handles of a chain's rules in the fake.
func handles(ns *nftablesfake.Namespace, family uint8, table, chain string) []uint64 {
	for _, c := range ns.Chains(family, table) {
		if c.Name == chain {
			var out []uint64
			for _, r := range c.Rules {
				out = append(out, r.Handle)
			}
			return out
		}
	}
	return nil
}

var _ = context.Background

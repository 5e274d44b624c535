//go:build linux

package nftables_test

import (
	"context"
	"net/netip"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// An element the kernel refused and that is then withdrawn — deleted,
// left out of the set declared anew, its set removed or declared with
// another shape — is no longer reported, and the next Apply writes
// nothing for it.
func TestRefusedElementWithdrawn(t *testing.T) {
	good, bad := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.9")
	for _, tc := range []struct {
		name     string
		interval bool
		withdraw func(tbl *nftables.Table) error
	}{
		{"DeleteElements", false, func(tbl *nftables.Table) error {
			return tbl.DeleteElements("addrs", nftables.Elem(nftables.Addr(bad)))
		}},
		{"DeleteElements interval", true, func(tbl *nftables.Table) error {
			return tbl.DeleteElements("addrs", nftables.Elem(nftables.Addr(bad)))
		}},
		{"SetSets without it", false, func(tbl *nftables.Table) error {
			return tbl.SetSets(nftables.Set{Name: "addrs", Key: []nftables.KeyType{nftables.TypeAddr}, Elements: []nftables.Element{nftables.Elem(nftables.Addr(good))}})
		}},
		{"SetSets without it interval", true, func(tbl *nftables.Table) error {
			return tbl.SetSets(nftables.Set{Name: "addrs", Key: []nftables.KeyType{nftables.TypeAddr}, Interval: true, Elements: []nftables.Element{nftables.Elem(nftables.Addr(good))}})
		}},
		{"SetSets of another shape", false, func(tbl *nftables.Table) error {
			if err := tbl.RemoveChains("np-c"); err != nil {
				return err
			}
			return tbl.SetSets(nftables.Set{Name: "addrs", Key: []nftables.KeyType{nftables.TypeAddr}, Interval: true})
		}},
		{"RemoveSets", false, func(tbl *nftables.Table) error {
			if err := tbl.RemoveChains("np-c"); err != nil {
				return err
			}
			return tbl.RemoveSets("addrs")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := nftablesfake.New()
			opts := fakeOpts(ns)
			opts.ChainPrefix = "np-"
			tbl := newTable(t, opts)
			require.NoError(t, tbl.SetSets(nftables.Set{Name: "addrs", Key: []nftables.KeyType{nftables.TypeAddr}, Interval: tc.interval,
				Elements: []nftables.Element{nftables.Elem(nftables.Addr(good)), nftables.Elem(nftables.Addr(bad))}}))
			require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-c", ForceProgramming: true, Rules: []netfilter.Rule{
				{Matches: []netfilter.Match{netfilter.SourceIPSet("addrs")}, Action: netfilter.Accept()}}}))
			ns.Refuse(func(r nftablesfake.Request) syscall.Errno {
				if r.Op == "newsetelem" && netip.AddrFrom4([4]byte(r.Key)) == bad {
					return syscall.E2BIG
				}
				return 0
			})
			_, err := tbl.Apply(context.Background())
			require.ErrorIs(t, err, dataplane.ErrPartial)
			require.ErrorIs(t, err, syscall.E2BIG)

			require.NoError(t, tc.withdraw(tbl))
			_, err = tbl.Apply(context.Background())
			require.NoError(t, err, "the element is no longer declared")
			_, err = tbl.Apply(context.Background())
			require.NoError(t, err)
			n, err := nftables.PendingAfterRead(tbl)
			require.NoError(t, err)
			require.Zero(t, n)
			for _, e := range ns.Elements(v4, "np", "addrs") {
				require.NotContains(t, e, bad.String())
			}
		})
	}
}

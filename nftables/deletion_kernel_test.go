//go:build linux

package nftables_test

import (
	"context"
	"fmt"
	"regexp"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// A chain whose deletion the kernel refused because a foreign rule jumped
// to it (added after the Table last read its table) is deleted by the
// Apply after the next resync — whether the foreign rule is gone by then
// or still there (the Table deletes it, being in its table) — not kept
// until its retry is due.
func TestRefusedChainDeletionRetriedAfterResync(t *testing.T) {
	for _, gone := range []bool{true, false} {
		name := "reference still there"
		if gone {
			name = "reference gone"
		}
		t.Run(name, func(t *testing.T) {
			ns := nftablesfake.New()
			opts := fakeOpts(ns)
			opts.ChainPrefix = "np-"
			tbl := newTable(t, opts)
			require.NoError(t, tbl.SetChains(
				netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}},
				netfilter.Chain{Name: "np-b", ForceProgramming: true, Rules: []netfilter.Rule{acceptFrom("10.1.0.0/16")}}))
			require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{jump("np-a")}))
			apply(t, tbl)

			require.NoError(t, ns.Admin().AddJumpRule(v4, "np", "np-b", "np-a", "foreign"))
			require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{acceptFrom("10.2.0.0/16")}))
			require.NoError(t, tbl.RemoveChains("np-a"))
			_, err := tbl.Apply(context.Background())
			require.ErrorIs(t, err, dataplane.ErrPartial)
			require.ErrorIs(t, err, nftables.ErrRefused)
			require.Contains(t, chainNames(ns, v4, "np"), "np-a", "the foreign jump keeps it")

			if gone {
				require.NoError(t, ns.Admin().DeleteRule(v4, "np", "np-b", 1))
			}
			tbl.QueueResync()
			_, err = tbl.Apply(context.Background())
			require.NoError(t, err, "deleted on the pass after the resync")
			require.NotContains(t, chainNames(ns, v4, "np"), "np-a")
			require.Len(t, comments(ns, v4, "np", "np-b"), 1, "the foreign rule is gone")
		})
	}
}

// TestKernelRefusedChainDeletionRetriedAfterResync is
// TestRefusedChainDeletionRetriedAfterResync on the kernel, the foreign
// jump added and removed with nft, in both families.
func TestKernelRefusedChainDeletionRetriedAfterResync(t *testing.T) {
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		for _, gone := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/gone=%v", f, gone), func(t *testing.T) {
				e := newKenv(t)
				opts := kopts(e, f)
				opts.ChainPrefix = "np-"
				tbl := newTable(t, opts)
				from := func(v4, v6 string) netfilter.Rule {
					if f == ipfamily.IPv6 {
						return acceptFrom(v6)
					}
					return acceptFrom(v4)
				}
				require.NoError(t, tbl.SetChains(
					netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{from("10.0.0.0/8", "fd00::/8")}},
					netfilter.Chain{Name: "np-b", ForceProgramming: true, Rules: []netfilter.Rule{from("10.1.0.0/16", "fd01::/16")}}))
				require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{jump("np-a")}))
				apply(t, tbl)

				fam := familyName(f)
				e.nft(t, "add", "rule", fam, "np", "np-b", "jump", "np-a", "comment", "foreign")
				require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{from("10.2.0.0/16", "fd02::/16")}))
				require.NoError(t, tbl.RemoveChains("np-a"))
				_, err := tbl.Apply(context.Background())
				require.ErrorIs(t, err, dataplane.ErrPartial)
				require.ErrorIs(t, err, syscall.EBUSY)
				require.Contains(t, e.nft(t, "list", "table", fam, "np"), "chain np-a", "the foreign jump keeps it")

				if gone {
					m := regexp.MustCompile(`jump np-a comment "foreign" # handle (\d+)`).FindStringSubmatch(e.nft(t, "-a", "list", "chain", fam, "np", "np-b"))
					require.NotNil(t, m)
					e.nft(t, "delete", "rule", fam, "np", "np-b", "handle", m[1])
				}
				tbl.QueueResync()
				_, err = tbl.Apply(context.Background())
				require.NoError(t, err, "deleted on the pass after the resync")
				list := e.nft(t, "list", "table", fam, "np")
				require.NotContains(t, list, "np-a")
				require.NotContains(t, list, "foreign")
			})
		}
	}
}

//go:build linux

package netfiltertest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
)

// TestKernelSharedHooks runs the shared-hook scenario (runSharedHooks) on
// a real namespace: package iptables with both backends, and package
// nftables, each in a fresh namespace.
func TestKernelSharedHooks(t *testing.T) {
	kerneltest.RequireCommands(t, "iptables-legacy-save", "iptables-nft-save", "ip6tables-legacy-save", "ipset", "nft")
	open := func(t *testing.T) (*kerneltest.NS, *kernel.Namespace) {
		ns := kerneltest.NewNS(t)
		k, err := kernel.Open(ns.Path())
		require.NoError(t, err)
		t.Cleanup(func() { k.Close() })
		return ns, k
	}
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		t.Run("iptables-"+b.String(), func(t *testing.T) {
			_, k := open(t)
			runSharedHooks(t, iptSharedBackend(b, k))
		})
	}
	t.Run("nftables", func(t *testing.T) {
		ns, k := open(t)
		fam := func(f ipfamily.Family) string {
			if f == ipfamily.IPv6 {
				return "ip6"
			}
			return "ip"
		}
		nft := func(t *testing.T, args ...string) []byte {
			out, err := ns.Exec(context.Background(), "nft", args...)
			require.NoError(t, err, "nft %v", args)
			return out
		}
		list := func(t *testing.T, f ipfamily.Family, table, chain string) []string {
			out, err := ns.Exec(context.Background(), "nft", "list", "chain", fam(f), table, chain)
			if err != nil && strings.Contains(err.Error(), "No such file or directory") {
				return nil // no table or no chain: no jump
			}
			require.NoError(t, err)
			return nftJumps(out)
		}
		foreign := func(t *testing.T, f ipfamily.Family, add bool) bool {
			if add {
				nft(t, "add", "table", fam(f), "foreign")
				nft(t, "add", "chain", fam(f), "foreign", "POSTROUTING", "{ type nat hook postrouting priority 100 ; }")
				nft(t, "add", "rule", fam(f), "foreign", "POSTROUTING", "oifname", "foreign0", "return")
				return true
			}
			return strings.Contains(string(nft(t, "list", "chain", fam(f), "foreign", "POSTROUTING")), `oifname "foreign0" return`)
		}
		runSharedHooks(t, nftSharedBackend(k, list, foreign))
	})
}

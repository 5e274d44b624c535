// Package nfmigrate removes what nodeplane's netfilter writers left in the
// backends a node no longer uses: the one place an agent that switches
// between package iptables (legacy or nft backend) and package nftables
// calls, once, before its loop starts.
//
//	err := nfmigrate.RemoveLeftovers(ctx, ns, nfmigrate.NFTables, nfmigrate.Owned{
//		ChainPrefix: "np-", NFTablesTables: []string{"np"},
//	})
//
// RemoveLeftovers leaves the backend in use alone, so that a restart on
// the same backend adopts its rules and writes nothing, and never touches
// foreign rules, chains or tables. In the iptables backends it removes the
// chains with the writers' ChainPrefix and the rules with their hash
// comments (as an iptables.Table with nothing declared does), and writes
// only to the tables that hold something of ours; in nftables it deletes
// the named tables (nftables.RemoveTable). A backend whose binaries are
// missing is skipped.
package nfmigrate

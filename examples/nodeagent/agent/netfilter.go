package agent

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/nfmigrate"
)

// Netfilter is the netfilter backend of the masquerade rules.
type Netfilter string

// The netfilter backends.
const (
	// NetfilterAuto is the iptables backend the node uses
	// (iptables.DetectBackend): legacy or nft.
	NetfilterAuto Netfilter = "auto"
	// NetfilterIPTablesLegacy is iptables-legacy: chains npm-* in the nat
	// table, sets in the kernel's ip sets.
	NetfilterIPTablesLegacy Netfilter = "iptables-legacy"
	// NetfilterIPTablesNFT is iptables-nft: the same through the nf_tables
	// compatibility layer.
	NetfilterIPTablesNFT Netfilter = "iptables-nft"
	// NetfilterNFTables is native nftables (package nftables): a table of
	// the agent's own per family (NFTablesTable), its sets inside it
	// (nftables.IPSets), written over netlink in one transaction.
	NetfilterNFTables Netfilter = "nftables"
)

// Netfilters lists the valid netfilter backends.
var Netfilters = []Netfilter{NetfilterAuto, NetfilterIPTablesLegacy, NetfilterIPTablesNFT, NetfilterNFTables}

// The agent's nftables tables (families ip and ip6) on the nftables
// backend.
const (
	// NFTablesTable holds the nat rules (masquerade with its sets,
	// floating IPs).
	NFTablesTable = "nodeplane-nat"
	// NFTablesFilterTable holds the filter rules (the service loop guard).
	NFTablesFilterTable = "nodeplane-filter"
)

// netfilterOf is the netfilter backend of iptables backend b.
func netfilterOf(b iptables.Backend) Netfilter { return Netfilter("iptables-" + b.String()) }

// iptablesBackend returns the iptables backend of n, if it is one.
func (n Netfilter) iptablesBackend() (iptables.Backend, bool) {
	switch n {
	case NetfilterIPTablesLegacy:
		return iptables.BackendLegacy, true
	case NetfilterIPTablesNFT:
		return iptables.BackendNFT, true
	}
	return "", false
}

// resolveNetfilter validates c.Netfilter and c.IPTablesBackend (the older
// field, which names the same choice) and sets c.Netfilter.
func (c *Config) resolveNetfilter() error {
	if c.Netfilter == "" {
		c.Netfilter = NetfilterAuto
	}
	valid := false
	for _, n := range Netfilters {
		valid = valid || n == c.Netfilter
	}
	if !valid {
		return fmt.Errorf("agent: unknown netfilter backend %q (want one of %v)", c.Netfilter, Netfilters)
	}
	if c.IPTablesBackend == "" {
		return nil
	}
	if _, err := iptables.ParseBackend(string(c.IPTablesBackend)); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	want := netfilterOf(c.IPTablesBackend)
	switch c.Netfilter {
	case NetfilterAuto:
		c.Netfilter = want
	case want:
	default:
		return fmt.Errorf("agent: netfilter backend %s and iptables backend %s disagree", c.Netfilter, c.IPTablesBackend)
	}
	return nil
}

// detectNetfilter returns the configured backend, or for NetfilterAuto the
// iptables backend the node uses.
func detectNetfilter(ctx context.Context, ns kernel.Commands, cfg *Config) (Netfilter, error) {
	if cfg.Netfilter != NetfilterAuto {
		return cfg.Netfilter, nil
	}
	b, det, err := iptables.DetectBackend(ctx, ns)
	if err != nil {
		return "", fmt.Errorf("agent: iptables backend: %w", err)
	}
	cfg.Logger.Info("iptables backend", "backend", b, "reason", det.Reason)
	return netfilterOf(b), nil
}

// removeOtherBackends removes what an earlier run on another netfilter
// backend left, once, before the loop starts, so that switching backend
// leaves nothing behind (nfmigrate.RemoveLeftovers): our npm- chains and the
// rules jumping to them in every table of the iptables backends not in use,
// and on iptables the agent's nftables tables. The backend in use is not
// touched, so a restart on the same backend adopts its rules and writes
// nothing. Backends whose binaries are missing are skipped.
func removeOtherBackends(ctx context.Context, ns kernel.Kernel, nf Netfilter, log *slog.Logger) error {
	var keep nfmigrate.Backend
	switch nf {
	case NetfilterNFTables:
		keep = nfmigrate.NFTables
	case NetfilterIPTablesLegacy:
		keep = nfmigrate.IPTablesLegacy
	case NetfilterIPTablesNFT:
		keep = nfmigrate.IPTablesNFT
	default:
		return fmt.Errorf("agent: netfilter backend %q is not resolved", nf)
	}
	log.Debug("removing what other netfilter backends hold of ours", "keep", nf)
	return nfmigrate.RemoveLeftovers(ctx, ns, keep, nfmigrate.Owned{ChainPrefix: ChainPrefix,
		NFTablesTables: []string{NFTablesTable, NFTablesFilterTable}})
}

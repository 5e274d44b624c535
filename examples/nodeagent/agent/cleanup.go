package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/mtu"
)

// Cleanup removes everything an agent with cfg's ownership put in the
// kernel: its VXLAN devices, its WireGuard rule, table and device, the routes
// carrying its route protocol (main table), its iptables chains (prefix
// npm-, nat and filter tables, legacy and nft) and the rules that jump to
// them, its nftables tables (NFTablesTable with its sets and
// NFTablesFilterTable, ip and ip6), its ip sets, the BPF
// proxy's maps and attachments (cfg.BPFPinDir), and the pod MTU file.
// It builds the same drivers as Run with every manager disabled and nothing
// declared, and applies them once: their ownership rules make them delete
// exactly what is ours and nothing foreign. Stop the agent first. The
// WireGuard private key stays (remove the state directory to forget it).
func Cleanup(ctx context.Context, cfg Config) error {
	if cfg.NodeName == "" {
		cfg.NodeName = "cleanup"
	}
	if err := cfg.defaults(); err != nil {
		return err
	}
	ns, closeNS, err := openKernel(&cfg)
	if err != nil {
		return err
	}
	defer closeNS()
	done := make(chan struct{})
	var last dataplane.Health
	healthc := make(chan dataplane.Health, 1)
	opts := dataplane.Options{Logger: cfg.Logger.With("component", "loop"), ResyncInterval: -1,
		OnInSync: func() { close(done) },
		OnHealth: func(h dataplane.Health) {
			select {
			case <-healthc:
			default:
			}
			healthc <- h
		}}
	p, err := build(ctx, ns, &cfg, opts, mtu.FallbackMTU, true, nil)
	if err != nil {
		return err
	}
	defer p.close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p.loop.DatastoreInSync()
	p.loop.InterfacesInSync()
	errc := make(chan error, 1)
	go func() { errc <- p.loop.Run(ctx) }()
	var result error
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case last = <-healthc:
		case <-ctx.Done():
			result = fmt.Errorf("agent: cleanup did not converge: %v", last.LastError)
			waiting = false
		}
	}
	cancel()
	<-errc
	for _, w := range p.wg {
		_ = w.Close()
	}
	if err := cleanupProxy(ctx, &cfg, ns); err != nil {
		result = errors.Join(result, fmt.Errorf("agent: BPF proxy: %w", err))
	}
	if err := os.Remove(filepath.Join(cfg.StateDir, MTUFileName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		result = errors.Join(result, err)
	}
	return result
}

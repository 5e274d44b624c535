//go:build linux

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/bpf/maps"
	"github.com/nodeplane/nodeplane/bpf/proxy"
	"github.com/nodeplane/nodeplane/kernel"
)

// ensureBPFFS makes dir a directory on a bpffs, mounting one there when it
// is not.
func ensureBPFFS(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("agent: BPF pin directory: %w", err)
	}
	if maps.CheckBPFFS(dir) == nil {
		return nil
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("agent: mounting a bpffs on %s: %w", dir, err)
	}
	log.Warn("mounted a bpffs for the BPF proxy's pins; it lasts as long as this mount namespace", "dir", dir)
	return nil
}

// cleanupProxy removes the BPF proxy's maps and attachments from
// cfg.BPFPinDir, if it is there (which needs ns to be a Doer).
func cleanupProxy(ctx context.Context, cfg *Config, ns kernel.Kernel) error {
	if _, err := os.Stat(cfg.BPFPinDir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if maps.CheckBPFFS(cfg.BPFPinDir) != nil {
		return nil // nothing of ours can be pinned there
	}
	if err := needDo(ns, "the BPF proxy's pins in "+cfg.BPFPinDir); err != nil {
		return err
	}
	p, err := proxy.New(proxy.Options{Kernel: ns, PinDir: cfg.BPFPinDir})
	if err != nil {
		return err
	}
	return p.Cleanup(ctx)
}

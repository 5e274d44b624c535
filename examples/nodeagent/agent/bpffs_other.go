//go:build !linux

package agent

import (
	"context"
	"errors"
	"log/slog"

	"github.com/nodeplane/nodeplane/kernel"
)

var errBPFNotSupported = errors.New("agent: the BPF proxy needs Linux")

// ensureBPFFS fails off Linux.
func ensureBPFFS(string, *slog.Logger) error { return errBPFNotSupported }

// cleanupProxy has nothing to remove off Linux.
func cleanupProxy(context.Context, *Config, kernel.Kernel) error { return nil }

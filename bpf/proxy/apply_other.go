//go:build !linux

package proxy

import (
	"context"

	"github.com/nodeplane/nodeplane/dataplane"
)

// kstate is the kernel side, which only Linux has.
type kstate struct{}

func (*kstate) attachedNames() []string         { return nil }
func (*kstate) stats(int) dataplane.DriverStats { return dataplane.DriverStats{} }

func (*kstate) serviceCounters(map[string]*svc) map[string]ServiceCounters { return nil }

// Apply fails with ErrNotSupported: BPF service translation needs Linux.
func (p *Proxy) Apply(context.Context) (dataplane.ApplyResult, error) {
	return dataplane.ApplyResult{}, ErrNotSupported
}

// Plan fails with ErrNotSupported off Linux.
func (p *Proxy) Plan(context.Context) (dataplane.Plan, error) {
	return dataplane.Plan{Driver: p.o.Name}, ErrNotSupported
}

// State fails with ErrNotSupported off Linux.
func (p *Proxy) State(context.Context) (dataplane.State, error) {
	return dataplane.State{Driver: p.o.Name}, ErrNotSupported
}

// Close does nothing off Linux.
func (p *Proxy) Close() error { return nil }

// Cleanup fails with ErrNotSupported off Linux.
func (p *Proxy) Cleanup(context.Context) error { return ErrNotSupported }

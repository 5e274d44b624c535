//go:build !linux

package proxy

import "context"

// Run fails with ErrNotSupported off Linux.
func (p *Proxy) Run(context.Context) error { return ErrNotSupported }

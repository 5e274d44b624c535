//go:build !linux

package proxy

// attachModeInUse is Options.Attach: off Linux nothing is attached.
func (p *Proxy) attachModeInUse() AttachMode { return p.o.Attach }

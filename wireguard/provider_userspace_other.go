//go:build !linux

package wireguard

import (
	"context"
	"fmt"
)

func (p *userspaceProvider) Open(context.Context, DeviceSpec) (Device, error) {
	return nil, fmt.Errorf("%w: the userspace provider is Linux-only", ErrNotSupported)
}

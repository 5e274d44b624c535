//go:build linux

package mtu

import (
	"context"
	"fmt"
	"net"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/nlutil"
	"github.com/vishvananda/netlink"
)

// NetlinkLister lists links with netlink, in the network namespace its
// Handle is bound to. Dumps the kernel reports as interrupted by a
// concurrent change are retried. Linux only.
type NetlinkLister struct {
	// Handle is the netlink handle to list with, for example
	// netlink.NewHandle() for the agent's own namespace or
	// netlink.NewHandleAt for another. Required: a nil Handle is an error,
	// never a silent fallback to the calling thread's namespace.
	Handle *netlink.Handle
}

// Links lists every link in the handle's namespace. Its errors wrap
// ErrListLinks, and ErrInvalid for a nil Handle. A nil ctx is taken as
// context.Background().
func (l NetlinkLister) Links(ctx context.Context) ([]Link, error) {
	if l.Handle == nil {
		return nil, errs.Also(invalidf(ErrInvalid, "NetlinkLister.Handle is nil"), ErrListLinks)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	nls, err := nlutil.LinkList(ctx, l.Handle)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrListLinks, err)
	}
	links := make([]Link, 0, len(nls))
	for _, nl := range nls {
		a := nl.Attrs()
		links = append(links, Link{
			Name:  a.Name,
			Index: a.Index,
			MTU:   a.MTU,
			Up:    a.Flags&net.FlagUp != 0 && a.Flags&net.FlagRunning != 0,
			Type:  nl.Type(),
		})
	}
	return links, nil
}

package routetable

import (
	"net/netip"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
)

// OnLink is OnIfaceStateChanged(l.Name, l.Index, state): it makes the
// Table a dataplane.InterfaceObserver, so a Table registered with a
// dataplane.Loop gets the link updates the loop is given (Loop.OnLink)
// with no wiring of its own.
func (t *Table) OnLink(l kernel.Link, state kernel.LinkState) {
	t.OnIfaceStateChanged(l.Name, l.Index, state)
}

// OnAddrs does nothing: the Table follows interfaces, not their
// addresses. It completes dataplane.InterfaceObserver.
func (t *Table) OnAddrs(string, []netip.Prefix) {}

var _ dataplane.InterfaceObserver = (*Table)(nil)

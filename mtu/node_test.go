package mtu

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

// The tests of this package (in package mtu and mtu_test) list links from
// a kernelfake namespace that FakeNode fills.

// TestLink is a link FakeNode creates: a veth whose peer is in another
// namespace (so only the link shows), with its MTU, up (administratively
// up and running) or down.
type TestLink struct {
	Name string
	MTU  int
	Up   bool
}

// FakeNode returns a fake namespace holding lo (MTU 65536, up) and links,
// in order; an "lo" among links is left as the fake has it.
func FakeNode(t testing.TB, links ...TestLink) *kernelfake.Namespace {
	t.Helper()
	ns := kernelfake.New(kernelfake.Options{Name: "node"})
	peers := ns.NewNamespace(kernelfake.Options{Name: "peers"})
	ctx := context.Background()
	for i, l := range links {
		if l.Name == "lo" {
			continue
		}
		peer := fmt.Sprintf("p%d", i)
		link, err := ns.AddLink(ctx, kernel.Link{Name: l.Name, Kind: kernel.KindVeth, MTU: l.MTU,
			Veth: &kernel.Veth{PeerName: peer, PeerNamespaceFD: peers.FD()}})
		require.NoError(t, err)
		p, ok := peers.Link(peer)
		require.True(t, ok)
		require.NoError(t, peers.SetLinkUp(ctx, p.Index, true))
		if l.Up {
			require.NoError(t, ns.SetLinkUp(ctx, link.Index, true))
		}
	}
	ns.ResetCounts()
	return ns
}

// SetTestMTU sets the MTU of the link called name, as an administrator.
func SetTestMTU(t testing.TB, ns *kernelfake.Namespace, name string, mtu int) {
	t.Helper()
	l, ok := ns.Link(name)
	require.True(t, ok, name)
	require.NoError(t, ns.Admin().SetLinkMTU(context.Background(), l.Index, mtu))
}

// SetTestUp sets the link called name administratively up or down, as an
// administrator.
func SetTestUp(t testing.TB, ns *kernelfake.Namespace, name string, up bool) {
	t.Helper()
	l, ok := ns.Link(name)
	require.True(t, ok, name)
	require.NoError(t, ns.Admin().SetLinkUp(context.Background(), l.Index, up))
}

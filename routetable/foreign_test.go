package routetable_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/kernel"
	rt "github.com/nodeplane/nodeplane/routetable"
)

// TestCoexistingForeignRoutes is coexistingForeignRoutes on a fake
// namespace.
func TestCoexistingForeignRoutes(t *testing.T) {
	coexistingForeignRoutes(t, func(t *testing.T) *env { return fakeEnv(t, rt.IPv6, kernel.TableMain) })
}

// coexistingForeignRoutes: IPv6 keeps routes of one key through different
// links side by side, as the kernel's fe80::/64 route of every link in the
// main table. A Table that wants that key is held back by all of them,
// and still by the others when the link of one goes away: forgetting the
// routes of a link that went away forgets those of that link only. (Run
// once per link, so that whichever route the dump reported last goes
// away in one of the runs.)
func coexistingForeignRoutes(t *testing.T, newEnv func(t *testing.T) *env) {
	linkLocal := netip.MustParsePrefix("fe80::/64")
	for _, gone := range []string{"fx0", "fx1"} {
		t.Run(gone, func(t *testing.T) {
			e := newEnv(t)
			fx0, fx1 := e.addLink(t, "fx0"), e.addLink(t, "fx1")
			// Every link has its fe80::/64 route (peers too).
			linkRoutes := func() int {
				n := 0
				for _, r := range e.routes(t) {
					if strings.HasPrefix(r, "fe80::/64 metric 256 unicast dev ") {
						n++
					}
				}
				return n
			}
			require.Eventually(t, func() bool { return linkRoutes() == 4 }, 5*time.Second, time.Millisecond,
				"fe80::/64 on fx0, fx1 and their peers: %v", e.routes(t))

			tbl := e.newTable(t, rt.Options{})
			require.NoError(t, tbl.SetRoutes(classTunnel, rt.InterfaceNone, []rt.Target{{CIDR: linkLocal, Metric: 256, Type: rt.TargetBlackhole}}))
			require.ErrorIs(t, applyOnce(t, tbl), rt.ErrForeignRoute)

			peer := e.peers[map[string]int{"fx0": fx0, "fx1": fx1}[gone]]
			e.deleteLink(t, gone)
			e.tell(t, tbl, gone, kernel.LinkGone)
			e.tell(t, tbl, peer, kernel.LinkGone)
			require.Eventually(t, func() bool { return linkRoutes() == 2 }, 5*time.Second, time.Millisecond)
			require.ErrorIs(t, applyOnce(t, tbl), rt.ErrForeignRoute, "the other link's routes still hold the key")
			assert.Equal(t, 2, linkRoutes(), "not overwritten")
			assert.Empty(t, e.ours(t))

			// Once they are gone too, the key is ours.
			other := map[string]string{"fx0": "fx1", "fx1": "fx0"}[gone]
			otherPeer := e.peers[map[string]int{"fx0": fx0, "fx1": fx1}[other]]
			e.deleteLink(t, other)
			e.tell(t, tbl, other, kernel.LinkGone)
			e.tell(t, tbl, otherPeer, kernel.LinkGone)
			require.Eventually(t, func() bool { return linkRoutes() == 0 }, 5*time.Second, time.Millisecond)
			require.NoError(t, applyOnce(t, tbl))
			assert.Equal(t, []string{"fe80::/64 metric 256 blackhole"}, e.ours(t))
		})
	}
}

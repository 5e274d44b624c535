package overlaytest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

// FakeHost returns a fake namespace made with o, holding eth0, a veth
// whose peer is peer0, both up, with addrs on eth0: the host of the
// managers' unit tests.
func FakeHost(t testing.TB, o kernelfake.Options, addrs ...netip.Prefix) *kernelfake.Namespace {
	t.Helper()
	ctx := context.Background()
	ns := kernelfake.New(o)
	admin := ns.Admin()
	l, err := admin.AddLink(ctx, kernel.Link{Name: "eth0", Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: "peer0"}})
	require.NoError(t, err)
	peer, _ := admin.LinkByName(ctx, "peer0")
	require.NoError(t, admin.SetLinkUp(ctx, peer.Index, true))
	require.NoError(t, admin.SetLinkUp(ctx, l.Index, true))
	for _, p := range addrs {
		require.NoError(t, admin.AddAddr(ctx, kernel.Addr{LinkIndex: l.Index, Prefix: p}))
	}
	return ns
}

// Pass runs one apply pass as a dataplane.Loop runs an overlay manager's
// stack: m's CompleteDeferredWork, whose error ends the pass and is
// returned alone, then each step in order (the set driver's Apply, the
// manager's Driver, the route table, the set driver's ApplyDeletions). It
// returns the steps' shortest RetryAfter and their joined errors.
func Pass(ctx context.Context, m dataplane.Manager, steps ...func(context.Context) (dataplane.ApplyResult, error)) (time.Duration, error) {
	if err := m.CompleteDeferredWork(ctx); err != nil {
		return 0, err
	}
	var errs []error
	var after time.Duration
	for _, step := range steps {
		r, err := step(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		if r.RetryAfter > 0 && (after == 0 || r.RetryAfter < after) {
			after = r.RetryAfter
		}
	}
	return after, errors.Join(errs...)
}

// Converge runs pass up to passes times, moving clk by each RetryAfter (a
// second when a pass gives none), until one succeeds with nothing to
// retry. It reports whether one did, and the last pass's error.
func Converge(clk *clock.Fake, passes int, pass func() (time.Duration, error)) (bool, error) {
	var err error
	for range passes {
		var after time.Duration
		after, err = pass()
		if err == nil && after == 0 {
			return true, nil
		}
		if after == 0 {
			after = time.Second
		}
		clk.Advance(after)
	}
	return false, err
}

// RouteLine renders a route as the managers' tests compare them:
// "10.244.2.0/24 via 10.244.2.250 dev np-vxlan onlink mtu 1450" or
// "blackhole 10.244.1.0/24"; names are the links' names by index.
func RouteLine(r *kernel.Route, names map[int]string) string {
	s := r.Dst.String()
	switch {
	case r.Type == kernel.RTNBlackhole:
		s = "blackhole " + s
	case r.Gateway.IsValid():
		s += " via " + r.Gateway.String()
	}
	if r.OIF > 0 && r.Type != kernel.RTNBlackhole {
		s += " dev " + names[r.OIF]
	}
	if r.Flags&kernel.FlagOnlink != 0 {
		s += " onlink"
	}
	if r.MTU > 0 {
		s += fmt.Sprintf(" mtu %d", r.MTU)
	}
	return s
}

// DriverStep returns d's Apply as a step of Pass; for a nil d (the
// overlay.Manager of overlay.None has no Driver) a step that does nothing.
func DriverStep(d dataplane.Driver) func(context.Context) (dataplane.ApplyResult, error) {
	if d == nil {
		return func(context.Context) (dataplane.ApplyResult, error) { return dataplane.ApplyResult{}, nil }
	}
	return d.Apply
}

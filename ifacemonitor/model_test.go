package ifacemonitor

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

// Model tests drive a run directly, without goroutines: events applied
// with batch form one round, reported by flush; relist lists the Kernel
// (a fake). Events carry links the fake cannot make (renames), so the
// model's handling of them is tested here and on the real kernel.

// newDirect returns a run on k (a fresh fake when nil) that the test
// drives itself, with every kind subscribed.
func newDirect(t *testing.T, opts Options) (*run, *recorder) {
	t.Helper()
	if opts.Kernel == nil {
		opts.Kernel = kernelfake.New(kernelfake.Options{})
	}
	rec := newRecorder()
	rec.hook(&opts)
	m, err := New(opts)
	require.NoError(t, err)
	r := newRun(m, bg, nil)
	r.subscribed = m.kinds
	return r, rec
}

func batch(r *run, evs ...kernel.Event) {
	for i := range evs {
		r.handle(&evs[i])
	}
	r.flush()
}

// vlink is a veth as the kernel reports it.
func vlink(index int, name string, up bool, mtu int) kernel.Link {
	return kernel.Link{Index: index, Name: name, Kind: kernel.KindVeth, Encap: kernel.EncapEthernet, MTU: mtu, AdminUp: up, Running: up}
}

func newLink(l kernel.Link) kernel.Event { return kernel.Event{Link: &kernel.LinkEvent{Link: l}} }
func delLink(l kernel.Link) kernel.Event {
	return kernel.Event{Link: &kernel.LinkEvent{Link: l, Deleted: true}}
}

func addrEvent(idx int, p string, add bool) kernel.Event {
	return kernel.Event{Addr: &kernel.AddrEvent{Addr: kernel.Addr{LinkIndex: idx, Prefix: netip.MustParsePrefix(p)}, Deleted: !add}}
}

func renamed(l kernel.Link, name string) kernel.Link { l.Name = name; return l }

// Changes within one batch are reported as the state after the batch, with
// names released before they are taken.
func TestBatchSemantics(t *testing.T) {
	a := vlink(1, "a", true, 1500)
	b := vlink(2, "b", false, 1500)
	tests := []struct {
		name  string
		batch []kernel.Event
		want  []string
	}{
		{
			name:  "swap through a temporary name",
			batch: []kernel.Event{newLink(renamed(a, "tmp")), newLink(renamed(b, "a")), newLink(renamed(a, "b"))},
			want: []string{
				"link a #1 gone mtu=1500 veth",
				"link b #2 gone mtu=1500 veth",
				"link a #2 down mtu=1500 veth from=b",
				"link b #1 up mtu=1500 veth from=a",
			},
		},
		{
			name:  "delete and recreate",
			batch: []kernel.Event{delLink(a), newLink(vlink(7, "a", false, 1400))},
			want:  []string{"link a #1 gone mtu=1500 veth", "link a #7 down mtu=1400 veth"},
		},
		{
			name:  "created and deleted within the batch",
			batch: []kernel.Event{newLink(vlink(9, "c", false, 1500)), delLink(vlink(9, "c", false, 1500))},
		},
		{
			name:  "rename there and back",
			batch: []kernel.Event{newLink(renamed(a, "z")), newLink(a)},
		},
		{
			name:  "several changes of one link",
			batch: []kernel.Event{newLink(vlink(2, "b", true, 1500)), newLink(vlink(2, "b", true, 9000))},
			want:  []string{"link b #2 up mtu=9000 veth"},
		},
		{
			name:  "admin up without carrier is down",
			batch: []kernel.Event{newLink(kernel.Link{Index: 2, Name: "b", Kind: kernel.KindVeth, Encap: kernel.EncapEthernet, MTU: 1500, AdminUp: true})},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, rec := newDirect(t, Options{})
			batch(r, newLink(a), newLink(b))
			rec.take()
			batch(r, tc.batch...)
			assert.Equal(t, tc.want, rec.take())
			assert.Empty(t, rec.contractErrors())
		})
	}
}

// Renames, with and without the filter in the way.
func TestRenames(t *testing.T) {
	r, rec := newDirect(t, Options{Exclude: []string{"^kube-ipvs0$"}})
	l := vlink(10, "veth0", false, 1500)
	batch(r, newLink(l), addrEvent(10, "10.1.0.1/24", true))
	rec.take()
	steps := []struct {
		name string
		evs  []kernel.Event
		want []string
	}{
		{"rename", []kernel.Event{newLink(renamed(l, "eth1"))}, []string{
			"addrs veth0 []",
			"link veth0 #10 gone mtu=1500 veth",
			"link eth1 #10 down mtu=1500 veth from=veth0",
			"addrs eth1 [10.1.0.1/24]",
		}},
		{"rename to an excluded name", []kernel.Event{newLink(renamed(l, "kube-ipvs0"))},
			[]string{"addrs eth1 []", "link eth1 #10 gone mtu=1500 veth"}},
		{"address change while excluded", []kernel.Event{addrEvent(10, "10.1.0.2/24", true)}, nil},
		{"rename out of the exclusion", []kernel.Event{newLink(renamed(l, "eth2"))},
			[]string{"link eth2 #10 down mtu=1500 veth", "addrs eth2 [10.1.0.1/24 10.1.0.2/24]"}},
	}
	for _, s := range steps {
		batch(r, s.evs...)
		assert.Equal(t, s.want, rec.take(), s.name)
	}
	assert.Empty(t, rec.contractErrors())
}

// relistFrom makes r re-list every kind from the fake k.
func relistFrom(r *run) {
	r.want |= r.m.kinds
	r.relist()
	r.flush()
}

// fakeLinks replaces the links of a fake as a test wants them: an empty
// fake plus bridges with the given names, in order (indexes from 2).
func fakeWith(t *testing.T, names ...string) (*kernelfake.Namespace, []int) {
	t.Helper()
	ns := kernelfake.New(kernelfake.Options{})
	var idx []int
	for _, n := range names {
		l, err := ns.AddLink(bg, kernel.Link{Name: n, Kind: kernel.KindBridge})
		require.NoError(t, err)
		idx = append(idx, l.Index)
	}
	return ns, idx
}

// Two links swapped names while events were lost: a consumer keyed by name
// sees both names released before either is taken again.
func TestResyncNameSwap(t *testing.T) {
	ns, idx := fakeWith(t, "b", "a") // the kernel after the swap: #2 is b, #3 is a
	r, rec := newDirect(t, Options{Kernel: ns, Include: []string{"^[ab]$"}})
	br := func(i int, name string) kernel.Link {
		return kernel.Link{Index: i, Name: name, Kind: kernel.KindBridge, Encap: kernel.EncapEthernet, MTU: 1500}
	}
	batch(r, newLink(br(idx[0], "a")), newLink(br(idx[1], "b")), addrEvent(idx[0], "10.0.0.1/32", true))
	rec.take()
	relistFrom(r)
	assert.Equal(t, []string{
		"addrs a []",
		"link a #2 gone mtu=1500 bridge",
		"link b #3 gone mtu=1500 bridge",
		"link a #3 down mtu=1500 bridge from=b",
		"link b #2 down mtu=1500 bridge from=a",
		"in-sync",
	}, rec.take(), "the address went with the swap's lost events")
	assert.Empty(t, rec.contractErrors())
}

// After a re-list, events older than the listing replay; the consumer's
// view never holds two interfaces under one name and ends equal to the
// kernel's.
func TestStaleEventsAfterRelist(t *testing.T) {
	ns, idx := fakeWith(t, "y", "x") // 2 was "x", was renamed "y", then 3 was created as "x"
	r, rec := newDirect(t, Options{Kernel: ns, Include: []string{"^[xy]$"}})
	relistFrom(r)
	rec.take()
	br := func(i int, name string) kernel.Link {
		return kernel.Link{Index: i, Name: name, Kind: kernel.KindBridge, Encap: kernel.EncapEthernet, MTU: 1500}
	}
	batch(r, newLink(br(idx[0], "x")))
	batch(r, newLink(br(idx[0], "y")))
	batch(r, newLink(br(idx[1], "x")))
	assert.Empty(t, rec.contractErrors())
	assert.Equal(t, kernelView(t, ns, r.m), rec.view())
	assert.Equal(t, kernelView(t, ns, r.m), viewMap(r.m.Snapshot()))
}

// While stale events replay, two links may hold one name in the model; the
// one already reported keeps it, the other waits until it is released.
func TestDuplicateNameIsMasked(t *testing.T) {
	r, rec := newDirect(t, Options{})
	five := vlink(5, "y", false, 1500)
	six := vlink(6, "x", false, 1500)
	batch(r, newLink(five), newLink(six))
	rec.take()

	stale := renamed(five, "x")
	batch(r, newLink(stale))
	assert.Equal(t, []string{"link y #5 gone mtu=1500 veth"}, rec.take(), "x stays with #6")
	batch(r, newLink(five))
	assert.Equal(t, []string{"link y #5 down mtu=1500 veth"}, rec.take())
	batch(r, newLink(six))
	assert.Empty(t, rec.take())

	// A real conflict resolved by deleting the reported holder: the
	// masked link takes the name.
	batch(r, newLink(stale))
	rec.take()
	batch(r, delLink(six))
	assert.Equal(t, []string{"link x #6 gone mtu=1500 veth", "link x #5 down mtu=1500 veth"}, rec.take())
	assert.Empty(t, rec.contractErrors())
}

// Addresses of a link the model has not seen yet wait for it; a listing
// drops those of links that do not exist; a late deletion of a deleted
// link's address changes nothing.
func TestOrphanAddresses(t *testing.T) {
	r, rec := newDirect(t, Options{})
	batch(r, addrEvent(4, "10.0.0.1/32", true), addrEvent(4, "10.0.0.2/32", true), addrEvent(4, "10.0.0.2/32", false),
		addrEvent(8, "10.0.0.1/32", false))
	assert.Empty(t, rec.take())
	assert.Len(t, r.orphans, 1)

	batch(r, newLink(vlink(4, "late", false, 1500)))
	assert.Equal(t, []string{"link late #4 down mtu=1500 veth", "addrs late [10.0.0.1/32]"}, rec.take())
	assert.Empty(t, r.orphans)

	batch(r, addrEvent(9, "10.0.0.1/32", true))
	r.applyAddrList(nil)
	r.flush()
	assert.Equal(t, []string{"addrs late []"}, rec.take())
	assert.Empty(t, r.orphans)

	batch(r, delLink(vlink(4, "late", false, 1500)), addrEvent(4, "10.0.0.1/32", false))
	assert.Equal(t, []string{"link late #4 gone mtu=1500 veth"}, rec.take())
	assert.Empty(t, r.orphans)
}

// In-sync needs every kind subscribed and listed; nothing is listed before
// its subscription exists.
func TestInSyncWaitsForEverySubscription(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	// A fake clock: with the real one, a slow first listing (a busy
	// machine, -race) spaces the next re-list out past the test's steps.
	r, rec := newDirect(t, Options{Kernel: ns, Clock: clock.NewFake(epoch)})
	r.subscribed = 0
	step := func(ev kernel.Event) {
		r.handle(&ev)
		r.relist()
		r.flush()
	}
	step(kernel.Event{Err: kernel.ErrClosed})
	assert.Equal(t, uint64(1), r.stats.SubscribeErrors)
	assert.Zero(t, ns.Calls(kernelfake.OpLinks)+ns.Calls(kernelfake.OpAddrs))

	step(kernel.Event{Resync: &kernel.Resync{Kinds: kernel.EventLinks}})
	assert.Equal(t, 1, ns.Calls(kernelfake.OpLinks))
	assert.Zero(t, ns.Calls(kernelfake.OpAddrs))
	assert.False(t, r.inSync)
	assert.NotContains(t, rec.take(), "in-sync")

	step(kernel.Event{Resync: &kernel.Resync{Kinds: kernel.EventAddrs | kernel.EventRoutes}})
	assert.True(t, r.inSync)
	assert.Zero(t, ns.Calls(kernelfake.OpDumpRoutes), "routes are not watched")
	lines := rec.take()
	require.NotEmpty(t, lines)
	assert.Equal(t, "in-sync", lines[len(lines)-1])
}

// Route events that leave the model unsure ask for a route re-list; the
// others do not.
func TestRouteEventsThatAskForARelist(t *testing.T) {
	base := route4(100, "10.1.0.0/24", 2)
	other := base
	other.OIF = 3
	kernelMade := base
	kernelMade.Protocol, kernelMade.OIF = kernel.ProtoKernel, 4
	mp := base
	mp.OIF, mp.NextHops = 0, []kernel.NextHop{{OIF: 2, Gateway: netip.MustParseAddr("10.0.0.1")}, {OIF: 3, Gateway: netip.MustParseAddr("10.0.1.1")}}
	linkdown := base
	linkdown.Flags = kernel.FlagLinkdown
	ev := func(r kernel.Route, deleted bool) kernel.Event {
		return kernel.Event{Route: &kernel.RouteEvent{Route: r, Deleted: deleted}}
	}
	tests := []struct {
		name   string
		events []kernel.Event
		relist bool
	}{
		{"a new route", []kernel.Event{ev(base, false)}, false},
		{"a new route beside another through another link", []kernel.Event{ev(base, false), ev(other, false)}, true},
		{"the kernel's own route beside another", []kernel.Event{ev(base, false), ev(kernelMade, false)}, false},
		{"a multipath route beside a single one", []kernel.Event{ev(base, false), ev(mp, false)}, true},
		{"an attribute change", []kernel.Event{ev(base, false), ev(static(base), false)}, false},
		{"a state flag changes nothing", []kernel.Event{ev(base, false), ev(linkdown, false)}, false},
		{"a deletion", []kernel.Event{ev(base, false), ev(base, true)}, false},
		{"a deletion of an unknown route", []kernel.Event{ev(base, true)}, false},
		{"a path of a multipath route deleted", []kernel.Event{ev(mp, false), ev(base, true)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, rec := newDirect(t, Options{WatchRoutes: true})
			r.listed = r.m.kinds
			batch(r, tc.events...)
			assert.Equal(t, tc.relist, r.want&kernel.EventRoutes != 0)
			if tc.name == "a state flag changes nothing" {
				assert.Len(t, rec.takeMatching("route"), 1, "reported once")
			}
		})
	}
}

// A route that changes and changes back within one batch is reported as
// the batch left it: a consumer that wrote the route itself (a route
// table whose write the kernel echoed, then someone deleted) must learn
// that it is gone.
func TestRouteChangedAndBackInOneBatchIsReported(t *testing.T) {
	base := route4(100, "10.1.0.0/24", 2)
	ev := func(r kernel.Route, deleted bool) kernel.Event {
		return kernel.Event{Route: &kernel.RouteEvent{Route: r, Deleted: deleted}}
	}
	r, rec := newDirect(t, Options{WatchRoutes: true})
	r.listed = r.m.kinds
	batch(r, ev(base, false), ev(base, true))
	assert.Equal(t, []string{"route - table=100 10.1.0.0/24 dev=2"}, rec.takeMatching("route"), "came and went")
	assert.Empty(t, r.m.Snapshot().Routes)

	batch(r, ev(base, false))
	assert.Equal(t, []string{"route + table=100 10.1.0.0/24 dev=2"}, rec.takeMatching("route"))
	batch(r, ev(base, true), ev(base, false))
	assert.Equal(t, []string{"route + table=100 10.1.0.0/24 dev=2"}, rec.takeMatching("route"), "went and came back")
	batch(r, ev(static(base), false), ev(base, false))
	assert.Equal(t, []string{"route + table=100 10.1.0.0/24 dev=2"}, rec.takeMatching("route"), "changed and changed back")
	batch(r, ev(base, false))
	assert.Empty(t, rec.takeMatching("route"), "an event that changes nothing reports nothing")
	assert.Len(t, r.m.Snapshot().Routes, 1)
}

func static(r kernel.Route) kernel.Route { r.Protocol = 4; return r }

// A listing may show a change before the events that led to it arrive
// (events made while it listed, after its barrier). A replayed route
// through a link the listing shows down, gone or without IPv4 addresses
// makes the event that took the route away silently (the link going down
// or away, its last IPv4 address removed) ask for a route re-list, though
// the model saw no change of the link.
func TestReplayedRoutesOfALinkThatLostThemAskForARelist(t *testing.T) {
	for _, tc := range []struct {
		name  string
		event func(idx int) kernel.Event
	}{
		{"link down", func(idx int) kernel.Event {
			return newLink(kernel.Link{Index: idx, Name: "l", Kind: kernel.KindBridge, MTU: 1500})
		}},
		{"link gone", func(idx int) kernel.Event {
			return delLink(kernel.Link{Index: idx + 100, Name: "x", Kind: kernel.KindBridge, MTU: 1500})
		}},
		{"last IPv4 address gone", func(idx int) kernel.Event { return addrEvent(idx, "10.0.0.1/24", false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, idx := fakeWith(t, "l")
			oif := idx[0]
			if tc.name == "link gone" {
				oif += 100 // a link the listing no longer shows
			}
			if tc.name == "last IPv4 address gone" {
				require.NoError(t, ns.SetLinkUp(bg, idx[0], true))
			}
			r, _ := newDirect(t, Options{Kernel: ns, WatchRoutes: true, Clock: clock.NewFake(epoch)}) // no spacing between re-lists
			relistFrom(r)
			batch(r, kernel.Event{Route: &kernel.RouteEvent{Route: route4(100, "10.9.0.0/24", oif)}})
			require.Zero(t, r.want&kernel.EventRoutes, "a new route alone asks for nothing")
			batch(r, tc.event(idx[0]))
			require.NotZero(t, r.want&kernel.EventRoutes, "the route went silently: re-list")
			relistFrom(r)
			assert.Equal(t, kernelRoutes(t, ns), snapshotRoutes(r.m))
		})
	}
}

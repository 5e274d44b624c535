package dataplane

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/kernel"
)

// observingManager is a fakeManager that records, in one recorder, the
// messages it gets and the interface updates the loop gives it.
type observingManager struct {
	fakeManager
	panicOn string // OnLink panics for this interface name
}

func (m *observingManager) OnUpdate(msg any) {
	m.rec.add("%s msg %v", m.name, msg)
	m.fakeManager.OnUpdate(msg)
}

func (m *observingManager) OnLink(l kernel.Link, s kernel.LinkState) {
	if l.Name == m.panicOn {
		panic("observer broken")
	}
	m.rec.add("%s link %s/%d %v mtu=%d up=%v", m.name, l.Name, l.Index, s, l.MTU, l.AdminUp && l.Running)
}

func (m *observingManager) OnAddrs(name string, addrs []netip.Prefix) {
	m.rec.add("%s addrs %s %v", m.name, name, addrs)
	if len(addrs) > 0 {
		addrs[0] = netip.Prefix{} // the observer's own copy
	}
}

// observingDriver is a fakeDriver that observes interfaces.
type observingDriver struct{ fakeDriver }

func (d *observingDriver) OnLink(l kernel.Link, s kernel.LinkState) {
	d.rec.add("%s link %s %v", d.name, l.Name, s)
}

func (d *observingDriver) OnAddrs(name string, addrs []netip.Prefix) {
	d.rec.add("%s addrs %s %v", d.name, name, addrs)
}

// bothObserver is an observing manager that is also a driver, registered
// as both: it observes once.
type bothObserver struct{ observingManager }

func (b *bothObserver) Apply(context.Context) (ApplyResult, error) { return ApplyResult{}, nil }
func (b *bothObserver) QueueResync()                               {}
func (b *bothObserver) Phase() Phase                               { return PhaseTables }

func TestInterfaceUpdatesReachEveryObserverOnceInOrder(t *testing.T) {
	rec := &recorder{}
	h := newHarness(t, Options{})
	m := &observingManager{fakeManager: fakeManager{name: "m", rec: rec}}
	plain := &fakeManager{name: "plain", keepMsgs: true}
	d := &observingDriver{fakeDriver{name: "d", phase: PhaseRoutes}}
	d.rec = rec
	p := &bothObserver{observingManager{fakeManager: fakeManager{name: "p", rec: rec}}}
	h.addManager(m)
	h.addManager(plain)
	h.addManager(p)
	h.addDriver(d)
	h.addDriver(p)

	// Before Run: kept, and delivered in order with the messages.
	eth0 := kernel.Link{Name: "eth0", Index: 2, MTU: 1500, AdminUp: true, Running: true}
	h.loop.OnLink(eth0, kernel.LinkUp)
	addrs := []netip.Prefix{netip.MustParsePrefix("192.0.2.1/24"), netip.MustParsePrefix("2001:db8::1/64")}
	h.loop.OnAddrs("eth0", addrs)
	addrs[1] = netip.MustParsePrefix("198.51.100.1/24") // the loop keeps its own copy
	require.NoError(t, h.loop.Send(t.Context(), "hello"))
	h.loop.OnLink(kernel.Link{Name: "veth1", Index: 7, MTU: 1450}, kernel.LinkDown)
	h.loop.InterfacesInSync()
	h.start()

	assert.Equal(t, []string{
		"m link eth0/2 up mtu=1500 up=true",
		"p link eth0/2 up mtu=1500 up=true",
		"d link eth0 up",
		"m addrs eth0 [192.0.2.1/24 2001:db8::1/64]",
		"p addrs eth0 [192.0.2.1/24 2001:db8::1/64]",
		"d addrs eth0 [192.0.2.1/24 2001:db8::1/64]", // its own copy: m changed its one
		"m msg hello",
		"p msg hello",
		"m link veth1/7 down mtu=1450 up=false",
		"p link veth1/7 down mtu=1450 up=false",
		"d link veth1 down",
		"m msg {}",
		"p msg {}",
	}, rec.list(), "each observer once (p is a manager and a driver), in registration order, in order with the messages")
	assert.Equal(t, []any{"hello", InterfacesInSync{}}, plain.messages(), "managers' OnUpdate never sees the interface updates")

	// An update marks the loop dirty: a pass follows, as after a message.
	h.loop.DatastoreInSync()
	h.settle(func() bool { return h.applies() > 0 })
	before := h.applies()
	h.loop.OnLink(kernel.Link{Name: "veth1", Index: 7}, kernel.LinkGone)
	h.settle(func() bool { return h.applies() > before })
	assert.Contains(t, rec.list(), "d link veth1 gone")
}

func TestPanickingObserverIsReportedAndTheOthersGoOn(t *testing.T) {
	rec := &recorder{}
	h := newHarness(t, Options{})
	bad := &observingManager{fakeManager: fakeManager{name: "bad", rec: rec}, panicOn: "eth0"}
	good := &observingManager{fakeManager: fakeManager{name: "good", rec: rec}}
	h.addManager(bad)
	h.addManager(good)
	h.start()
	h.loop.OnLink(kernel.Link{Name: "eth0", Index: 2}, kernel.LinkDown)
	h.loop.OnLink(kernel.Link{Name: "eth1", Index: 3}, kernel.LinkDown)
	h.settle(func() bool { return len(rec.list()) == 3 })
	assert.Equal(t, []string{"good link eth0/2 down mtu=0 up=false", "bad link eth1/3 down mtu=0 up=false", "good link eth1/3 down mtu=0 up=false"}, rec.list())
	err := h.loop.Health().LastError
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, err.Error(), fmt.Sprintf("observer bad %T", linkUpdate{}))
}

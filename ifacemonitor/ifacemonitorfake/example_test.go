//go:build linux

package ifacemonitorfake_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/ifacemonitor/ifacemonitorfake"
	"golang.org/x/sys/unix"
)

// agent is the code under test: it stops using an uplink that goes down.
type agent struct {
	uplinks map[string]bool // name → usable
	changed chan string
}

func (a *agent) onLinkState(u ifacemonitor.LinkUpdate) {
	usable := u.State == ifacemonitor.StateUp
	if was, known := a.uplinks[u.Name]; known && was == usable {
		return
	}
	a.uplinks[u.Name] = usable
	fmt.Printf("agent: %s is %s, usable=%v\n", u.Name, u.State, usable)
	a.changed <- u.Name
}

// An agent's reaction to a link going down, tested without root: the
// monitor runs on the fake kernel, and the test changes the fake as an
// administrator would.
func Example() {
	k := ifacemonitorfake.New()
	if _, err := k.AddLink("eth0", "device", 1500); err != nil {
		fmt.Println(err)
		return
	}
	_ = k.SetUp("eth0")
	_ = k.AddAddr("eth0", netip.MustParsePrefix("10.0.0.5/24"))

	a := &agent{uplinks: map[string]bool{}, changed: make(chan string, 8)}
	inSync := make(chan struct{})
	m, err := ifacemonitor.New(ifacemonitor.Options{
		Source:      k, // instead of Handle and Namespace
		OnLinkState: a.onLinkState,
		OnInSync:    func() { close(inSync) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := m.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	wait := func(ch <-chan string) {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			fmt.Println("timed out")
		}
	}
	<-inSync
	wait(a.changed) // eth0 up, from the first listing

	_ = k.SetDown("eth0")
	wait(a.changed)
	fmt.Println("usable after:", a.uplinks["eth0"])

	cancel()
	<-m.Done()
	// Output:
	// agent: eth0 is up, usable=true
	// agent: eth0 is down, usable=false
	// usable after: false
}

// The kernel (before 6.2) refuses to rename a link that is up.
func ExampleKernel_Rename() {
	k := ifacemonitorfake.New()
	_, _ = k.AddLink("eth0", "veth", 1500)
	_ = k.SetUp("eth0")
	err := k.Rename("eth0", "uplink0")
	fmt.Println(errors.Is(err, unix.EBUSY))

	_ = k.SetDown("eth0")
	fmt.Println(k.Rename("eth0", "uplink0"))
	l, _ := k.Link("uplink0")
	fmt.Println(l.Name, l.Index)
	// Output:
	// true
	// <nil>
	// uplink0 1
}

// Overflow loses the events not yet delivered; the stream says so with a
// Resync, after which a listing shows the state.
func ExampleKernel_Overflow() {
	k := ifacemonitorfake.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, _ := k.Subscribe(ctx)
	first := <-events
	fmt.Println("first is a resync:", first.Resync != nil)

	_, _ = k.AddLink("eth0", "veth", 1500) // its RTM_NEWLINK is queued…
	k.Overflow()                           // …and lost
	ev := <-events
	fmt.Println("overflow:", errors.Is(ev.Resync.Reason, ifacemonitor.ErrOverflow))
	links, _ := k.ListLinks(ctx)
	fmt.Println("listed:", links[0].Attrs().Name)
	// Output:
	// first is a resync: true
	// overflow: true
	// listed: eth0
}

// A failed listing is retried by the monitor; Lists counts both.
func ExampleKernel_FailNextList() {
	k := ifacemonitorfake.New()
	k.FailNextList(unix.EINTR)
	_, err := k.ListAddrs(context.Background())
	fmt.Println(err)
	_, err = k.ListAddrs(context.Background())
	fmt.Println(err, k.Lists())
	// Output:
	// interrupted system call
	// <nil> 2
}

// Inspection shows what the kernel holds, as an agent's test asserts it.
func ExampleKernel_Addrs() {
	k := ifacemonitorfake.New()
	_, _ = k.AddLink("eth0", "veth", 1500)
	_ = k.SetUp("eth0")
	_ = k.AddAddr("eth0", netip.MustParsePrefix("fd00::5/64"))
	_ = k.AddAddr("eth0", netip.MustParsePrefix("10.0.0.5/24"))
	addrs, _ := k.Addrs("eth0")
	fmt.Println(addrs)
	_ = k.SetDown("eth0") // IPv6 addresses go with it
	addrs, _ = k.Addrs("eth0")
	fmt.Println(addrs, k.Links()[0].Up)
	// Output:
	// [10.0.0.5/24 fd00::5/64]
	// [10.0.0.5/24] false
}

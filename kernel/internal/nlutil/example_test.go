//go:build linux

package nlutil_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nodeplane/nodeplane/kernel/internal/nlutil"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The list helpers take a handle bound to the namespace to read.
func ExampleLinkList() {
	ns, err := netns.GetFromName("example") // needs root and an existing namespace
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	links, err := nlutil.LinkList(context.Background(), h)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range links {
		fmt.Println(l.Attrs().Index, l.Attrs().Name)
	}
}

// A monitor's loop: on every Resync, re-list what it names and diff; apply
// events in between. A barrier placed before the listing tells the events
// older than the listing (before the barrier) from the newer ones. Needs
// root (for the namespace and the forced buffer), so it has no Output.
func ExampleWatcher() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, err := netns.GetFromName("example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()

	w, err := nlutil.NewWatcher(nlutil.WatchOptions{
		Kinds:     nlutil.Links | nlutil.Addrs,
		Namespace: &ns,
		Logger:    slog.Default(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	events, err := w.Start(ctx) // subscribes in the background
	if err != nil {
		fmt.Println(err)
		return
	}
	var listedAt uint64      // the barrier placed before the last listing; 0: none pending
	for ev := range events { // closed after cancel, once everything stopped
		switch {
		case ev.Resync != nil:
			if errors.Is(ev.Resync.Reason, nlutil.ErrOverflow) {
				fmt.Println("events were dropped; re-listing")
			}
			listedAt, _ = w.Barrier() // 0 if it failed: apply every event
			if ev.Resync.Kinds&nlutil.Links != 0 {
				links, err := nlutil.LinkList(ctx, h)
				fmt.Println("links now:", len(links), err) // diff against known state here
			}
			if ev.Resync.Kinds&nlutil.Addrs != 0 {
				addrs, err := nlutil.AddrList(ctx, h, nil, netlink.FAMILY_ALL)
				fmt.Println("addresses now:", len(addrs), err)
			}
		case ev.Barrier != nil:
			if ev.Barrier.ID == listedAt {
				listedAt = 0
			}
		case ev.Msg != nil && listedAt == 0:
			fmt.Println("message", ev.Msg.Header.Type) // decode and apply it here
		case ev.Msg != nil:
			// Older than the listing, which shows its change already.
		case ev.Err != nil:
			fmt.Println("still retrying:", ev.Err)
		}
	}
}

func ExampleKinds_String() {
	fmt.Println(nlutil.Links | nlutil.Routes)
	// Output:
	// links|routes
}

// NewWatcher rejects bad options before anything starts.
func ExampleNewWatcher() {
	_, err := nlutil.NewWatcher(nlutil.WatchOptions{})
	fmt.Println(errors.Is(err, nlutil.ErrInvalidOptions))
	// Output:
	// true
}

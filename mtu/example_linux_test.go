//go:build linux

package mtu_test

import (
	"context"
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/mtu"
)

func ExampleNetlinkLister() {
	// A handle for the calling process's namespace; netlink.NewHandleAt
	// binds one to another namespace. Listing links needs no privileges.
	h, err := netlink.NewHandle()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	links, err := mtu.NetlinkLister{Handle: h}.Links(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range links {
		if l.Name == "lo" {
			fmt.Println("found lo")
		}
	}

	// The Detector a node agent would use.
	det, err := mtu.NewDetector(mtu.DetectorOptions{Lister: mtu.NetlinkLister{Handle: h}})
	fmt.Println(det != nil, err)
	// Output:
	// found lo
	// true <nil>
}

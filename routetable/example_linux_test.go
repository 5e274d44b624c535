//go:build linux

package routetable_test

import (
	"context"
	"fmt"

	"github.com/vishvananda/netns"

	"github.com/nodeplane/nodeplane/routetable"
)

// OpenKernel opens the real kernel of a network namespace (it needs
// CAP_NET_ADMIN there); the caller closes it. This example only compiles:
// it needs root and an existing namespace.
func ExampleOpenKernel() {
	ns, err := netns.GetFromName("example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	k, err := routetable.OpenKernel(ns)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer k.Close()
	tbl, err := routetable.New(routetable.Options{Kernel: k, Family: routetable.IPv4, Table: routetable.TableMain, InterfacePatterns: []string{`^np-`}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := tbl.Apply(context.Background()); err != nil {
		fmt.Println(err)
	}
}

//go:build linux

package netnsutil_test

import (
	"fmt"

	"github.com/vishvananda/netns"

	"github.com/nodeplane/nodeplane/internal/netnsutil"
)

// Do refuses a handle that is not open, before starting anything.
func ExampleDo() {
	err := netnsutil.Do(netns.None(), func() error { return nil })
	fmt.Println(err)
	// Output: netnsutil: network namespace handle is not open
}

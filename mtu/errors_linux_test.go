//go:build linux

package mtu_test

import (
	"context"
	"testing"

	"github.com/nodeplane/nodeplane/mtu"
)

// NetlinkLister's errors name the package once, also through Detect, which
// does not add a second "listing links failed".
func TestNetlinkListerErrorText(t *testing.T) {
	//lint:ignore SA1012 a nil context is documented to mean Background
	_, err := mtu.NetlinkLister{}.Links(nil)
	assertPackageError(t, err, "mtu: invalid input: NetlinkLister.Handle is nil", mtu.ErrInvalid, mtu.ErrListLinks)

	d, derr := mtu.NewDetector(mtu.DetectorOptions{Lister: mtu.NetlinkLister{}})
	if derr != nil {
		t.Fatal(derr)
	}
	_, err = d.Detect(context.Background())
	assertPackageError(t, err, "mtu: invalid input: NetlinkLister.Handle is nil", mtu.ErrInvalid, mtu.ErrListLinks)
}

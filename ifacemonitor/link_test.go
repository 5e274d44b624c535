package ifacemonitor_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/kernel"
)

func TestLinkUpdateLink(t *testing.T) {
	for _, st := range []kernel.LinkState{kernel.LinkUp, kernel.LinkDown, kernel.LinkGone} {
		u := ifacemonitor.LinkUpdate{Name: "eth0", Index: 2, State: st, MTU: 9000, Kind: kernel.KindVeth,
			Encap: kernel.EncapEthernet, OldName: "eth9"}
		l := u.Link()
		assert.Equal(t, kernel.Link{Name: "eth0", Index: 2, MTU: 9000, Kind: kernel.KindVeth, Encap: kernel.EncapEthernet,
			AdminUp: st == kernel.LinkUp, Running: st == kernel.LinkUp}, l, st)
		if st != kernel.LinkGone {
			assert.Equal(t, st, l.State(), "the link's flags say what the update says")
		}
	}
}

package overlay

import (
	"errors"
	"testing"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
)

// TestText: Mode and RouteKind read back from their text and refuse another
// text with the valid names; ManagerStats marshals LastRejected as its text.
func TestText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]Mode{"Tunnel": Tunnel, "CrossSubnet": CrossSubnet, "Direct": Direct})
	textformtest.Enum(t, ".", map[string]RouteKind{
		"NoRoute": NoRoute, "TunnelRoute": TunnelRoute, "DirectRoute": DirectRoute, "Blackhole": Blackhole,
	})
	textformtest.Report(t, ManagerStats{})
	textformtest.Report(t, ManagerStats{Rejected: 1, LastRejected: errors.New("vxlan: invalid input: block 10.0.0.1/24")})
}

package endpoints_test

import (
	"fmt"
	"testing"

	"github.com/nodeplane/nodeplane/endpoints"
	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/ipfamily"
)

func TestStateText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]endpoints.State{
		"StateProgrammed": endpoints.StateProgrammed, "StateInterfaceMissing": endpoints.StateInterfaceMissing,
		"StateInterfaceDown": endpoints.StateInterfaceDown, "StateError": endpoints.StateError,
	})
}

// TestStatusJSON: a Status's Err marshals as its text, not {}.
func TestStatusJSON(t *testing.T) {
	textformtest.Report(t, endpoints.Status{})
	textformtest.Report(t, endpoints.Status{ID: "pod-a", Iface: "cali1", Family: ipfamily.IPv4, State: endpoints.StateError,
		Err: fmt.Errorf("%w: net/ipv4/conf/cali1/proxy_arp: read-only", endpoints.ErrSysctl)})
}

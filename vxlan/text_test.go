package vxlan_test

import (
	"github.com/nodeplane/nodeplane/cluster"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/vxlan"
)

// TestModeText: every Mode reads back from its text (text, JSON value,
// JSON map key); another text is refused with the valid names, wraps
// ErrInvalidOptions, and leaves the Mode as it was.
func TestModeText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]vxlan.Mode{"Always": vxlan.Always, "CrossSubnet": vxlan.CrossSubnet, "Never": vxlan.Never})
	m := vxlan.CrossSubnet
	require.ErrorIs(t, m.UnmarshalText([]byte("Always")), vxlan.ErrInvalidOptions)
	require.Equal(t, vxlan.CrossSubnet, m)
}

// TestStatsJSON: the error of the last rejected message marshals as its
// text (null when none), the other counters as encoding/json writes them.
func TestStatsJSON(t *testing.T) {
	textformtest.Report(t, vxlan.Stats{Nodes: 2})
	textformtest.Report(t, vxlan.Stats{Rejected: 1, LastRejected: (&cluster.Node{}).Validate()})
}

package ipip_test

import (
	"github.com/nodeplane/nodeplane/cluster"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/ipip"
)

// TestModeText: every Mode reads back from its text (text, JSON value,
// JSON map key); another text is refused with the valid names, wraps
// ErrInvalidOptions, and leaves the Mode as it was.
func TestModeText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]ipip.Mode{"Always": ipip.Always, "CrossSubnet": ipip.CrossSubnet, "Never": ipip.Never})
	m := ipip.CrossSubnet
	require.ErrorIs(t, m.UnmarshalText([]byte("Always")), ipip.ErrInvalidOptions)
	require.Equal(t, ipip.CrossSubnet, m)
}

// TestStatsJSON: the error of the last rejected message marshals as its
// text (null when none), the other counters as encoding/json writes them.
func TestStatsJSON(t *testing.T) {
	textformtest.Report(t, ipip.Stats{Nodes: 2})
	textformtest.Report(t, ipip.Stats{Rejected: 1, LastRejected: (&cluster.Node{}).Validate()})
}

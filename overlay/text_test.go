package overlay_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/overlay"
)

// TestStatsJSON: the error of the last rejected message marshals as its
// text (null when none), the other counters as encoding/json writes them.
func TestStatsJSON(t *testing.T) {
	textformtest.Report(t, overlay.Stats{Nodes: 2})
	textformtest.Report(t, overlay.Stats{Rejected: 1, LastRejected: (&cluster.Node{}).Validate()})
}

package harness_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/bench/internal/harness"
	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
)

func TestRoleText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]harness.Role{"Ours": harness.Ours, "Peer": harness.Peer, "Floor": harness.Floor})
}

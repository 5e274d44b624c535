package routetable_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/routetable"
)

func TestTargetTypeText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]routetable.TargetType{
		"TargetUnicast": routetable.TargetUnicast, "TargetOnlink": routetable.TargetOnlink, "TargetLocal": routetable.TargetLocal,
		"TargetBlackhole": routetable.TargetBlackhole, "TargetUnreachable": routetable.TargetUnreachable,
		"TargetProhibit": routetable.TargetProhibit, "TargetThrow": routetable.TargetThrow,
	})
}

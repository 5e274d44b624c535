package delta_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/routetable/internal/delta"
)

func TestIterActionText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]delta.IterAction{"IterActionNoOp": delta.IterActionNoOp, "IterActionUpdateDataplane": delta.IterActionUpdateDataplane})
}

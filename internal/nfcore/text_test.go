package nfcore_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/nfcore"
	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
)

func TestEnumText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]nfcore.BreakReason{"BreakUnknown": nfcore.BreakUnknown, "BreakLoop": nfcore.BreakLoop})
}

package floatingips_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/floatingips"
	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
)

func TestJumpText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]floatingips.Jump{"JumpInsert": floatingips.JumpInsert, "JumpAppend": floatingips.JumpAppend, "JumpNone": floatingips.JumpNone})
}

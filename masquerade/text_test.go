package masquerade_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/masquerade"
)

func TestJumpText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]masquerade.Jump{"JumpInsert": masquerade.JumpInsert, "JumpAppend": masquerade.JumpAppend, "JumpNone": masquerade.JumpNone})
}

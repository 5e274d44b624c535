package netfilter_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/netfilter"
)

func TestJumpPlacementText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]netfilter.JumpPlacement{
		"JumpInsert": netfilter.JumpInsert, "JumpAppend": netfilter.JumpAppend, "JumpNone": netfilter.JumpNone,
	})
	require.Equal(t, "JumpPlacement(3)", netfilter.JumpPlacement(3).String())
}

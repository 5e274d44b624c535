package wireguardfake_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/wireguard/wireguardfake"
)

func TestOpText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]wireguardfake.Op{"OpOpen": wireguardfake.OpOpen, "OpState": wireguardfake.OpState, "OpConfigure": wireguardfake.OpConfigure})
}

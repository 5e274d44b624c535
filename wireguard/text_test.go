package wireguard_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/wireguard"
)

// TestModeText: every Mode reads back from its text (text, JSON value,
// JSON map key); another text is refused with the valid names, wraps
// ErrInvalidOptions, and leaves the Mode as it was.
func TestModeText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]wireguard.Mode{"ModeAuto": wireguard.ModeAuto, "ModeKernel": wireguard.ModeKernel, "ModeUserspace": wireguard.ModeUserspace})
	m := wireguard.ModeKernel
	require.ErrorIs(t, m.UnmarshalText([]byte("Userspace")), wireguard.ErrInvalidOptions)
	require.Equal(t, wireguard.ModeKernel, m)

	j, err := json.Marshal(wireguard.Status{Mode: wireguard.ModeUserspace})
	require.NoError(t, err)
	require.Contains(t, string(j), `"Mode":"userspace"`)
}

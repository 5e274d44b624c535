package wireguard_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/wireguard"
)

// TestModeText: every Mode reads back from its text, as a text, a JSON
// value and a JSON map key; another text is refused with the valid names,
// and the Mode is left as it was. A Status names its Mode.
func TestModeText(t *testing.T) {
	for _, m := range []wireguard.Mode{wireguard.ModeAuto, wireguard.ModeKernel, wireguard.ModeUserspace} {
		b, err := m.MarshalText()
		require.NoError(t, err)
		require.Equal(t, m.String(), string(b))
		var got wireguard.Mode = 99
		require.NoError(t, got.UnmarshalText(b))
		require.Equal(t, m, got)
		j, err := json.Marshal(map[wireguard.Mode]wireguard.Mode{m: m})
		require.NoError(t, err)
		require.Equal(t, `{"`+m.String()+`":"`+m.String()+`"}`, string(j))
		var back map[wireguard.Mode]wireguard.Mode
		require.NoError(t, json.Unmarshal(j, &back))
		require.Equal(t, map[wireguard.Mode]wireguard.Mode{m: m}, back)
	}
	m := wireguard.ModeKernel
	err := m.UnmarshalText([]byte("Userspace"))
	require.ErrorIs(t, err, wireguard.ErrInvalidOptions)
	require.EqualError(t, err, `wireguard: unknown Mode "Userspace"; valid: auto, kernel, userspace`)
	require.Equal(t, wireguard.ModeKernel, m)
	require.Error(t, json.Unmarshal([]byte(`"both"`), &m))
	require.Equal(t, wireguard.ModeKernel, m)

	j, err := json.Marshal(wireguard.Status{Mode: wireguard.ModeUserspace})
	require.NoError(t, err)
	require.Contains(t, string(j), `"Mode":"userspace"`)
}

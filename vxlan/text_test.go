package vxlan_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/vxlan"
)

// TestModeText: every Mode reads back from its text, as a text, a JSON
// value and a JSON map key; another text is refused with the valid names,
// and the Mode is left as it was.
func TestModeText(t *testing.T) {
	for _, m := range []vxlan.Mode{vxlan.Always, vxlan.CrossSubnet, vxlan.Never} {
		b, err := m.MarshalText()
		require.NoError(t, err)
		require.Equal(t, m.String(), string(b))
		var got vxlan.Mode = 99
		require.NoError(t, got.UnmarshalText(b))
		require.Equal(t, m, got)
		j, err := json.Marshal(map[vxlan.Mode]vxlan.Mode{m: m})
		require.NoError(t, err)
		require.Equal(t, `{"`+m.String()+`":"`+m.String()+`"}`, string(j))
		var back map[vxlan.Mode]vxlan.Mode
		require.NoError(t, json.Unmarshal(j, &back))
		require.Equal(t, map[vxlan.Mode]vxlan.Mode{m: m}, back)
	}
	m := vxlan.CrossSubnet
	err := m.UnmarshalText([]byte("Always"))
	require.ErrorIs(t, err, vxlan.ErrInvalidOptions)
	require.EqualError(t, err, `vxlan: unknown Mode "Always"; valid: always, cross-subnet, never`)
	require.Equal(t, vxlan.CrossSubnet, m)
	require.Error(t, json.Unmarshal([]byte(`"sometimes"`), &m))
	require.Equal(t, vxlan.CrossSubnet, m)
}

// TestStatsJSON: the error of the last rejected message marshals as its
// text (null when none), the other counters as encoding/json writes them.
func TestStatsJSON(t *testing.T) {
	j, err := json.Marshal(vxlan.Stats{Nodes: 2})
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(j, &doc))
	require.Contains(t, doc, "LastRejected")
	require.Nil(t, doc["LastRejected"])
	require.Equal(t, 2.0, doc["Nodes"])
	require.Contains(t, doc, "Driver")

	bad := vxlan.VTEP{}
	verr := bad.Validate()
	require.Error(t, verr)
	j, err = json.Marshal(vxlan.Stats{Rejected: 1, LastRejected: verr})
	require.NoError(t, err)
	doc = nil
	require.NoError(t, json.Unmarshal(j, &doc))
	require.Equal(t, verr.Error(), doc["LastRejected"])
	require.Equal(t, 1.0, doc["Rejected"])
}

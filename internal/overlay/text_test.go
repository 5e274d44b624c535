package overlay

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestText: Mode and RouteKind read back from their text (text, JSON value,
// JSON map key), refuse another text with the valid names and stay as they
// were; ManagerStats marshals LastRejected as its text.
func TestText(t *testing.T) {
	for _, m := range []Mode{Tunnel, CrossSubnet, Direct} {
		roundTrip(t, m, new(Mode))
	}
	for _, k := range []RouteKind{NoRoute, TunnelRoute, DirectRoute, Blackhole} {
		roundTrip(t, k, new(RouteKind))
	}
	m := Direct
	require.EqualError(t, m.UnmarshalText([]byte("always")), `overlay: unknown Mode "always"; valid: tunnel, cross-subnet, direct`)
	require.Equal(t, Direct, m)
	k := Blackhole
	require.EqualError(t, k.UnmarshalText([]byte("local")), `overlay: unknown RouteKind "local"; valid: none, tunnel, direct, blackhole`)
	require.Equal(t, Blackhole, k)

	j, err := json.Marshal(ManagerStats{Rejected: 1, LastRejected: errors.New("vxlan: invalid input: block 10.0.0.1/24")})
	require.NoError(t, err)
	require.Contains(t, string(j), `"LastRejected":"vxlan: invalid input: block 10.0.0.1/24"`)
	require.Contains(t, string(j), `"Rejected":1`)
	j, err = json.Marshal(ManagerStats{})
	require.NoError(t, err)
	require.Contains(t, string(j), `"LastRejected":null`)
}

type textual interface {
	comparable
	String() string
	MarshalText() ([]byte, error)
}

func roundTrip[T textual, P interface {
	*T
	UnmarshalText([]byte) error
}](t *testing.T, v T, into P) {
	t.Helper()
	b, err := v.MarshalText()
	require.NoError(t, err)
	require.Equal(t, v.String(), string(b))
	require.NoError(t, into.UnmarshalText(b))
	require.Equal(t, v, *into)
	j, err := json.Marshal(map[T]T{v: v})
	require.NoError(t, err)
	require.Equal(t, `{"`+v.String()+`":"`+v.String()+`"}`, string(j))
	var back map[T]T
	require.NoError(t, json.Unmarshal(j, &back))
	require.Equal(t, map[T]T{v: v}, back)
}

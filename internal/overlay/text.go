package overlay

import (
	"encoding/json"
	"fmt"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// MarshalText returns String's text: "tunnel", "cross-subnet" or "direct".
// It implements encoding.TextMarshaler.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText sets m to the Mode whose String is text; anything else is
// an error that names the valid modes, and m is unchanged. It implements
// encoding.TextUnmarshaler.
func (m *Mode) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, Tunnel, CrossSubnet, Direct)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// String returns "none", "tunnel", "direct" or "blackhole"
// (RouteKind(n) for another value).
func (k RouteKind) String() string {
	if names := []string{"none", "tunnel", "direct", "blackhole"}; int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("RouteKind(%d)", uint8(k))
}

// MarshalText returns String's text. It implements encoding.TextMarshaler.
func (k RouteKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText sets k to the RouteKind whose String is text; anything else
// is an error that names the valid kinds, and k is unchanged. It implements
// encoding.TextUnmarshaler.
func (k *RouteKind) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, NoRoute, TunnelRoute, DirectRoute, Blackhole)
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// MarshalJSON encodes s as encoding/json does, but with LastRejected as
// its text (null for none).
func (s ManagerStats) MarshalJSON() ([]byte, error) {
	type plain ManagerStats
	return json.Marshal(struct {
		plain
		LastRejected *string
	}{plain(s), textform.Error(s.LastRejected)})
}

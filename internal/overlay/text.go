package overlay

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The text form of the package's enums and of the errors in its counters:
// an enum's String is its text (MarshalText), and reads back
// (UnmarshalText) through ParseText; an error marshals to JSON as its text
// (ErrorText), where encoding/json would write {}.

// ParseText returns the one of values whose String is text. Otherwise it
// returns an error that says what (such as `vxlan: unknown Mode`), quotes
// text and names the String of each of values.
func ParseText[T fmt.Stringer](what string, text []byte, values ...T) (T, error) {
	names := make([]string, len(values))
	for i, v := range values {
		if v.String() == string(text) {
			return v, nil
		}
		names[i] = v.String()
	}
	var zero T
	return zero, fmt.Errorf("%s %q; valid: %s", what, text, strings.Join(names, ", "))
}

// ErrorText returns err's text for a JSON document: a pointer to
// err.Error(), or nil (null) for a nil error.
func ErrorText(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// MarshalText returns String's text: "tunnel", "cross-subnet" or "direct".
// It implements encoding.TextMarshaler.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText sets m to the Mode whose String is text; anything else is
// an error that names the valid modes, and m is unchanged. It implements
// encoding.TextUnmarshaler.
func (m *Mode) UnmarshalText(text []byte) error {
	v, err := ParseText("overlay: unknown Mode", text, Tunnel, CrossSubnet, Direct)
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
	v, err := ParseText("overlay: unknown RouteKind", text, NoRoute, TunnelRoute, DirectRoute, Blackhole)
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
	}{plain(s), ErrorText(s.LastRejected)})
}

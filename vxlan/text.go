package vxlan

import (
	"encoding/json"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/textform"
)

// MarshalText returns String's text: "always", "cross-subnet" or "never".
// It implements encoding.TextMarshaler, so a Mode reads the same in a flag,
// a config file and a JSON document.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText sets m to the Mode whose String is text (case-sensitive);
// anything else is an error wrapping ErrInvalidOptions that names the
// valid modes, and m is unchanged. It implements encoding.TextUnmarshaler.
func (m *Mode) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, Always, CrossSubnet, Never)
	if err != nil {
		return errs.Also(err, ErrInvalidOptions)
	}
	*m = v
	return nil
}

// MarshalJSON encodes s as encoding/json does, but with LastRejected as
// its text (null for none), which encoding/json would write as {}.
func (s Stats) MarshalJSON() ([]byte, error) {
	type plain Stats
	return json.Marshal(struct {
		plain
		LastRejected *string
	}{plain(s), textform.Error(s.LastRejected)})
}

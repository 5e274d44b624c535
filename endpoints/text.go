package endpoints

import (
	"encoding/json"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// MarshalText returns String's text, such as "programmed" or
// "interface-down" (encoding.TextMarshaler); the zero State gives "unknown",
// which does not unmarshal.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText sets s to the state whose String is text, such as
// "programmed" (encoding.TextUnmarshaler). Any other text is an error, and
// s is left as it was.
func (s *State) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, StateProgrammed, StateInterfaceMissing, StateInterfaceDown, StateError)
	if err == nil {
		*s = v
	}
	return err
}

// MarshalJSON encodes s as encoding/json does, but with Err as its text
// (null when nil), which it would write as {}.
func (s Status) MarshalJSON() ([]byte, error) {
	type plain Status
	return json.Marshal(struct {
		plain
		Err *string
	}{plain(s), textform.Error(s.Err)})
}

package harness

import "github.com/nodeplane/nodeplane/internal/textform"

// MarshalText returns String's text: "ours", "peer" or "floor"
// (encoding.TextMarshaler).
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText sets r to the role whose String is text: "ours", "peer" or
// "floor" (encoding.TextUnmarshaler). Any other text is an error, and r is
// left as it was.
func (r *Role) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, Ours, Peer, Floor)
	if err == nil {
		*r = v
	}
	return err
}

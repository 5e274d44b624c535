package routetable

import "github.com/nodeplane/nodeplane/internal/textform"

// MarshalText returns String's text, such as "unicast" or "blackhole"
// (encoding.TextMarshaler); an invalid type gives "TargetType(n)", which
// does not unmarshal.
func (t TargetType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText sets t to the type whose String is text, such as "onlink"
// (encoding.TextUnmarshaler). Any other text is an error, and t is left as
// it was.
func (t *TargetType) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, TargetUnicast, TargetOnlink, TargetLocal, TargetBlackhole, TargetUnreachable,
		TargetProhibit, TargetThrow)
	if err == nil {
		*t = v
	}
	return err
}

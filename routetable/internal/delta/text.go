package delta

import "github.com/nodeplane/nodeplane/internal/textform"

// MarshalText returns String's text: "NoOp" or "UpdateDataplane"
// (encoding.TextMarshaler).
func (a IterAction) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText sets a to the action whose String is text: "NoOp" or
// "UpdateDataplane" (encoding.TextUnmarshaler). Any other text is an error,
// and a is left as it was.
func (a *IterAction) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, IterActionNoOp, IterActionUpdateDataplane)
	if err == nil {
		*a = v
	}
	return err
}

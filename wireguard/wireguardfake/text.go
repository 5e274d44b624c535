package wireguardfake

import "github.com/nodeplane/nodeplane/internal/textform"

// String returns the call's name: "Open", "State" or "Configure".
func (o Op) String() string { return string(o) }

// MarshalText returns String's text (encoding.TextMarshaler).
func (o Op) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText sets o to the Op whose String is text: "Open", "State" or
// "Configure" (encoding.TextUnmarshaler). Any other text is an error, and o
// is left as it was.
func (o *Op) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, OpOpen, OpState, OpConfigure)
	if err == nil {
		*o = v
	}
	return err
}

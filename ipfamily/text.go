package ipfamily

import "github.com/nodeplane/nodeplane/internal/textform"

// MarshalText returns String's text, "IPv4" or "IPv6" (encoding.TextMarshaler);
// an invalid family gives "Family(n)", which does not unmarshal.
func (f Family) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText sets f to the family whose String is text, "IPv4" or "IPv6"
// (encoding.TextUnmarshaler). Any other text is an error, and f is left as
// it was.
func (f *Family) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, All[:]...)
	if err == nil {
		*f = v
	}
	return err
}

package netfilter

import "github.com/nodeplane/nodeplane/internal/textform"

// String returns the type as ipset spells it, such as "hash:ip,port".
func (t SetType) String() string { return string(t) }

// MarshalText returns String's text (encoding.TextMarshaler).
func (t SetType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText sets t to the supported type whose String is text, such as
// "hash:net" (encoding.TextUnmarshaler). Any other text is an error, and t
// is left as it was.
func (t *SetType) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, HashIP, HashNet, HashIPPort, HashNetNet, BitmapPort)
	if err == nil {
		*t = v
	}
	return err
}

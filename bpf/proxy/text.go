package proxy

import "github.com/nodeplane/nodeplane/internal/textform"

// MarshalText returns String's text, "TCP" or "UDP" (the zero Protocol is
// TCP) (encoding.TextMarshaler); another protocol gives "protocol(n)",
// which does not unmarshal.
func (p Protocol) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText sets p to the protocol whose String is text, TCP for "TCP"
// and UDP for "UDP" (encoding.TextUnmarshaler). Any other text is an error,
// and p is left as it was.
func (p *Protocol) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, TCP, UDP)
	if err == nil {
		*p = v
	}
	return err
}

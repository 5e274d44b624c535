package kerneltest

import "github.com/nodeplane/nodeplane/internal/textform"

// MarshalText returns String's text: "bridge" or "veth"
// (encoding.TextMarshaler).
func (u Underlay) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText sets u to the underlay whose String is text: "bridge" or
// "veth" (encoding.TextUnmarshaler). Any other text is an error, and u is
// left as it was.
func (u *Underlay) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, UnderlayBridge, UnderlayVeth)
	if err == nil {
		*u = v
	}
	return err
}

// MarshalText returns String's text: "dual", "ipv4" or "ipv6"
// (encoding.TextMarshaler).
func (s Stack) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText sets s to the stack whose String is text: "dual", "ipv4" or
// "ipv6" (encoding.TextUnmarshaler). Any other text is an error, and s is
// left as it was.
func (s *Stack) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, DualStack, IPv4Only, IPv6Only)
	if err == nil {
		*s = v
	}
	return err
}

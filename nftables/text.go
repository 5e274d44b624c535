package nftables

import "github.com/nodeplane/nodeplane/internal/textform"

// String returns the role's name, such as "filter" or "nat".
func (r Role) String() string { return string(r) }

// MarshalText returns String's text (encoding.TextMarshaler).
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText sets r to the role whose String is text: "filter", "nat",
// "mangle" or "raw" (encoding.TextUnmarshaler). Any other text is an error,
// and r is left as it was.
func (r *Role) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, Filter, NAT, Mangle, Raw)
	if err == nil {
		*r = v
	}
	return err
}

// MarshalText returns String's text: "accept" or "drop"
// (encoding.TextMarshaler).
func (p Policy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText sets p to the policy whose String is text: "accept" or
// "drop" (encoding.TextUnmarshaler). Any other text is an error, and p is
// left as it was.
func (p *Policy) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, PolicyAccept, PolicyDrop)
	if err == nil {
		*p = v
	}
	return err
}

// MarshalText returns String's text, such as "inet_service"
// (encoding.TextMarshaler); an invalid type gives "KeyType(n)", which does
// not unmarshal.
func (t KeyType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText sets t to the key type whose String is text: "addr",
// "inet_proto", "inet_service", "mark" or "ifname"
// (encoding.TextUnmarshaler). Any other text is an error, and t is left as
// it was.
func (t *KeyType) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, TypeAddr, TypeProto, TypePort, TypeMark, TypeIface)
	if err == nil {
		*t = v
	}
	return err
}

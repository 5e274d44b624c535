package iptables

import "github.com/nodeplane/nodeplane/internal/textform"

// MarshalText returns String's text, "legacy" or "nft"
// (encoding.TextMarshaler); the empty Backend gives "(none)", which does not
// unmarshal.
func (b Backend) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText sets b to the backend whose String is text, "legacy" or
// "nft" (encoding.TextUnmarshaler): exactly, unlike ParseBackend, which
// also takes other cases and spaces. Any other text is an error, and b is
// left as it was.
func (b *Backend) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, BackendLegacy, BackendNFT)
	if err == nil {
		*b = v
	}
	return err
}

package iptablesfake

import (
	"encoding/json"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// MarshalText returns String's text: "any", "save", "restore" or "command"
// (encoding.TextMarshaler).
func (o Op) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText sets o to the Op whose String is text: "any", "save",
// "restore" or "command" (encoding.TextUnmarshaler). Any other text is an
// error, and o is left as it was.
func (o *Op) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, OpAny, OpSave, OpRestore, OpCommand)
	if err == nil {
		*o = v
	}
	return err
}

// MarshalText returns String's text: "legacy" or "nft"
// (encoding.TextMarshaler).
func (b Backend) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText sets b to the Backend whose String is text: "legacy" or
// "nft" (encoding.TextUnmarshaler). Any other text is an error, and b is
// left as it was.
func (b *Backend) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, BackendLegacy, BackendNFT)
	if err == nil {
		*b = v
	}
	return err
}

// MarshalJSON encodes c as encoding/json does, but with Err as its text
// (null when nil), which it would write as {}.
func (c Call) MarshalJSON() ([]byte, error) {
	type plain Call
	return json.Marshal(struct {
		plain
		Err *string
	}{plain(c), textform.Error(c.Err)})
}

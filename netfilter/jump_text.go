package netfilter

import (
	"fmt"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// String returns "insert", "append" or "none"; a value past JumpNone gives
// its type and number, such as "JumpPlacement(3)".
func (p JumpPlacement) String() string {
	switch p {
	case JumpInsert:
		return "insert"
	case JumpAppend:
		return "append"
	case JumpNone:
		return "none"
	}
	return fmt.Sprintf("JumpPlacement(%d)", uint8(p))
}

// MarshalText returns String's text (encoding.TextMarshaler).
func (p JumpPlacement) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText sets p to the placement whose String is text: "insert",
// "append" or "none" (encoding.TextUnmarshaler). Any other text is an error,
// and p is left as it was.
func (p *JumpPlacement) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, JumpInsert, JumpAppend, JumpNone)
	if err == nil {
		*p = v
	}
	return err
}

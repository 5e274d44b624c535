package managerutil

import (
	"fmt"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// String returns "insert", "append" or "none".
func (p Placement) String() string { return PlacementString(p) }

// PlacementString returns the name of the Placement that j (a manager's
// Jump) converts to: "insert", "append" or "none"; a value past None gives
// its type and number, such as "masquerade.Jump(3)". The managers' Jump
// types use it for their String.
func PlacementString[J ~uint8](j J) string {
	switch Placement(j) {
	case Insert:
		return "insert"
	case Append:
		return "append"
	case None:
		return "none"
	}
	return fmt.Sprintf("%T(%d)", j, uint8(j))
}

// MarshalText returns String's text (encoding.TextMarshaler).
func (p Placement) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText sets p to the placement whose String is text: "insert",
// "append" or "none" (encoding.TextUnmarshaler). Any other text is an error,
// and p is left as it was.
func (p *Placement) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, Insert, Append, None)
	if err == nil {
		*p = v
	}
	return err
}

package serviceloop

import (
	"fmt"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// String returns "drop" or "reject".
func (v Verdict) String() string {
	switch v {
	case Drop:
		return "drop"
	case Reject:
		return "reject"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// MarshalText returns String's text (encoding.TextMarshaler).
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText sets v to the verdict whose String is text: "drop" or
// "reject" (encoding.TextUnmarshaler). Any other text is an error, and v is
// left as it was.
func (v *Verdict) UnmarshalText(text []byte) error {
	parsed, err := textform.Parse(text, Drop, Reject)
	if err == nil {
		*v = parsed
	}
	return err
}

package drivertest

import "github.com/nodeplane/nodeplane/internal/textform"

// MarshalText returns String's text: "before-apply", "after-apply" or
// "in-place" (encoding.TextMarshaler).
func (s Stage) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText sets s to the stage whose String is text: "before-apply",
// "after-apply" or "in-place" (encoding.TextUnmarshaler). Any other text is
// an error, and s is left as it was.
func (s *Stage) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, BeforeApply, AfterApply, InPlace)
	if err == nil {
		*s = v
	}
	return err
}

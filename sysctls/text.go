package sysctls

import (
	"encoding/json"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// MarshalText returns String's text: "kept", "changed" or "failed"
// (encoding.TextMarshaler); the zero Outcome gives "unknown", which does not
// unmarshal.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText sets o to the outcome whose String is text: "kept",
// "changed" or "failed" (encoding.TextUnmarshaler). Any other text is an
// error, and o is left as it was.
func (o *Outcome) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, Kept, Changed, Failed)
	if err == nil {
		*o = v
	}
	return err
}

// MarshalJSON encodes r as encoding/json does, but with Err as its text
// (null when nil), which it would write as {}.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		plain
		Err *string
	}{plain(r), textform.Error(r.Err)})
}

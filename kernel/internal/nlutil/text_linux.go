package nlutil

import (
	"encoding/json"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// kindsText parses what Kinds.String writes.
var kindsText = textform.Flags[Kinds]{Names: kindNames[:], Sep: "|", None: "none"}

// MarshalText returns String's text, such as "links|addrs" or "none"
// (encoding.TextMarshaler); bits of no kind do not unmarshal.
func (k Kinds) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText sets k to the kinds named in text: "links", "addrs" and
// "routes" joined by "|" in any order, or "none" (encoding.TextUnmarshaler).
// Any other text is an error, and k is left as it was.
func (k *Kinds) UnmarshalText(text []byte) error {
	v, err := kindsText.Parse(text)
	if err == nil {
		*k = v
	}
	return err
}

// MarshalJSON encodes e as encoding/json does, but with Err as its text
// (null when nil), which it would write as {}.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event
	return json.Marshal(struct {
		plain
		Err *string
	}{plain(e), textform.Error(e.Err)})
}

// MarshalJSON encodes r as encoding/json does, but with Reason as its text
// (null when nil), which it would write as {}.
func (r Resync) MarshalJSON() ([]byte, error) {
	type plain Resync
	return json.Marshal(struct {
		plain
		Reason *string
	}{plain(r), textform.Error(r.Reason)})
}

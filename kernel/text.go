package kernel

import (
	"encoding/json"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// eventKindsText names EventLinks, EventAddrs and EventRoutes, in bit order.
var eventKindsText = textform.Flags[EventKinds]{Names: []string{"links", "addrs", "routes"}, Sep: "|", None: "none"}

// String returns the kinds' names joined by "|", such as "links|routes",
// or "none"; bits of no kind are shown in hex.
func (k EventKinds) String() string { return eventKindsText.Format(k) }

// MarshalText returns String's text (encoding.TextMarshaler); bits of no
// kind do not unmarshal.
func (k EventKinds) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText sets k to the kinds named in text: "links", "addrs" and
// "routes" joined by "|" in any order, or "none" (encoding.TextUnmarshaler).
// Any other text is an error, and k is left as it was.
func (k *EventKinds) UnmarshalText(text []byte) error {
	v, err := eventKindsText.Parse(text)
	if err == nil {
		*k = v
	}
	return err
}

// MarshalText returns String's text: "gone", "down" or "up"
// (encoding.TextMarshaler).
func (s LinkState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText sets s to the state whose String is text: "gone", "down" or
// "up" (encoding.TextUnmarshaler). Any other text is an error, and s is left
// as it was.
func (s *LinkState) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, LinkGone, LinkDown, LinkUp)
	if err == nil {
		*s = v
	}
	return err
}

// MarshalText returns String's text: "replace", "add" or "delete"
// (encoding.TextMarshaler).
func (k OpKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText sets k to the operation whose String is text: "replace",
// "add" or "delete" (encoding.TextUnmarshaler). Any other text is an error,
// and k is left as it was.
func (k *OpKind) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, OpReplace, OpAdd, OpDelete)
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

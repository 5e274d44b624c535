package policy

import (
	"fmt"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// String returns "allow", "deny", "pass", or "log".
func (a Action) String() string {
	switch a {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	case Pass:
		return "pass"
	case Log:
		return "log"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// MarshalText returns String's text (encoding.TextMarshaler).
func (a Action) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText sets a to the value whose String is text ("allow", "deny", "pass", "log"; encoding.TextUnmarshaler).
// Any other text is an error, and a is left as it was.
func (a *Action) UnmarshalText(text []byte) error {
	parsed, err := textform.Parse(text, Allow, Deny, Pass, Log)
	if err == nil {
		*a = parsed
	}
	return err
}

// String returns "drop", or "reject".
func (d DenyAction) String() string {
	switch d {
	case DenyDrop:
		return "drop"
	case DenyReject:
		return "reject"
	}
	return fmt.Sprintf("DenyAction(%d)", uint8(d))
}

// MarshalText returns String's text (encoding.TextMarshaler).
func (d DenyAction) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText sets d to the value whose String is text ("drop", "reject"; encoding.TextUnmarshaler).
// Any other text is an error, and d is left as it was.
func (d *DenyAction) UnmarshalText(text []byte) error {
	parsed, err := textform.Parse(text, DenyDrop, DenyReject)
	if err == nil {
		*d = parsed
	}
	return err
}

// String returns "return", "accept", or "deny".
func (h ToHost) String() string {
	switch h {
	case ToHostReturn:
		return "return"
	case ToHostAccept:
		return "accept"
	case ToHostDeny:
		return "deny"
	}
	return fmt.Sprintf("ToHost(%d)", uint8(h))
}

// MarshalText returns String's text (encoding.TextMarshaler).
func (h ToHost) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText sets h to the value whose String is text ("return", "accept", "deny"; encoding.TextUnmarshaler).
// Any other text is an error, and h is left as it was.
func (h *ToHost) UnmarshalText(text []byte) error {
	parsed, err := textform.Parse(text, ToHostReturn, ToHostAccept, ToHostDeny)
	if err == nil {
		*h = parsed
	}
	return err
}

// String returns "nets", or "addr-ports".
func (k SetKind) String() string {
	switch k {
	case SetNets:
		return "nets"
	case SetAddrPorts:
		return "addr-ports"
	}
	return fmt.Sprintf("SetKind(%d)", uint8(k))
}

// MarshalText returns String's text (encoding.TextMarshaler).
func (k SetKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText sets k to the value whose String is text ("nets", "addr-ports"; encoding.TextUnmarshaler).
// Any other text is an error, and k is left as it was.
func (k *SetKind) UnmarshalText(text []byte) error {
	parsed, err := textform.Parse(text, SetNets, SetAddrPorts)
	if err == nil {
		*k = parsed
	}
	return err
}

// String returns "denied" or "allowed".
func (v Verdict) String() string {
	switch v {
	case Denied:
		return "denied"
	case Allowed:
		return "allowed"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// MarshalText returns String's text (encoding.TextMarshaler).
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText sets v to the value whose String is text ("denied", "allowed"; encoding.TextUnmarshaler).
// Any other text is an error, and v is left as it was.
func (v *Verdict) UnmarshalText(text []byte) error {
	parsed, err := textform.Parse(text, Denied, Allowed)
	if err == nil {
		*v = parsed
	}
	return err
}

// String returns "tree" or "verdict-map".
func (d Dispatch) String() string {
	switch d {
	case DispatchTree:
		return "tree"
	case DispatchVerdictMap:
		return "verdict-map"
	}
	return fmt.Sprintf("Dispatch(%d)", uint8(d))
}

// MarshalText returns String's text (encoding.TextMarshaler).
func (d Dispatch) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText sets d to the value whose String is text ("tree",
// "verdict-map"; encoding.TextUnmarshaler). Any other text is an error,
// and d is left as it was.
func (d *Dispatch) UnmarshalText(text []byte) error {
	parsed, err := textform.Parse(text, DispatchTree, DispatchVerdictMap)
	if err == nil {
		*d = parsed
	}
	return err
}

package wireguard

import (
	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/textform"
)

// modes are the Modes, in order.
var modes = []Mode{ModeAuto, ModeKernel, ModeUserspace}

// MarshalText returns String's text: "auto", "kernel" or "userspace". It
// implements encoding.TextMarshaler, so a Mode reads the same in a flag, a
// config file and a JSON document (Status.Mode).
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText sets m to the Mode whose String is text (case-sensitive);
// anything else is an error wrapping ErrInvalidOptions that names the
// valid modes, and m is unchanged. It implements encoding.TextUnmarshaler.
func (m *Mode) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, modes...)
	if err != nil {
		return errs.Also(err, ErrInvalidOptions)
	}
	*m = v
	return nil
}

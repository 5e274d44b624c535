package proxy

import (
	"fmt"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// AttachMode says how the Proxy attaches its tc programs to the
// interfaces (Options.Attach), and Status which one it uses. See "Attach
// modes" in the package documentation.
type AttachMode uint8

const (
	// AttachAuto attaches with TCX when the kernel has it (Linux 6.6 or
	// later) and with classic tc otherwise: the first Apply probes the
	// kernel once. It is the zero value.
	AttachAuto AttachMode = iota
	// AttachTCX attaches with TCX only: on a kernel without it every
	// interface fails to attach, with an error wrapping ErrAttach and
	// ErrNotSupported.
	AttachTCX
	// AttachTC attaches with classic tc only: a direct-action bpf filter
	// on each direction of the interface's clsact qdisc, at a fixed
	// priority and handle (TCPriority, TCHandle).
	AttachTC
)

// The priority and handle of the Proxy's classic tc filters (AttachTC), on
// the ingress and the egress of the clsact qdisc of each interface it
// attaches to; their names start with TCFilterPrefix. A filter at that
// priority and handle that is not named so is foreign: the Proxy leaves
// it alone and does not attach to that direction of the interface.
const (
	TCPriority     = 0x4e50 // "NP"
	TCHandle       = 0x4e50
	TCFilterPrefix = "nodeplane-"
)

// String returns "auto", "tcx" or "tc".
func (m AttachMode) String() string {
	switch m {
	case AttachAuto:
		return "auto"
	case AttachTCX:
		return "tcx"
	case AttachTC:
		return "tc"
	}
	return fmt.Sprintf("AttachMode(%d)", uint8(m))
}

// MarshalText returns String's text (encoding.TextMarshaler).
func (m AttachMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText sets m to the mode whose String is text: "auto", "tcx" or
// "tc" (encoding.TextUnmarshaler). Any other text is an error, and m is
// left as it was.
func (m *AttachMode) UnmarshalText(text []byte) error {
	parsed, err := textform.Parse(text, AttachAuto, AttachTCX, AttachTC)
	if err == nil {
		*m = parsed
	}
	return err
}

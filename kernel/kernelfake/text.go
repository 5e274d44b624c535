package kernelfake

import "github.com/nodeplane/nodeplane/internal/textform"

// allOps are the Op constants, for UnmarshalText.
var allOps = []Op{
	OpLinks, OpLinkByName, OpAddLink, OpDeleteLink, OpSetLinkUp, OpSetLinkMTU, OpSetLinkMAC, OpAddrs,
	OpAddAddr, OpDeleteAddr, OpDumpRoutes, OpDumpInterfaceRoutes, OpApplyRoutes, OpRules, OpAddRule,
	OpDeleteRule, OpNeighbors, OpApplyNeighbors, OpFDB, OpApplyFDB, OpSysctl, OpSetSysctl,
	OpDeleteConntrack, OpSubscribe, OpRun, OpDo, OpWireGuardDevice, OpConfigureWireGuard,
}

// String returns the method's name, such as "AddLink".
func (o Op) String() string { return string(o) }

// MarshalText returns String's text (encoding.TextMarshaler).
func (o Op) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText sets o to the Op whose String is text, such as "AddLink"
// (encoding.TextUnmarshaler). Any other text is an error, and o is left as
// it was.
func (o *Op) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, allOps...)
	if err == nil {
		*o = v
	}
	return err
}

//go:build linux

package routetable

import "github.com/nodeplane/nodeplane/ifacemonitor"

// IfaceStateOf converts the state ifacemonitor reports to an IfaceState,
// for wiring a monitor's OnLinkState to OnIfaceStateChanged:
//
//	OnLinkState: func(u ifacemonitor.LinkUpdate) {
//		tbl.OnIfaceStateChanged(u.Name, u.Index, routetable.IfaceStateOf(u.State))
//	},
//
// A state it does not know converts to an invalid IfaceState, which
// OnIfaceStateChanged ignores (with a warning) rather than misreads.
func IfaceStateOf(s ifacemonitor.State) IfaceState {
	switch s {
	case ifacemonitor.StateGone:
		return IfaceGone
	case ifacemonitor.StateDown:
		return IfaceDown
	case ifacemonitor.StateUp:
		return IfaceUp
	}
	return ifaceStateInvalid
}

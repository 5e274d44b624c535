// Package netfilter is the packet-filter rule model that nodeplane's rule
// writers render, and the small rule-table interface they implement, so
// that a manager written once works on every backend.
//
// # What it holds
//
// A Rule is a conjunction of criteria (Matches) and an Action. Both are
// closed sets of plain values: the Match* types (MatchNet for addresses,
// MatchProto, MatchPorts, MatchIface, MatchMark, MatchSet for IP sets,
// MatchConntrack, MatchAddrType, MatchICMP, MatchLimit) and the Action* types
// (ActionAccept, ActionDrop, ActionReturn, ActionReject, ActionJump,
// ActionGoto, ActionSetMark, ActionMasquerade, ActionSNAT, ActionDNAT,
// ActionLog, ActionNoTrack, ActionNFLOG, and ActionVerdictMap, which only
// nftables renders). Their exported fields are all there is to them;
// constructors (SourceNet, Protocol, DestPorts, Not, Accept, Jump, DNAT, …)
// build the common ones. A backend renders each by a type switch whose
// default case reports an error matching ErrUnsupported, so that a value
// it does not know (one added here later) is refused when declared, never
// rendered wrong; a backend's tests find every type by their marker
// methods (match, action) and check that each renders, or is refused with
// ErrUnsupported where the backend lacks the construct.
//
// Rule.Validate checks what is true whatever the backend: the family of
// every address, prefixes that are networks (10.0.0.1/24 is an error, not
// 10.0.0.0/24 silently), ports only with tcp, udp or sctp, names and texts
// the kernel and the tools take, criteria that do not contradict each
// other. It allocates nothing unless it fails. A backend checks the rest
// when a rule is declared: where the rule stands (REJECT only where packets
// are filtered, MASQUERADE only in source NAT) and its own limits (the
// length of a LOG prefix, the number of ports in one criterion).
//
// Chain is the full content of one chain a table owns, and Hook names the
// points of the packet path (PREROUTING, INPUT, FORWARD, OUTPUT,
// POSTROUTING) where a table puts rules of its own before or after
// everyone else's.
//
// Sets are part of the model too: a SetMetadata (a SetType such as
// hash:ip or bitmap:port, a family, a size or a PortRange) and its
// Members, built from net/netip (IPMember, NetMember, IPPortMember with a
// Proto, NetNetMember, PortMember, ParseMember) in a canonical form that
// can be a map key. Sets is the interface of a set backend — the kernel's
// ip sets (package ipsets) or the sets of an nftables table
// (nftables.IPSets) — and SetMetadata.Normalize and CheckMember are the
// checks every backend makes, so that they refuse the same input with the
// same sentinels (ErrInvalidMember, ErrUnknownSetType, …). A MatchSet
// matches a set by its kernel name (Sets.KernelName).
//
// # How it is used
//
// A manager takes a Table — the interface, not a backend — declares chains
// with SetChains, puts jumps to them at hooks with InsertRules or
// AppendRules, and leaves Apply to a dataplane.Loop (a Table is a
// dataplane.Driver):
//
//	func (m *manager) CompleteDeferredWork(ctx context.Context) error {
//		err := m.tbl.SetChains(netfilter.Chain{Name: "np-fw", Rules: []netfilter.Rule{{
//			Matches: []netfilter.Match{
//				netfilter.SourceNet(netip.MustParsePrefix("10.0.0.0/8")),
//				netfilter.Protocol(netfilter.ProtoTCP),
//				netfilter.DestPorts(netfilter.Port(443)),
//			},
//			Action: netfilter.Accept(),
//		}}})
//		if err != nil {
//			return err
//		}
//		return m.tbl.InsertRules("np", netfilter.HookForward, []netfilter.Rule{{Action: netfilter.Jump("np-fw")}})
//	}
//
// A manager that lets its user choose where the jumps to its chains go
// takes a JumpPlacement in its Options — JumpInsert (the zero value),
// JumpAppend or JumpNone, "insert", "append" or "none" as text — and
// declares them with DeclareJumps, which puts the HookJumps it is given
// at their hooks as the rules of one owner, through InsertRules or
// AppendRules, or nowhere for JumpNone.
//
// *iptables.Table (iptables.New picks the iptables table, IP family and
// backend) and *nftables.Table implement Table.
//
// # What it never touches
//
// The package does no I/O and holds no state: it is types, constructors
// and checks.
package netfilter

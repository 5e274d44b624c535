// Package policy is network policy on the netfilter rule model: policies
// and profiles rendered into chains shared by the endpoints that use them,
// per-endpoint chains in tier order, dispatch by interface that drops
// unknown workload interfaces (fail closed), failsafe ports on host
// endpoints, and untracked and pre-DNAT host policy.
//
// # The model
//
// A Policy is an ordered list of ingress and egress Rules, each with an
// Action (Allow, Deny, Pass to the next tier, or Log and go on) and
// matches on protocol, ICMP type, source and destination networks,
// address sets, ports and port ranges, named ports (address·protocol·port
// sets) and the negation of each. A Profile is an endpoint's fallback. An
// endpoint (a Workload, or a HostEndpoint) lists its tiers in order, each
// with the policies that apply to it per direction and what a packet no
// policy decided meets at the tier's end (Deny or Pass), then its
// profiles. An endpoint with no policy and no profile is denied.
//
// Sets are given resolved: SetUpdate with the members, SetDelta with the
// changes. The messages (PolicyUpdate, SetDelta, WorkloadUpdate …) are
// checked as they arrive; a Model holds what they left, and one bad
// message is refused alone.
package policy

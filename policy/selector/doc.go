// Package selector turns label selectors, with the labels, addresses and
// named ports of a cluster's endpoints, into the messages of package
// policy, incrementally, for callers that have no calculation graph of
// their own.
//
// # What it owns
//
// An Index holds the inputs (namespaces and their labels, every endpoint
// of the cluster, local or not, tiers, and policies whose rules select
// peers by Selector and ports by name) and what it last sent. Flush
// returns the policy messages since the last Flush, minimal and
// deduplicated:
//
//   - one address set (SetNets, one full-length prefix per address) per
//     distinct selector that some rule uses, with the ID SetID gives (a
//     short hash of the selector's canonical String): SetUpdate when it is
//     first used, SetDelta as endpoints and namespaces change, SetRemove
//     when the last rule that used it is gone;
//   - one address·protocol·port set (SetAddrPorts) per named port a rule
//     uses, keyed by the peer's selector (every endpoint when it has none),
//     the protocol and the name (NamedPortSetID), holding the address,
//     protocol and port of each selected endpoint that defines the name:
//     the port is resolved on the endpoint that owns it;
//   - PolicyUpdate for every policy, its selectors replaced by set IDs,
//     and PolicyRemove;
//   - WorkloadUpdate for every local endpoint, with its tiers in order
//     (by tier order, then name; a tier is listed only when one of its
//     policies applies to the endpoint, its policies sorted by Order then
//     ID) and its namespace's profile; WorkloadRemove;
//   - ProfileUpdate for the profile of each namespace that has a local
//     endpoint (Options.NamespaceProfile; by default "ns.<name>", which
//     allows everything) and ProfileRemove when it has none left.
//
// # How it is used
//
// Feed it with SetNamespace, SetEndpoint, SetTier and SetPolicy (and their
// Remove…) as the cluster changes, and hand what Flush returns to a
// policy manager or a policy.Model, in order. Selectors follow Kubernetes
// label semantics: NotEquals, NotIn and DoesNotExist hold for an absent
// label; an empty endpoint selector selects every endpoint, and a nil
// namespace selector every namespace.
//
// Costs: sets are refcounted, a member by the endpoints that put it there
// and a set by the rules that use it, so adds and removes are symmetric.
// Every distinct selector is indexed by the label keys its requirements
// test. An endpoint whose labels and namespace stay the same (new
// addresses or named ports) is tested against no selector: only the sets
// it is in change. A relabelled endpoint is tested again only against the
// selectors that test a key whose value changed, and a relabelled
// namespace moves its endpoints only between the selectors whose
// Namespace requirements test a changed key. A new endpoint (or one that
// changes namespace) is tested against every distinct selector once, and
// a new selector against every endpoint once.
//
// Profiles are refcounted by the namespaces that have local endpoints, so
// NamespaceProfile may give several namespaces one profile. A local
// endpoint's interface must be unique among local endpoints
// (SetEndpoint refuses another's); a workload whose interface changed is
// removed and sent again in the same Flush, so interfaces may be swapped
// between endpoints within one Flush.
//
// # What it never touches
//
// It does no I/O, starts no goroutine and keeps no clock; it builds on every
// operating system. An Index is not safe for concurrent use.
package selector

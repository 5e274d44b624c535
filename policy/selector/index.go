package selector

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
)

// Options configure an Index. The zero value is the default.
type Options struct {
	// NamespaceProfile returns the profile of the local endpoints of a
	// namespace, which each of them lists as its only profile; a profile
	// with an empty ID means none. It must return the same profile for
	// the same name. Nil means DefaultNamespaceProfile.
	NamespaceProfile func(namespace string) policy.Profile
}

// DefaultNamespaceProfile returns profile "ns.<namespace>", which allows
// every packet both ways: an endpoint no policy applies to is open, as in
// Kubernetes, and one that a policy applies to is isolated by its tier's
// end.
func DefaultNamespaceProfile(namespace string) policy.Profile {
	allow := []policy.Rule{{Action: policy.Allow}}
	return policy.Profile{ID: "ns." + namespace, Ingress: allow, Egress: slices.Clone(allow)}
}

// Index turns label selectors, namespaces, endpoints, tiers and policies
// into the messages of package policy, incrementally: each Set… or
// Remove… records a change and Flush returns the messages that bring a
// policy.Model that took every earlier Flush to the new state. An Index is
// not safe for concurrent use.
type Index struct {
	profileOf func(string) policy.Profile

	namespaces map[string]map[string]string
	nsEps      map[string]map[*endpoint]struct{}
	endpoints  map[string]*endpoint
	tiers      map[string]tier
	policies   map[string]*pol
	nodes      map[string]*node     // by canonical selector
	sets       map[string]*setState // by set ID
	nsLocal    map[string]int       // namespace → local endpoints

	dirtySets     map[*setState]struct{}
	removedSets   map[string]struct{} // sent sets gone since the last Flush
	dirtyPolicies map[string]struct{}
	dirtyWls      map[string]struct{}
	dirtyProfiles map[string]struct{}

	sentPolicies map[string]policy.Policy
	sentWls      map[string]policy.Workload
	sentProfiles map[string]policy.Profile // by namespace
}

type tier struct {
	order int
	end   policy.Action
}

type endpoint struct {
	Endpoint
	nodes map[*node]struct{}
}

type pol struct {
	Policy
	out  policy.Policy
	node *node     // AppliesTo
	refs []*setRef // sets its rules use
}

// node is one distinct selector in use: by policies (AppliesTo) and by
// the sets of their rules.
type node struct {
	sel     Selector
	key     string
	uses    int
	eps     map[*endpoint]struct{}
	applies map[*pol]struct{}
	nets    *setState
	ports   map[PortName]*setState
}

type setRef struct {
	key  string // canonical selector
	sel  Selector
	port PortName
	nets bool
}

// setState is one set: its members, refcounted by the endpoints that put
// them there, and what changed since the last Flush.
type setState struct {
	id      string
	kind    policy.SetKind
	refs    int
	members map[netfilter.Member]int
	fresh   bool                      // not sent yet: the next Flush sends it whole
	pending map[netfilter.Member]bool // member → present at the last Flush
}

// New returns an empty Index.
func New(opts Options) *Index {
	prof := opts.NamespaceProfile
	if prof == nil {
		prof = DefaultNamespaceProfile
	}
	return &Index{
		profileOf:     prof,
		namespaces:    map[string]map[string]string{},
		nsEps:         map[string]map[*endpoint]struct{}{},
		endpoints:     map[string]*endpoint{},
		tiers:         map[string]tier{},
		policies:      map[string]*pol{},
		nodes:         map[string]*node{},
		sets:          map[string]*setState{},
		nsLocal:       map[string]int{},
		dirtySets:     map[*setState]struct{}{},
		removedSets:   map[string]struct{}{},
		dirtyPolicies: map[string]struct{}{},
		dirtyWls:      map[string]struct{}{},
		dirtyProfiles: map[string]struct{}{},
		sentPolicies:  map[string]policy.Policy{},
		sentWls:       map[string]policy.Workload{},
		sentProfiles:  map[string]policy.Profile{},
	}
}

// SetID returns the ID of the address set of the endpoints sel selects:
// a short hash of its canonical form.
func SetID(sel Selector) string { return "s:" + shortHash("nets\x00"+sel.String()) }

// NamedPortSetID returns the ID of the address·protocol·port set of the
// endpoints sel selects that define the named port p.
func NamedPortSetID(sel Selector, p PortName) string {
	return "p:" + shortHash(fmt.Sprintf("port\x00%s\x00%d\x00%s", sel.String(), p.Protocol, p.Name))
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// SetNamespace adds or relabels a namespace; its endpoints move between
// the sets whose namespace requirements they now meet.
func (x *Index) SetNamespace(name string, labels map[string]string) error {
	if name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidNamespace)
	}
	if err := validLabels(labels); err != nil {
		return fmt.Errorf("%w %s: %w", ErrInvalidNamespace, name, err)
	}
	if old, ok := x.namespaces[name]; ok && maps.Equal(old, labels) {
		return nil
	}
	x.namespaces[name] = maps.Clone(labels)
	for ep := range x.nsEps[name] {
		x.rematch(ep, ep)
	}
	return nil
}

// RemoveNamespace forgets a namespace's labels; its endpoints stay, in a
// namespace without labels.
func (x *Index) RemoveNamespace(name string) {
	if _, ok := x.namespaces[name]; !ok {
		return
	}
	delete(x.namespaces, name)
	for ep := range x.nsEps[name] {
		x.rematch(ep, ep)
	}
}

// SetEndpoint adds or replaces an endpoint.
func (x *Index) SetEndpoint(e Endpoint) error {
	if err := validEndpoint(e); err != nil {
		return err
	}
	e.Labels = maps.Clone(e.Labels)
	e.Addrs = slices.Clone(e.Addrs)
	e.NamedPorts = slices.Clone(e.NamedPorts)
	if !e.Local {
		e.Iface = ""
	}
	old := x.endpoints[e.ID]
	if old != nil && sameEndpoint(old.Endpoint, e) {
		return nil
	}
	ep := &endpoint{Endpoint: e, nodes: map[*node]struct{}{}}
	if old != nil {
		x.detach(old)
	}
	x.endpoints[e.ID] = ep
	eps := x.nsEps[e.Namespace]
	if eps == nil {
		eps = map[*endpoint]struct{}{}
		x.nsEps[e.Namespace] = eps
	}
	eps[ep] = struct{}{}
	if e.Local {
		x.nsLocal[e.Namespace]++
		x.dirtyProfiles[e.Namespace] = struct{}{}
		x.dirtyWls[e.ID] = struct{}{}
	}
	if old != nil && old.Namespace == e.Namespace && maps.Equal(old.Labels, e.Labels) {
		// Same labels: the same selectors; only what it contributes changes.
		for n := range old.nodes {
			x.contribute(n, old, -1)
		}
		for n := range old.nodes {
			ep.nodes[n] = struct{}{}
			delete(n.eps, old)
			n.eps[ep] = struct{}{}
			x.contribute(n, ep, +1)
		}
		return nil
	}
	if old != nil {
		x.unmatchAll(old)
	}
	x.rematch(nil, ep)
	return nil
}

// RemoveEndpoint removes an endpoint; its addresses leave every set.
func (x *Index) RemoveEndpoint(id string) {
	old, ok := x.endpoints[id]
	if !ok {
		return
	}
	delete(x.endpoints, id)
	x.detach(old)
	x.unmatchAll(old)
}

// detach takes old out of the namespace and local bookkeeping.
func (x *Index) detach(old *endpoint) {
	eps := x.nsEps[old.Namespace]
	delete(eps, old)
	if len(eps) == 0 {
		delete(x.nsEps, old.Namespace)
	}
	if old.Local {
		x.nsLocal[old.Namespace]--
		if x.nsLocal[old.Namespace] == 0 {
			delete(x.nsLocal, old.Namespace)
		}
		x.dirtyProfiles[old.Namespace] = struct{}{}
		x.dirtyWls[old.ID] = struct{}{}
	}
}

func (x *Index) unmatchAll(old *endpoint) {
	for n := range old.nodes {
		x.contribute(n, old, -1)
		delete(n.eps, old)
	}
	clear(old.nodes)
}

// rematch evaluates every selector in use for ep (whose old matches, if
// old is not nil, are old.nodes) and moves it between them.
func (x *Index) rematch(old, ep *endpoint) {
	ns := x.namespaces[ep.Namespace]
	for _, n := range x.nodes {
		_, was := ep.nodes[n]
		if old != nil {
			_, was = old.nodes[n]
		}
		now := n.sel.Matches(ep.Labels, ns)
		switch {
		case now && !was:
			ep.nodes[n] = struct{}{}
			n.eps[ep] = struct{}{}
			x.contribute(n, ep, +1)
		case was && !now:
			delete(ep.nodes, n)
			delete(n.eps, ep)
			x.contribute(n, ep, -1)
		}
	}
}

// contribute adds (d = +1) or takes back (d = -1) what ep puts in n's
// sets, and marks its workload when n is a policy's AppliesTo.
func (x *Index) contribute(n *node, ep *endpoint, d int) {
	if n.nets != nil {
		for _, a := range ep.Addrs {
			x.change(n.nets, netfilter.NetMember(netip.PrefixFrom(a, a.BitLen())), d)
		}
	}
	for pn, s := range n.ports {
		for _, np := range ep.NamedPorts {
			if np.Name == pn.Name && np.Protocol == pn.Protocol {
				for _, a := range ep.Addrs {
					x.change(s, netfilter.IPPortMember(a, np.Protocol, np.Port), d)
				}
			}
		}
	}
	if ep.Local && len(n.applies) > 0 {
		x.dirtyWls[ep.ID] = struct{}{}
	}
}

func (x *Index) change(s *setState, m netfilter.Member, d int) {
	c := s.members[m]
	if !s.fresh {
		if _, ok := s.pending[m]; !ok {
			s.pending[m] = c > 0
		}
		x.dirtySets[s] = struct{}{}
	}
	if c+d == 0 {
		delete(s.members, m)
	} else {
		s.members[m] = c + d
	}
}

// SetTier adds or changes a tier: tiers are listed by order, then name.
// A policy whose tier was never set is in a tier of order 0 that denies at
// its end.
func (x *Index) SetTier(name string, order int, endOfTier policy.Action) error {
	if name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidTier)
	}
	if endOfTier == 0 {
		endOfTier = policy.Deny
	}
	if endOfTier != policy.Deny && endOfTier != policy.Pass {
		return fmt.Errorf("%w %s: the end of a tier is Deny or Pass", ErrInvalidTier, name)
	}
	t := tier{order: order, end: endOfTier}
	if old, ok := x.tiers[name]; ok && old == t {
		return nil
	}
	x.tiers[name] = t
	x.dirtyTier(name)
	return nil
}

// RemoveTier forgets a tier; its policies fall back to order 0 and Deny.
func (x *Index) RemoveTier(name string) {
	if _, ok := x.tiers[name]; ok {
		delete(x.tiers, name)
		x.dirtyTier(name)
	}
}

func (x *Index) dirtyTier(name string) {
	for _, p := range x.policies {
		if p.Tier == name {
			x.dirtyApplied(p.node)
		}
	}
}

func (x *Index) dirtyApplied(n *node) {
	for ep := range n.eps {
		if ep.Local {
			x.dirtyWls[ep.ID] = struct{}{}
		}
	}
}

// SetPolicy adds or replaces a policy. Every policy is sent, whether or
// not it applies to a local endpoint, with the sets its rules use.
func (x *Index) SetPolicy(p Policy) error {
	out, refs, err := translate(p)
	if err != nil {
		return err
	}
	p.AppliesTo = cloneSelector(p.AppliesTo)
	np := &pol{Policy: p, out: out}
	for _, r := range refs {
		x.acquire(r)
	}
	np.refs = refs
	np.node = x.acquireNode(p.AppliesTo)
	np.node.applies[np] = struct{}{}
	x.dirtyApplied(np.node)
	if old := x.policies[p.ID]; old != nil {
		x.releasePolicy(old)
	}
	x.policies[p.ID] = np
	x.dirtyPolicies[p.ID] = struct{}{}
	return nil
}

// RemovePolicy removes a policy; sets no other policy uses are removed.
func (x *Index) RemovePolicy(id string) {
	if old := x.policies[id]; old != nil {
		delete(x.policies, id)
		x.releasePolicy(old)
		x.dirtyPolicies[id] = struct{}{}
	}
}

func (x *Index) releasePolicy(p *pol) {
	delete(p.node.applies, p)
	x.dirtyApplied(p.node)
	x.releaseNode(p.node)
	for _, r := range p.refs {
		x.release(r)
	}
}

func (x *Index) acquireNode(sel Selector) *node {
	key := sel.String()
	n := x.nodes[key]
	if n == nil {
		n = &node{sel: sel, key: key, eps: map[*endpoint]struct{}{}, applies: map[*pol]struct{}{},
			ports: map[PortName]*setState{}}
		x.nodes[key] = n
		for _, ep := range x.endpoints {
			if sel.Matches(ep.Labels, x.namespaces[ep.Namespace]) {
				n.eps[ep] = struct{}{}
				ep.nodes[n] = struct{}{}
			}
		}
	}
	n.uses++
	return n
}

func (x *Index) releaseNode(n *node) {
	n.uses--
	if n.uses > 0 {
		return
	}
	for ep := range n.eps {
		delete(ep.nodes, n)
	}
	delete(x.nodes, n.key)
}

func (x *Index) acquire(r *setRef) {
	n := x.acquireNode(r.sel)
	var s *setState
	if r.nets {
		s = n.nets
	} else {
		s = n.ports[r.port]
	}
	if s == nil {
		s = x.newSet(n, r)
	}
	s.refs++
}

func (x *Index) newSet(n *node, r *setRef) *setState {
	s := &setState{members: map[netfilter.Member]int{}, fresh: true, pending: map[netfilter.Member]bool{}}
	if r.nets {
		s.id, s.kind = SetID(n.sel), policy.SetNets
		n.nets = s
	} else {
		s.id, s.kind = NamedPortSetID(n.sel, r.port), policy.SetAddrPorts
		n.ports[r.port] = s
	}
	x.sets[s.id] = s
	delete(x.removedSets, s.id) // a fresh SetUpdate replaces it whole
	x.dirtySets[s] = struct{}{}
	only := &node{ports: map[PortName]*setState{}}
	if r.nets {
		only.nets = s
	} else {
		only.ports[r.port] = s
	}
	for ep := range n.eps {
		x.contribute(only, ep, +1)
	}
	return s
}

func (x *Index) release(r *setRef) {
	n := x.nodes[r.key]
	var s *setState
	if r.nets {
		s = n.nets
	} else {
		s = n.ports[r.port]
	}
	s.refs--
	if s.refs == 0 {
		if r.nets {
			n.nets = nil
		} else {
			delete(n.ports, r.port)
		}
		delete(x.sets, s.id)
		delete(x.dirtySets, s)
		if !s.fresh {
			x.removedSets[s.id] = struct{}{}
		}
	}
	x.releaseNode(n)
}

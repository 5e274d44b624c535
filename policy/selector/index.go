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
	nodes      map[string]*node              // by canonical selector
	sets       map[string]*setState          // by set ID
	nsLocal    map[string]int                // namespace → local endpoints
	ifaces     map[string]string             // interface → local endpoint ID
	epKeys     map[string]map[*node]struct{} // label key → nodes whose Endpoint requirements test it
	nsKeys     map[string]map[*node]struct{} // label key → nodes whose Namespace requirements test it
	evaluated  int                           // selectors evaluated for an endpoint (tests read it)

	dirtySets     map[*setState]struct{}
	removedSets   map[string]struct{} // sent sets gone since the last Flush
	dirtyPolicies map[string]struct{}
	dirtyWls      map[string]struct{}
	dirtyProfiles map[string]struct{}

	sentPolicies map[string]policy.Policy
	sentWls      map[string]policy.Workload
	sentProfiles map[string]policy.Profile // by profile ID
	nsProfile    map[string]string         // namespace with local endpoints → its profile's ID, as sent
	profileUsers map[string]int            // profile ID → namespaces in nsProfile that hold it
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
		ifaces:        map[string]string{},
		epKeys:        map[string]map[*node]struct{}{},
		nsKeys:        map[string]map[*node]struct{}{},
		dirtySets:     map[*setState]struct{}{},
		removedSets:   map[string]struct{}{},
		dirtyPolicies: map[string]struct{}{},
		dirtyWls:      map[string]struct{}{},
		dirtyProfiles: map[string]struct{}{},
		sentPolicies:  map[string]policy.Policy{},
		sentWls:       map[string]policy.Workload{},
		sentProfiles:  map[string]policy.Profile{},
		nsProfile:     map[string]string{},
		profileUsers:  map[string]int{},
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
// the sets whose namespace requirements they now meet. Only the selectors
// whose Namespace requirements test a changed key are evaluated again.
func (x *Index) SetNamespace(name string, labels map[string]string) error {
	if name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidNamespace)
	}
	if err := validLabels(labels); err != nil {
		return fmt.Errorf("%w %s: %w", ErrInvalidNamespace, name, err)
	}
	old, ok := x.namespaces[name]
	if ok && maps.Equal(old, labels) {
		return nil
	}
	labels = maps.Clone(labels)
	if labels == nil {
		labels = map[string]string{}
	}
	x.namespaces[name] = labels
	x.relabelNamespace(name, old, labels)
	return nil
}

// RemoveNamespace forgets a namespace's labels; its endpoints stay, in a
// namespace without labels.
func (x *Index) RemoveNamespace(name string) {
	old, ok := x.namespaces[name]
	if !ok {
		return
	}
	delete(x.namespaces, name)
	x.relabelNamespace(name, old, nil)
}

// relabelNamespace moves the endpoints of namespace name between the
// selectors that test a label that changed from old to now.
func (x *Index) relabelNamespace(name string, old, now map[string]string) {
	affected := x.affected(x.nsKeys, old, now)
	if len(affected) == 0 {
		return
	}
	for ep := range x.nsEps[name] {
		x.evaluated += len(affected)
		for n := range affected {
			_, was := ep.nodes[n]
			match := n.sel.Matches(ep.Labels, now)
			switch {
			case match && !was:
				x.join(n, ep)
			case was && !match:
				x.leave(n, ep)
			}
		}
	}
}

// affected returns the nodes of index (epKeys or nsKeys) that test a key
// whose value differs between the label maps a and b; never nil. The
// caller only reads it (it may be a map of index).
func (x *Index) affected(index map[string]map[*node]struct{}, a, b map[string]string) map[*node]struct{} {
	var changed []string
	for k, va := range a {
		if vb, ok := b[k]; !ok || va != vb {
			changed = append(changed, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			changed = append(changed, k)
		}
	}
	if len(changed) == 1 && index[changed[0]] != nil {
		return index[changed[0]] // the common case: one label changed
	}
	out := map[*node]struct{}{}
	for _, k := range changed {
		for n := range index[k] {
			out[n] = struct{}{}
		}
	}
	return out
}

// SetEndpoint adds or replaces an endpoint. A local endpoint's interface
// must not be another local endpoint's. An endpoint that keeps its
// namespace is evaluated again only against the selectors that test a
// label that changed; what it puts in the sets it stays in (its addresses
// and named ports) is replaced member by member.
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
	if other, ok := x.ifaces[e.Iface]; e.Local && ok && other != e.ID {
		return fmt.Errorf("%w %s: interface %s belongs to endpoint %s", ErrInvalidEndpoint, e.ID, e.Iface, other)
	}
	ep := &endpoint{Endpoint: e, nodes: map[*node]struct{}{}}
	var candidates map[*node]struct{} // nil: every node
	if old != nil {
		if old.Namespace == e.Namespace {
			candidates = x.affected(x.epKeys, old.Labels, e.Labels)
		}
		x.detach(old)
		for n := range old.nodes {
			x.contribute(n, old, -1)
			delete(n.eps, old)
			if _, retest := candidates[n]; candidates != nil && !retest {
				x.join(n, ep) // its labels for n did not change
			}
		}
		clear(old.nodes)
	}
	x.endpoints[e.ID] = ep
	x.attach(ep)
	ns := x.namespaces[e.Namespace]
	if candidates == nil {
		x.evaluated += len(x.nodes)
		for _, n := range x.nodes {
			if n.sel.Matches(ep.Labels, ns) {
				x.join(n, ep)
			}
		}
	} else {
		x.evaluated += len(candidates)
		for n := range candidates {
			if n.sel.Matches(ep.Labels, ns) {
				x.join(n, ep)
			}
		}
	}
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
	for n := range old.nodes {
		x.leave(n, old)
	}
}

// attach enters ep in the namespace, interface and local bookkeeping.
func (x *Index) attach(ep *endpoint) {
	eps := x.nsEps[ep.Namespace]
	if eps == nil {
		eps = map[*endpoint]struct{}{}
		x.nsEps[ep.Namespace] = eps
	}
	eps[ep] = struct{}{}
	if ep.Local {
		x.ifaces[ep.Iface] = ep.ID
		x.nsLocal[ep.Namespace]++
		x.dirtyProfiles[ep.Namespace] = struct{}{}
		x.dirtyWls[ep.ID] = struct{}{}
	}
}

// detach takes old out of the namespace, interface and local bookkeeping.
func (x *Index) detach(old *endpoint) {
	eps := x.nsEps[old.Namespace]
	delete(eps, old)
	if len(eps) == 0 {
		delete(x.nsEps, old.Namespace)
	}
	if old.Local {
		delete(x.ifaces, old.Iface)
		x.nsLocal[old.Namespace]--
		if x.nsLocal[old.Namespace] == 0 {
			delete(x.nsLocal, old.Namespace)
		}
		x.dirtyProfiles[old.Namespace] = struct{}{}
		x.dirtyWls[old.ID] = struct{}{}
	}
}

// join makes ep a member of n and puts what it contributes in n's sets.
func (x *Index) join(n *node, ep *endpoint) {
	ep.nodes[n] = struct{}{}
	n.eps[ep] = struct{}{}
	x.contribute(n, ep, +1)
}

// leave undoes join.
func (x *Index) leave(n *node, ep *endpoint) {
	delete(ep.nodes, n)
	delete(n.eps, ep)
	x.contribute(n, ep, -1)
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
		indexKeys(x.epKeys, sel.Endpoint, n, true)
		indexKeys(x.nsKeys, sel.Namespace, n, true)
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
	indexKeys(x.epKeys, n.sel.Endpoint, n, false)
	indexKeys(x.nsKeys, n.sel.Namespace, n, false)
	delete(x.nodes, n.key)
}

// indexKeys enters n under (add) or removes it from (!add) the key of
// each requirement in index.
func indexKeys(index map[string]map[*node]struct{}, reqs []Requirement, n *node, add bool) {
	for _, r := range reqs {
		ns := index[r.Key]
		if add {
			if ns == nil {
				ns = map[*node]struct{}{}
				index[r.Key] = ns
			}
			ns[n] = struct{}{}
		} else {
			delete(ns, n)
			if len(ns) == 0 {
				delete(index, r.Key)
			}
		}
	}
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

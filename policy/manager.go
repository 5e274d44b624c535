package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/managerutil"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// Manager renders network policy for one IP family onto a netfilter
// Table (and its Sets). It is a dataplane.Manager: register it with the
// loop together with its Table and Sets. Its methods are called from the
// loop's goroutine only.
type Manager struct {
	o        Options
	log      *slog.Logger
	model    *Model
	render   renderer
	early    []*early // Raw and Mangle, when given
	invalid  managerutil.Rejected
	hooked   bool
	setNames map[string]string // set ID → name in Sets, for sets declared

	dirtyPolicies  map[string]bool
	dirtyProfiles  map[string]bool
	dirtyWorkloads map[string]Workload     // by ID: the state last rendered (zero when new)
	rendered       map[string]Workload     // workload ID → what its chains were rendered from
	dirtyHosts     map[string]HostEndpoint // by ID: the state last rendered
	renderedHosts  map[string]HostEndpoint
	dispatchDirty  bool

	mu       sync.Mutex              // guards counted, which Counters reads
	counted  map[string]countedChain // policy and profile chains by name
	dispatch []string                // names of the dispatch chains declared
}

// New validates opts and returns a Manager with no policy: every workload
// interface is denied until its WorkloadUpdate. It does no I/O.
func New(opts Options) (*Manager, error) {
	c := managerutil.Check{Sentinel: ErrInvalidOptions}
	if managerutil.IsNil(opts.Raw) {
		opts.Raw = nil // a nil pointer in the interface is no Raw
	}
	if managerutil.IsNil(opts.Mangle) {
		opts.Mangle = nil
	}
	c.Family(opts.Family)
	c.Required("Filter", opts.Filter)
	if !managerutil.IsNil(opts.Sets) {
		c.Driver("Sets", opts.Sets, opts.Family)
	}
	c.Refuse(opts.ChainPrefix == "" || len(opts.ChainPrefix) > maxChainPrefix,
		"ChainPrefix %q must be 1 to %d bytes", opts.ChainPrefix, maxChainPrefix)
	c.Chain("ChainPrefix", opts.ChainPrefix)
	c.Refuse(len(opts.WorkloadPrefixes) == 0, "WorkloadPrefixes is required")
	for _, p := range opts.WorkloadPrefixes {
		c.Refuse(validIface(p, false) != nil, "workload prefix %q is not the start of an interface name", p)
	}
	bits := []uint32{opts.Marks.Accept, opts.Marks.Pass, opts.Marks.Scratch0}
	for i, b := range bits {
		c.Refuse(b == 0 || b&(b-1) != 0, "mark bit %d (%#x) must be one bit", i, b)
	}
	c.Refuse(bits[0]&bits[1] != 0 || bits[0]&bits[2] != 0 || bits[1]&bits[2] != 0, "mark bits Accept, Pass and Scratch0 must differ")
	c.Refuse(opts.Dispatch > DispatchVerdictMap, "unknown Dispatch %d", opts.Dispatch)
	if _, ok := opts.Filter.(*nftables.Table); opts.Dispatch == DispatchVerdictMap && !ok && c.Err() == nil {
		c.Refuse(true, "Dispatch verdict-map needs an *nftables.Table Filter, not %T", opts.Filter)
	}
	c.Refuse(opts.Deny > DenyReject, "unknown Deny %d", opts.Deny)
	c.Refuse(opts.EndpointToHost > ToHostDeny, "unknown EndpointToHost %d", opts.EndpointToHost)
	if opts.Failsafes == nil {
		d := DefaultFailsafes()
		opts.Failsafes = &d
	}
	for _, p := range slices.Concat(opts.Failsafes.In, opts.Failsafes.Out) {
		switch p.Protocol {
		case netfilter.ProtoTCP, netfilter.ProtoUDP, netfilter.ProtoSCTP:
		default:
			c.Refuse(true, "failsafe %v: the protocol must be TCP, UDP or SCTP", p)
		}
		c.Refuse(p.Port == 0, "failsafe %v: port 0", p)
	}
	if opts.LogLimit == nil {
		d := DefaultLogLimit()
		opts.LogLimit = &d
	}
	if opts.LogLimit.Rate != 0 {
		err := netfilter.Rule{Matches: []netfilter.Match{*opts.LogLimit}, Action: netfilter.Accept()}.Validate(opts.Family)
		c.Refuse(err != nil, "LogLimit: %v", err)
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	opts.Name = managerutil.Name(opts.Name, "policy", opts.Family)
	m := &Manager{
		o: opts, log: managerutil.Logger(opts.Logger), model: NewModel(),
		setNames:       map[string]string{},
		dirtyPolicies:  map[string]bool{},
		dirtyProfiles:  map[string]bool{},
		dirtyWorkloads: map[string]Workload{},
		rendered:       map[string]Workload{},
		dirtyHosts:     map[string]HostEndpoint{},
		renderedHosts:  map[string]HostEndpoint{},
		dispatchDirty:  true,
		counted:        map[string]countedChain{},
	}
	var deny netfilter.Action = netfilter.Drop()
	if opts.Deny == DenyReject {
		deny = netfilter.Reject(netfilter.RejectAdminProhibited)
	}
	m.render = renderer{
		family: opts.Family, prefix: opts.ChainPrefix, deny: deny, invalid: !opts.AllowInvalid,
		marks:   marks{accept: opts.Marks.Accept, pass: opts.Marks.Pass, scratch0: opts.Marks.Scratch0},
		setName: m.kernelSetName,
		setBad:  m.model.setBad,
	}
	if opts.LogLimit.Rate != 0 {
		m.render.logLimit = *opts.LogLimit
	}
	m.early = newEarly(opts, m.render)
	return m, nil
}

// Name returns the Manager's name for the loop's logs.
func (m *Manager) Name() string { return m.o.Name }

// Model returns the policy state the Manager renders from; Explain answers
// from it. It must not be changed, and is read from the loop's goroutine
// only.
func (m *Manager) Model() *Model { return m.model }

// OnUpdate records the package's messages; it ignores every other type.
// An invalid message changes nothing: the next CompleteDeferredWork
// reports it once.
func (m *Manager) OnUpdate(msg any) {
	if err := m.refuseEndpoint(msg); err != nil {
		m.invalid.Add(err)
		return
	}
	before := m.snapshot(msg)
	known, err := m.model.Update(msg)
	if !known {
		return
	}
	if err != nil {
		m.invalid.Add(err)
		return
	}
	m.noteChange(msg, before)
}

// refuseEndpoint returns why the Manager cannot render the endpoint msg
// adds or replaces as it asks, or nil: its chains would be reached by no
// dispatch rule (a workload whose interface no workload prefix starts, a
// host endpoint on a workload interface, which only workload policy
// polices), or it asks for a table the Manager was not given. Such a
// message changes nothing: the endpoint it replaces stays as it was.
func (m *Manager) refuseEndpoint(msg any) error {
	switch u := msg.(type) {
	case WorkloadUpdate:
		if !m.isWorkloadIface(u.Endpoint.Iface) {
			return fmt.Errorf("%w %s: interface %q does not start with one of WorkloadPrefixes %q",
				ErrInvalidEndpoint, u.Endpoint.ID, u.Endpoint.Iface, m.o.WorkloadPrefixes)
		}
	case HostEndpointUpdate:
		h := u.Endpoint
		switch {
		case h.Iface != WildcardIface && m.isWorkloadIface(h.Iface):
			return fmt.Errorf("%w %s: interface %q is a workload's (WorkloadPrefixes %q): workload policy polices it",
				ErrInvalidEndpoint, h.ID, h.Iface, m.o.WorkloadPrefixes)
		case len(h.PreDNATTiers) > 0 && m.o.Mangle == nil:
			return fmt.Errorf("%w %s: pre-DNAT tiers need Options.Mangle", ErrInvalidEndpoint, h.ID)
		case len(h.UntrackedTiers) > 0 && m.o.Raw == nil:
			return fmt.Errorf("%w %s: untracked tiers need Options.Raw", ErrInvalidEndpoint, h.ID)
		}
	}
	return nil
}

// isWorkloadIface says whether iface starts with one of the workload
// prefixes: only those interfaces reach the workload dispatch chains.
func (m *Manager) isWorkloadIface(iface string) bool {
	for _, p := range m.o.WorkloadPrefixes {
		if strings.HasPrefix(iface, p) {
			return true
		}
	}
	return false
}

// snapshot is what OnUpdate needs to know about the state msg changes,
// taken before it changes.
type snapshot struct {
	existed bool
	kind    SetKind // a set's
}

func (m *Manager) snapshot(msg any) snapshot {
	switch u := msg.(type) {
	case PolicyUpdate:
		_, ok := m.model.Policy(u.Policy.ID)
		return snapshot{existed: ok}
	case PolicyRemove:
		_, ok := m.model.Policy(u.ID)
		return snapshot{existed: ok}
	case ProfileUpdate:
		_, ok := m.model.Profile(u.Profile.ID)
		return snapshot{existed: ok}
	case ProfileRemove:
		_, ok := m.model.Profile(u.ID)
		return snapshot{existed: ok}
	case SetUpdate:
		kind, ok := m.model.Set(u.ID)
		return snapshot{existed: ok, kind: kind}
	case SetRemove:
		_, ok := m.model.Set(u.ID)
		return snapshot{existed: ok}
	}
	return snapshot{}
}

// noteChange marks dirty what msg changed.
func (m *Manager) noteChange(msg any, before snapshot) {
	switch u := msg.(type) {
	case PolicyUpdate:
		changed(m.dirtyPolicies, m.dirtyUsersOfPolicy, u.Policy.ID, true, before.existed)
	case PolicyRemove:
		changed(m.dirtyPolicies, m.dirtyUsersOfPolicy, u.ID, false, before.existed)
	case ProfileUpdate:
		changed(m.dirtyProfiles, m.dirtyUsersOfProfile, u.Profile.ID, true, before.existed)
	case ProfileRemove:
		changed(m.dirtyProfiles, m.dirtyUsersOfProfile, u.ID, false, before.existed)
	case SetUpdate:
		_, named := m.setNames[u.ID]
		m.declareSet(u.ID, u.Kind, u.Members)
		// Its users render differently once it exists, once the set
		// driver took it after refusing it, or once it is of another kind.
		if _, nowNamed := m.setNames[u.ID]; !before.existed || named != nowNamed || before.kind != u.Kind {
			m.dirtyUsersOfSet(u.ID)
		}
	case SetDelta:
		m.changeMembers(u.ID, u.Add, u.Remove)
	case SetRemove:
		if before.existed {
			m.removeSet(u.ID)
			m.dirtyUsersOfSet(u.ID)
		}
	case WorkloadUpdate:
		m.dirtyWorkload(u.Endpoint.ID)
	case WorkloadRemove:
		m.dirtyWorkload(u.ID)
	case HostEndpointUpdate:
		m.dirtyHost(u.Endpoint.ID)
	case HostEndpointRemove:
		m.dirtyHost(u.ID)
	}
}

// changed marks policy or profile id dirty when it is or was there, and
// the endpoints that list it when it came or went (their chains jump to
// it or deny in its place).
func changed(dirty map[string]bool, users func(string), id string, exists, existed bool) {
	if exists || existed {
		dirty[id] = true
	}
	if exists != existed {
		users(id)
	}
}

func (m *Manager) dirtyWorkload(id string) {
	if _, ok := m.dirtyWorkloads[id]; !ok {
		m.dirtyWorkloads[id] = m.rendered[id]
	}
	m.dispatchDirty = true
}

func (m *Manager) dirtyHost(id string) {
	if _, ok := m.dirtyHosts[id]; !ok {
		m.dirtyHosts[id] = m.renderedHosts[id]
	}
	m.dispatchDirty = true
}

// dirtyUsersOfPolicy marks dirty the workloads that list policy id: their
// chains jump to it or deny in its place.
func (m *Manager) dirtyUsersOfPolicy(id string) {
	lists := func(tiers ...[]TierPolicies) bool {
		for _, ts := range tiers {
			for _, t := range ts {
				if slices.Contains(t.Ingress, id) || slices.Contains(t.Egress, id) {
					return true
				}
			}
		}
		return false
	}
	for _, w := range m.model.Workloads() {
		if lists(w.Tiers) {
			m.dirtyWorkload(w.ID)
		}
	}
	for _, h := range m.model.HostEndpoints() {
		if lists(h.Tiers, h.ForwardTiers, h.PreDNATTiers, h.UntrackedTiers) {
			m.dirtyHost(h.ID)
		}
	}
}

func (m *Manager) dirtyUsersOfProfile(id string) {
	for _, w := range m.model.Workloads() {
		if slices.Contains(w.Profiles, id) {
			m.dirtyWorkload(w.ID)
		}
	}
	for _, h := range m.model.HostEndpoints() {
		if slices.Contains(h.Profiles, id) {
			m.dirtyHost(h.ID)
		}
	}
}

// dirtyUsersOfSet marks dirty the policies and profiles whose rules name
// set id: they render differently once it exists or is gone.
func (m *Manager) dirtyUsersOfSet(id string) {
	uses := func(rules []Rule) bool {
		for _, r := range rules {
			for _, p := range []Peer{r.Src, r.Dst} {
				if slices.Contains(p.Sets, id) || slices.Contains(p.NotSets, id) ||
					slices.Contains(p.NamedPorts, id) || slices.Contains(p.NotNamedPorts, id) {
					return true
				}
			}
		}
		return false
	}
	for _, pid := range m.model.PolicyIDs() {
		if p, _ := m.model.Policy(pid); uses(p.Ingress) || uses(p.Egress) {
			m.dirtyPolicies[pid] = true
		}
	}
	for _, pid := range m.model.ProfileIDs() {
		if p, _ := m.model.Profile(pid); uses(p.Ingress) || uses(p.Egress) {
			m.dirtyProfiles[pid] = true
		}
	}
}

// CompleteDeferredWork declares on the Table (and Sets) what changed since
// the last call: the chains of the policies, profiles and workloads that
// changed and the dispatch chains when workloads came or went. It returns
// at once when nothing changed and does no I/O. Invalid messages received
// since the last call are reported here, once; they changed nothing. An
// object the Table refuses is reported and, for a policy or profile,
// declared as a chain that denies (fail closed), so the rest goes on.
func (m *Manager) CompleteDeferredWork(context.Context) error {
	var errs []error
	if !m.hooked {
		if err := m.declareHooks(); err != nil {
			errs = append(errs, err)
		} else {
			m.hooked = true
		}
	}
	for _, id := range sortedKeys(m.dirtyPolicies) {
		p, ok := m.model.Policy(id)
		errs = append(errs, m.declarePolicy(id, p.Ingress, p.Egress, ok, false))
	}
	clear(m.dirtyPolicies)
	for _, id := range sortedKeys(m.dirtyProfiles) {
		p, ok := m.model.Profile(id)
		errs = append(errs, m.declarePolicy(id, p.Ingress, p.Egress, ok, true))
	}
	clear(m.dirtyProfiles)
	for _, id := range sortedKeys(m.dirtyWorkloads) {
		errs = append(errs, m.declareWorkload(id, m.dirtyWorkloads[id]))
	}
	clear(m.dirtyWorkloads)
	for _, id := range sortedKeys(m.dirtyHosts) {
		errs = append(errs, m.declareHost(id, m.dirtyHosts[id]))
	}
	clear(m.dirtyHosts)
	if m.dispatchDirty {
		errs = append(errs, m.declareDispatch())
		m.dispatchDirty = false
	}
	return m.invalid.Report(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// declarePolicy declares (exists) or removes the two chains of a policy
// or profile.
func (m *Manager) declarePolicy(id string, in, out []Rule, exists, profile bool) error {
	chains, acts := m.render.policyChains(id, in, out, profile)
	m.mu.Lock()
	for i, c := range chains {
		delete(m.counted, c.Name)
		if exists {
			m.counted[c.Name] = countedChain{id: id, profile: profile, ingress: i == 0, acts: acts[i]}
		}
	}
	m.mu.Unlock()
	var rawErr error
	if !profile {
		// The untracked and pre-DNAT tiers jump to their copies there.
		for _, e := range m.early {
			rawErr = errors.Join(rawErr, e.declarePolicy(m.model, id, in, out, exists))
		}
	}
	if !exists {
		return errors.Join(rawErr, m.o.Filter.RemoveChains(chains[0].Name, chains[1].Name))
	}
	err := m.o.Filter.SetChains(chains...)
	if err == nil {
		return rawErr
	}
	err = errors.Join(err, rawErr)
	m.mu.Lock()
	delete(m.counted, chains[0].Name)
	delete(m.counted, chains[1].Name)
	m.mu.Unlock()
	what := "policy"
	if profile {
		what = "profile"
	}
	for i := range chains {
		chains[i].Rules = []netfilter.Rule{{Action: m.render.deny, Comments: commentOf(what + " " + id + " was refused: fail closed")}}
	}
	return errors.Join(fmt.Errorf("policy: %s %s denies all: %w", what, id, err), m.o.Filter.SetChains(chains...))
}

// declareWorkload declares the chains of workload id, removing those of
// the interface it had before (old) when it moved or went — unless another
// workload holds that interface now (two swapped interfaces in one pass):
// that one's declaration replaces the chains, whichever comes first.
func (m *Manager) declareWorkload(id string, old Workload) error {
	w, ok := m.model.Workload(id)
	var errs []error
	if _, taken := m.model.WorkloadByIface(old.Iface); old.Iface != "" && (!ok || old.Iface != w.Iface) && !taken {
		errs = append(errs, m.o.Filter.RemoveChains(m.render.chainName(kindToWl, old.Iface), m.render.chainName(kindFromWl, old.Iface)))
	}
	if !ok {
		delete(m.rendered, id)
		return errors.Join(errs...)
	}
	if err := m.o.Filter.SetChains(m.render.workloadChains(m.model, w)...); err != nil {
		return errors.Join(append(errs, fmt.Errorf("policy: workload %s: %w", id, err))...)
	}
	m.rendered[id] = w
	return errors.Join(errs...)
}

// Root chains of the Manager, after ChainPrefix.
const (
	chainForward      = "forward"
	chainInput        = "input"
	chainFromDispatch = "fwd" // from-workload dispatch
	chainToDispatch   = "twd" // to-workload dispatch
	chainOutput       = "output"
	chainToHost       = "thd"   // to-host dispatch (input interface)
	chainFromHost     = "fhd"   // from-host dispatch (output interface)
	chainToHostFwd    = "thfwd" // forwarded in through a host endpoint
	chainFromHostFwd  = "fhfwd" // forwarded out through a host endpoint
	chainFailsafeIn   = "failsafe-in"
	chainFailsafeOut  = "failsafe-out"
	chainHostFwdIn    = "hep-fw-in"  // forwarded in through a host interface
	chainHostFwdOut   = "hep-fw-out" // forwarded out through a host interface
	// In Raw.
	chainRawPre         = "raw-pre"
	chainRawOut         = "raw-out"
	chainToHostRaw      = "thud" // untracked to-host dispatch
	chainFromHostRaw    = "fhud" // untracked from-host dispatch
	chainRawFailsafeIn  = "raw-failsafe-in"
	chainRawFailsafeOut = "raw-failsafe-out"
	// In Mangle.
	chainManglePre        = "mangle-pre"
	chainToHostPreDNAT    = "thpd" // pre-DNAT to-host dispatch
	chainMangleFailsafeIn = "mangle-failsafe-in"
)

// declareDispatch declares the dispatch trees of the workloads' and the
// host endpoints' interfaces and removes the dispatch chains no longer
// used. An unknown workload interface is denied; an interface without a
// host endpoint goes to the wildcard host endpoint, if there is one, else
// back (not policed).
func (m *Manager) declareDispatch() error {
	var ifaces, hosts []string
	for _, w := range m.model.Workloads() {
		if _, ok := m.rendered[w.ID]; ok {
			ifaces = append(ifaces, w.Iface)
		}
	}
	wildcard := false
	for _, h := range m.model.HostEndpoints() {
		if _, ok := m.renderedHosts[h.ID]; !ok {
			continue
		}
		if h.Iface == WildcardIface {
			wildcard = true
		} else {
			hosts = append(hosts, h.Iface)
		}
	}
	unknown := netfilter.Rule{Action: m.render.deny, Comments: []string{"unknown workload interface"}}
	hostFallback := func(kind string) netfilter.Rule {
		if wildcard {
			return netfilter.Rule{Action: netfilter.Goto(m.render.chainName(kind, WildcardIface)), Comments: []string{"wildcard host endpoint"}}
		}
		return netfilter.Rule{Action: netfilter.Return(), Comments: []string{"no host endpoint"}}
	}
	wl := slices.Concat(
		m.render.dispatch(chainFromDispatch, kindFromWl, ifaces, true, unknown),
		m.render.dispatch(chainToDispatch, kindToWl, ifaces, false, unknown))
	if m.o.Dispatch == DispatchVerdictMap {
		var err error
		if wl, err = m.declareVerdictMaps(ifaces, unknown); err != nil {
			return err
		}
	}
	chains := slices.Concat(wl,
		m.render.dispatch(chainToHost, kindToHost, hosts, true, hostFallback(kindToHost)),
		m.render.dispatch(chainFromHost, kindFromHost, hosts, false, hostFallback(kindFromHost)),
		m.render.dispatch(chainToHostFwd, kindToHostFwd, hosts, true, hostFallback(kindToHostFwd)),
		m.render.dispatch(chainFromHostFwd, kindFromHostFwd, hosts, false, hostFallback(kindFromHostFwd)))
	var names []string
	for _, c := range chains {
		names = append(names, c.Name)
	}
	var gone []string
	for _, n := range m.dispatch {
		if !slices.Contains(names, n) {
			gone = append(gone, n)
		}
	}
	if err := m.o.Filter.SetChains(chains...); err != nil {
		return fmt.Errorf("policy: dispatch: %w", err)
	}
	m.dispatch = names
	var errs []error
	if len(gone) > 0 {
		errs = append(errs, m.o.Filter.RemoveChains(gone...))
	}
	for _, e := range m.early {
		errs = append(errs, e.declareDispatch(hosts, hostFallback))
	}
	return errors.Join(errs...)
}

// Verdict maps of the workload dispatch (DispatchVerdictMap), after
// ChainPrefix.
const (
	mapFromDispatch = "fwd-map"
	mapToDispatch   = "twd-map"
)

// declareVerdictMaps declares the two verdict maps that send a packet by
// its input (from a workload) or output (to one) interface to the
// workload's chain, and returns the two dispatch chains that look them up
// and deny an interface they lack.
func (m *Manager) declareVerdictMaps(ifaces []string, unknown netfilter.Rule) ([]netfilter.Chain, error) {
	p := m.o.ChainPrefix
	from := nftables.Set{Name: p + mapFromDispatch, Key: []nftables.KeyType{nftables.TypeIface}, Verdict: true}
	to := nftables.Set{Name: p + mapToDispatch, Key: []nftables.KeyType{nftables.TypeIface}, Verdict: true}
	for _, iface := range ifaces {
		from.Elements = append(from.Elements, nftables.Element{Key: []nftables.Value{nftables.Iface(iface)},
			Verdict: netfilter.Goto(m.render.chainName(kindFromWl, iface))})
		to.Elements = append(to.Elements, nftables.Element{Key: []nftables.Value{nftables.Iface(iface)},
			Verdict: netfilter.Goto(m.render.chainName(kindToWl, iface))})
	}
	if err := m.o.Filter.(*nftables.Table).SetSets(from, to); err != nil {
		return nil, fmt.Errorf("policy: dispatch maps: %w", err)
	}
	return []netfilter.Chain{
		{Name: p + chainFromDispatch, Rules: []netfilter.Rule{{Action: netfilter.VerdictMap(from.Name, netfilter.Src)}, unknown}},
		{Name: p + chainToDispatch, Rules: []netfilter.Rule{{Action: netfilter.VerdictMap(to.Name, netfilter.Dst)}, unknown}},
	}, nil
}

// declareHooks declares the Manager's forward, input and output chains,
// the failsafe chains, and the jumps to them; then those of the early
// tables.
func (m *Manager) declareHooks() error {
	p := m.o.ChainPrefix
	acceptOrPass := m.o.Marks.Accept | m.o.Marks.Pass
	accepted := netfilter.Mark(m.o.Marks.Accept, m.o.Marks.Accept)
	clearMarks := netfilter.Rule{Action: netfilter.ClearMark(acceptOrPass)}
	in := func(iface string) []netfilter.Match { return []netfilter.Match{netfilter.InInterface(iface)} }
	out := func(iface string) []netfilter.Match { return []netfilter.Match{netfilter.OutInterface(iface)} }
	var first []netfilter.Rule
	if m.o.Raw != nil {
		first = []netfilter.Rule{m.allowedUntracked()}
	}
	input := append(slices.Clone(first), clearMarks, netfilter.Rule{Matches: in("lo"), Action: netfilter.Return(), Comments: []string{"loopback"}})
	output := append(slices.Clone(first), clearMarks, netfilter.Rule{Matches: out("lo"), Action: netfilter.Return(), Comments: []string{"loopback"}})
	var workloads []netfilter.Rule
	for _, wp := range m.o.WorkloadPrefixes {
		wl := wp + "+"
		workloads = append(workloads,
			netfilter.Rule{Matches: in(wl), Action: netfilter.Jump(p + chainFromDispatch), Comments: []string{"from workloads"}},
			netfilter.Rule{Matches: out(wl), Action: netfilter.Jump(p + chainToDispatch), Comments: []string{"to workloads"}})
		toHostAccepted := append(in(wl), accepted)
		if m.o.WorkloadsReachHost {
			toHostAccepted = in(wl) // no egress policy on the way
		} else {
			input = append(input,
				netfilter.Rule{Matches: in(wl), Action: netfilter.Jump(p + chainFromDispatch), Comments: []string{"from workloads to the host"}})
		}
		switch m.o.EndpointToHost {
		case ToHostAccept:
			input = append(input, netfilter.Rule{Matches: toHostAccepted, Action: netfilter.Accept()})
		case ToHostDeny:
			input = append(input, netfilter.Rule{Matches: in(wl), Action: m.render.deny,
				Comments: []string{"workloads may not reach the host"}})
		}
		input = append(input, netfilter.Rule{Matches: in(wl), Action: netfilter.Return(), Comments: []string{"host endpoints do not police workloads"}})
		output = append(output, netfilter.Rule{Matches: out(wl), Action: netfilter.Return(), Comments: []string{"the host may reach its workloads"}})
	}
	allowed := netfilter.Rule{Matches: []netfilter.Match{accepted}, Action: netfilter.Accept(), Comments: []string{"allowed by policy"}}
	// Forwarded packets meet, in turn, the forwarded ingress of the host
	// endpoint they came in through, the policy of the workloads they
	// leave or reach, and the forwarded egress of the host endpoint they
	// leave through; each stage denies or leaves the accept mark set.
	fwdIn := netfilter.Rule{Action: netfilter.Jump(p + chainHostFwdIn), Comments: []string{"forwarded in through host endpoints"}}
	forward := slices.Clone(first)
	if m.o.Mangle != nil {
		// A pre-DNAT policy's allow stands for the forwarded ingress.
		fwdIn.Matches = []netfilter.Match{netfilter.Mark(0, m.o.Marks.Accept)}
		fwdIn.Comments = append(fwdIn.Comments, "unless pre-DNAT policy allowed them")
		forward = append(forward, netfilter.Rule{Action: netfilter.ClearMark(m.o.Marks.Pass)})
	} else {
		forward = append(forward, clearMarks)
	}
	forward = slices.Concat(forward, []netfilter.Rule{fwdIn}, workloads, []netfilter.Rule{
		{Action: netfilter.Jump(p + chainHostFwdOut), Comments: []string{"forwarded out through host endpoints"}}, allowed})
	hostFwdIn := []netfilter.Rule{}
	hostFwdOut := []netfilter.Rule{}
	for _, wp := range m.o.WorkloadPrefixes {
		hostFwdIn = append(hostFwdIn, netfilter.Rule{Matches: in(wp + "+"), Action: netfilter.Return(), Comments: []string{"from a workload"}})
		hostFwdOut = append(hostFwdOut, netfilter.Rule{Matches: out(wp + "+"), Action: netfilter.Return(), Comments: []string{"to a workload"}})
	}
	chains := []netfilter.Chain{
		{Name: p + chainHostFwdIn, Rules: append(hostFwdIn, netfilter.Rule{Action: netfilter.Goto(p + chainToHostFwd)})},
		{Name: p + chainHostFwdOut, Rules: append(hostFwdOut, netfilter.Rule{Action: netfilter.Goto(p + chainFromHostFwd)})},
	}
	input = append(input, netfilter.Rule{Action: netfilter.Jump(p + chainToHost), Comments: []string{"host endpoints"}}, allowed)
	output = append(output, netfilter.Rule{Action: netfilter.Jump(p + chainFromHost), Comments: []string{"host endpoints"}}, allowed)
	chains = slices.Concat([]netfilter.Chain{
		{Name: p + chainForward, Rules: forward},
		{Name: p + chainInput, Rules: input},
		{Name: p + chainOutput, Rules: output},
	}, chains, m.render.failsafeChains(m.o.Failsafes.In, m.o.Failsafes.Out))
	if err := m.o.Filter.SetChains(chains...); err != nil {
		return err
	}
	if err := netfilter.DeclareJumps(m.o.Filter, netfilter.JumpInsert, m.o.Name,
		netfilter.HookJump{Hook: netfilter.HookForward, Chain: p + chainForward},
		netfilter.HookJump{Hook: netfilter.HookInput, Chain: p + chainInput},
		netfilter.HookJump{Hook: netfilter.HookOutput, Chain: p + chainOutput}); err != nil {
		return err
	}
	return m.declareEarlyHooks()
}

var _ dataplane.Manager = (*Manager)(nil)

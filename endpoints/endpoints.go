package endpoints

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/managerutil"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/sysctls"
)

// Kernel is what a Manager needs of the namespace: its interfaces, to list
// them at start and after a resync. A *kernel.Namespace implements it, and
// so does a kernelfake.Namespace.
type Kernel interface {
	kernel.Links
}

// Options configure a Manager. Family, Kernel and Routes are required, and
// SysctlDriver unless Sysctls is empty.
type Options struct {
	// Family is IPv4 or IPv6: one Manager per family.
	Family ipfamily.Family
	// Kernel is the namespace: a *kernel.Namespace, or a
	// kernelfake.Namespace in tests.
	Kernel Kernel
	// Routes is the family's route table (usually the main table) where
	// the Manager declares a route per endpoint address through the
	// endpoint's interface. Register RouteDriver with the loop in its
	// place, so that statuses say whether the routes were written.
	Routes *routetable.Table
	// RouteClass is the class of the Manager's routes in Routes. The zero
	// value is the lowest class, which wins over every other producer of
	// the same destination: a local workload's route should.
	RouteClass routetable.RouteClass
	// StaticNeighbors also programs a permanent neighbour entry (ARP or
	// NDP) for each host address of an endpoint with a MAC, so the host
	// never has to resolve it.
	StaticNeighbors bool
	// Sysctls are the per-interface sysctls every endpoint's interface
	// must hold. Nil means DefaultSysctls(Family); an empty non-nil slice
	// sets none.
	Sysctls []Sysctl
	// SysctlDriver keeps the sysctls: the Manager hands it each
	// interface's as a group (sysctls.Driver.SetGroup) and learns their
	// outcome from it (Watch). Register it with the loop too: its Apply
	// writes them, and the loop's resync and retry cover them. One Driver
	// may serve both families' Managers and the node's own settings.
	SysctlDriver *sysctls.Driver
	// OnStatus, if set, receives every change of an endpoint's Status. It
	// is called from the loop's goroutine, or from the goroutine that
	// applies RouteDriver or SysctlDriver, never concurrently, with the
	// Manager locked: it must be quick, not call the Manager and not call
	// Send on the loop (TrySend is fine).
	OnStatus func(Status)
	// Logger receives debug logs and warnings; nil discards them.
	Logger *slog.Logger
	// Name is returned by Name, for the loop's logs; empty means
	// "endpoints-v4" or "endpoints-v6".
	Name string
}

// endpoint is one endpoint of the Manager's family.
type endpoint struct {
	u        cluster.Endpoint // Addrs of the family only, sorted; no FloatingIPs
	routesOK bool             // an Apply since the routes were declared named no failure of them
	routeErr error            // the failure it named
}

// link is what the Manager knows of an interface.
type link struct {
	index int
	state kernel.LinkState
}

// iface is the per-interface work of the endpoints on it.
type iface struct {
	ids map[string]struct{} // the endpoints on it
	// configured is the link index whose sysctls were handed to the
	// sysctls driver; 0 none.
	configured int
	// declErr is the sysctls driver's refusal of the group, or nil.
	declErr error
	// sysctls holds the outcome of each sysctl's latest check, by key:
	// nil when the value is right, the failure otherwise; a key not
	// checked since configured was set is absent.
	sysctls map[string]error
}

// Manager programs the local workload endpoints of one IP family: their
// routes and static neighbours (through its route table) and their
// interfaces' sysctls (through the sysctls driver). It is a
// dataplane.Manager and a dataplane.Resyncer (a resync lists the
// interfaces again). Its methods are safe for concurrent use: the loop
// calls it from its goroutine, RouteDriver and the sysctls driver's
// outcome from the goroutines that apply them.
type Manager struct {
	o        Options
	log      *slog.Logger
	sysctls  []Sysctl
	mu       sync.Mutex
	eps      map[string]*endpoint
	invalid  map[string]error // IDs whose last message was invalid
	report   []error          // invalid messages, reported once
	links    map[string]link
	ifaces   map[string]*iface
	dirty    map[string]bool // interfaces whose routes must be declared again
	list     bool            // list the links at the next CompleteDeferredWork
	statuses map[string]Status
	driver   *routeDriver
}

// New validates opts and returns a Manager with no endpoint. It does no
// I/O: the first CompleteDeferredWork lists the interfaces.
func New(opts Options) (*Manager, error) {
	c := managerutil.Check{Sentinel: ErrInvalidOptions}
	c.Family(opts.Family)
	c.Required("Kernel", opts.Kernel)
	c.Driver("Routes", opts.Routes, opts.Family)
	settings := opts.Sysctls
	if settings == nil {
		settings = DefaultSysctls(opts.Family)
	}
	c.Refuse(len(settings) > 0 && opts.SysctlDriver == nil, "SysctlDriver is required to set Sysctls")
	for i, s := range settings {
		c.Refuse(s.Name == "" || s.Value == "" || strings.ContainsAny(s.Name, "/.\x00") || strings.ContainsAny(s.Value, "\n\x00"),
			"Sysctls[%d] %q = %q: want a leaf name and a one-line value", i, s.Name, s.Value)
		c.Refuse(s.Dir != "" && s.Dir != "conf" && s.Dir != "neigh", "Sysctls[%d] %s: Dir %q is neither conf nor neigh", i, s.Name, s.Dir)
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	opts.Name = managerutil.Name(opts.Name, "endpoints", opts.Family)
	m := &Manager{
		o: opts, log: managerutil.Logger(opts.Logger), sysctls: slices.Clone(settings),
		eps: map[string]*endpoint{}, invalid: map[string]error{}, links: map[string]link{},
		ifaces: map[string]*iface{}, dirty: map[string]bool{}, list: true, statuses: map[string]Status{},
	}
	m.driver = &routeDriver{m: m}
	if len(settings) > 0 {
		opts.SysctlDriver.Watch(m.sysctlsChecked)
	}
	return m, nil
}

// Name returns the Manager's name for the loop's logs.
func (m *Manager) Name() string { return m.o.Name }

// Statuses returns the last status reported for every endpoint, by ID.
func (m *Manager) Statuses() []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return managerutil.SortedValues(m.statuses, func(a, b Status) int { return strings.Compare(a.ID, b.ID) })
}

// OnUpdate records cluster.Endpoint and cluster.EndpointRemove messages;
// it ignores every other type. It does no I/O. An invalid endpoint message
// changes nothing: the endpoint's status becomes StateError and the next
// CompleteDeferredWork reports it once.
func (m *Manager) OnUpdate(msg any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch msg := msg.(type) {
	case cluster.Endpoint:
		m.update(msg)
	case cluster.EndpointRemove:
		if err := msg.Validate(); err != nil {
			m.report = append(m.report, managerutil.Refused(ErrInvalidEndpoint, err))
			return
		}
		delete(m.invalid, msg.ID)
		m.remove(msg.ID)
	}
}

// OnLink records an interface's state (dataplane.InterfaceObserver: the
// loop calls it for every link update it is given) and passes it to the
// route table (Routes.OnIfaceStateChanged), which only queues it. It does
// no I/O.
func (m *Manager) OnLink(l kernel.Link, state kernel.LinkState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setLink(l.Name, l.Index, state)
}

// OnAddrs does nothing: an interface's addresses are not the Manager's
// business. It completes dataplane.InterfaceObserver.
func (m *Manager) OnAddrs(string, []netip.Prefix) {}

func (m *Manager) update(u cluster.Endpoint) {
	if err := u.Validate(); err != nil {
		err = managerutil.Refused(ErrInvalidEndpoint, err)
		m.report = append(m.report, err)
		if u.ID != "" {
			m.invalid[u.ID] = err
		}
		return
	}
	delete(m.invalid, u.ID)
	var addrs []netip.Prefix
	for _, p := range u.Addrs {
		if ipfamily.Of(p.Addr()) == m.o.Family {
			addrs = append(addrs, p)
		}
	}
	if len(addrs) == 0 {
		m.remove(u.ID) // none of ours: another family's endpoint
		return
	}
	slices.SortFunc(addrs, netip.Prefix.Compare)
	addrs = slices.Compact(addrs)
	u.Addrs, u.MAC, u.FloatingIPs = addrs, slices.Clone(u.MAC), nil
	old := m.eps[u.ID]
	if old != nil && old.u.Iface == u.Iface && slices.Equal(old.u.Addrs, addrs) && slices.Equal(old.u.MAC, u.MAC) {
		return
	}
	if old != nil && old.u.Iface != u.Iface {
		m.dirty[old.u.Iface] = true
		delete(m.ifaces[old.u.Iface].ids, u.ID)
	}
	m.eps[u.ID] = &endpoint{u: u}
	m.dirty[u.Iface] = true
	ifc := m.ifaces[u.Iface]
	if ifc == nil {
		ifc = &iface{ids: map[string]struct{}{}}
		m.ifaces[u.Iface] = ifc
	}
	ifc.ids[u.ID] = struct{}{}
}

func (m *Manager) remove(id string) {
	e := m.eps[id]
	delete(m.statuses, id)
	if e == nil {
		return
	}
	delete(m.eps, id)
	delete(m.ifaces[e.u.Iface].ids, id)
	m.dirty[e.u.Iface] = true
}

// setLink records an interface's state and passes it to the route table.
func (m *Manager) setLink(name string, index int, state kernel.LinkState) {
	old, had := m.links[name]
	if state == kernel.LinkGone {
		delete(m.links, name)
	} else {
		m.links[name] = link{index: index, state: state}
	}
	m.o.Routes.OnIfaceStateChanged(name, index, state)
	if had && old.index == index && old.state == state {
		return
	}
	ifc := m.ifaces[name]
	if ifc != nil {
		// Routes through the interface are written again (the kernel drops
		// them when it goes down or away): wait for the next Apply to say
		// so.
		for id := range ifc.ids {
			e := m.eps[id]
			e.routesOK, e.routeErr = false, nil
		}
		if state == kernel.LinkGone || old.index != index {
			ifc.configured = 0 // a new interface has the kernel's defaults
		}
		if state == kernel.LinkUp && old.state != kernel.LinkUp {
			ifc.configured = 0 // check again as it comes (back) up
		}
	}
}

// QueueResync makes the next CompleteDeferredWork list the interfaces
// again. It implements dataplane.Resyncer: the loop calls it after the
// Manager failed and when it becomes active (the sysctls driver and the
// route table check the kernel on their own resync).
func (m *Manager) QueueResync() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.list = true
}

// CompleteDeferredWork lists the interfaces when due (first call,
// QueueResync), declares the routes of endpoints that changed on the route
// table, hands the sysctls of interfaces that appeared, came up or were
// re-created to the sysctls driver (and withdraws those of interfaces
// gone or left without endpoints), and reports the statuses that changed.
// It does no other I/O: the drivers write. A sysctl that fails is the
// endpoint's error (StateError), retried by the sysctls driver; the error
// returned is only a failed listing of the interfaces, a route declaration
// the table refused, or the invalid messages received since the last call
// (once).
func (m *Manager) CompleteDeferredWork(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	errs := m.report
	m.report = nil
	if m.list {
		if err := m.listLinks(ctx); err != nil {
			return errors.Join(append(errs, err)...)
		}
		m.list = false
	}
	if err := m.declareRoutes(); err != nil {
		errs = append(errs, err)
	}
	m.declareSysctls()
	m.publish()
	return errors.Join(errs...)
}

func (m *Manager) listLinks(ctx context.Context) error {
	links, err := m.o.Kernel.Links(ctx)
	if err != nil {
		return managerutil.Quote(ErrLinks, err)
	}
	seen := map[string]bool{}
	for _, l := range links {
		seen[l.Name] = true
		m.setLink(l.Name, l.Index, l.State())
	}
	for name, l := range m.links {
		if !seen[name] {
			m.setLink(name, l.index, kernel.LinkGone)
		}
	}
	return nil
}

// declareRoutes sets the routes of every interface whose endpoints changed.
func (m *Manager) declareRoutes() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(m.dirty)) {
		var targets []routetable.Target
		seen := map[netip.Prefix]bool{}
		for _, id := range m.idsOn(name) {
			e := m.eps[id]
			e.routesOK, e.routeErr = false, nil
			for _, p := range e.u.Addrs {
				if seen[p] {
					continue // two endpoints of one interface with one address
				}
				seen[p] = true
				t := routetable.Target{CIDR: p}
				if m.o.StaticNeighbors && len(e.u.MAC) == 6 && p.IsSingleIP() {
					t.DestMAC = e.u.MAC
				}
				targets = append(targets, t)
			}
		}
		if err := m.o.Routes.SetRoutes(m.o.RouteClass, name, targets); err != nil {
			errs = append(errs, err)
			continue // declared again at the next call
		}
		delete(m.dirty, name)
		if ifc := m.ifaces[name]; ifc != nil && len(ifc.ids) == 0 {
			m.withdrawSysctls(name, ifc)
			delete(m.ifaces, name)
		}
	}
	return errors.Join(errs...)
}

// idsOn returns the IDs of the endpoints on interface name, sorted.
func (m *Manager) idsOn(name string) []string {
	ifc := m.ifaces[name]
	if ifc == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(ifc.ids))
}

// group is the sysctls driver's group of interface name's sysctls.
func (m *Manager) group(name string) string { return m.o.Name + " " + name }

// declareSysctls hands the sysctls of every interface of an endpoint that
// exists to the sysctls driver when due (it appeared, came up or was
// re-created: RecheckGroup makes the driver check them again), and
// withdraws those of an interface that is gone.
func (m *Manager) declareSysctls() {
	if len(m.sysctls) == 0 {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(m.ifaces)) {
		ifc := m.ifaces[name]
		l, ok := m.links[name]
		if !ok || len(ifc.ids) == 0 {
			m.withdrawSysctls(name, ifc)
			continue
		}
		if ifc.configured == l.index {
			continue
		}
		settings := make([]sysctls.Setting, len(m.sysctls))
		for i, s := range m.sysctls {
			settings[i] = sysctls.Setting{Key: s.key(m.o.Family, name), Value: s.Value, Why: "workload interface " + name}
		}
		g := m.group(name)
		ifc.configured, ifc.sysctls, ifc.declErr = l.index, map[string]error{}, nil
		if err := m.o.SysctlDriver.SetGroup(g, settings); err != nil {
			ifc.declErr = managerutil.Quote(ErrSysctl, err, name)
			m.log.Warn("endpoints: interface sysctls refused", "iface", name, "error", err)
			continue
		}
		m.o.SysctlDriver.RecheckGroup(g)
	}
}

// withdrawSysctls withdraws interface name's sysctls from the sysctls
// driver, which leaves their values as they are.
func (m *Manager) withdrawSysctls(name string, ifc *iface) {
	if ifc.configured == 0 && ifc.declErr == nil {
		return
	}
	ifc.configured, ifc.sysctls, ifc.declErr = 0, nil, nil
	if len(m.sysctls) > 0 {
		_ = m.o.SysctlDriver.SetGroup(m.group(name), nil) // removing a group never fails
	}
}

// sysctlsChecked takes the outcome of the sysctls driver's check of
// settings (sysctls.Driver.Watch): the results of our interfaces' sysctls
// are recorded, and the statuses that changed reported.
func (m *Manager) sysctlsChecked(rep sysctls.Report) {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := false
	for _, res := range rep.Results {
		name, ok := m.keyIface(res.Setting.Key)
		ifc := m.ifaces[name]
		if !ok || ifc == nil || ifc.sysctls == nil {
			continue
		}
		seen = true
		if res.Outcome != sysctls.Failed {
			ifc.sysctls[res.Setting.Key] = nil
			continue
		}
		cause := res.Err
		if oe, failing := m.o.SysctlDriver.Failure(res.Setting.Key); failing && oe.Err != nil {
			cause = oe.Err
		}
		ifc.sysctls[res.Setting.Key] = managerutil.Quote(ErrSysctl, cause, res.Setting.Key)
		if !errors.Is(cause, kernel.ErrNotFound) {
			m.log.Warn("endpoints: interface sysctl not applied", "iface", name, "key", res.Setting.Key, "error", cause)
		}
	}
	if seen {
		m.publish()
	}
}

// keyIface returns the interface whose sysctl key is, when it is one of
// this Manager's.
func (m *Manager) keyIface(key string) (string, bool) {
	for _, s := range m.sysctls {
		k := s.key(m.o.Family, "")
		// k is "net/<fam>/<dir>//<leaf>": the interface sits between.
		pre, leaf, _ := strings.Cut(k, "//")
		rest, ok := strings.CutPrefix(key, pre+"/")
		if !ok {
			continue
		}
		if name, ok := strings.CutSuffix(rest, "/"+leaf); ok && m.ifaces[name] != nil {
			return name, true
		}
	}
	return "", false
}

// sysctlState says what the latest checks of interface ifc's sysctls
// found: missing when one found no such interface, err the first other
// failure (in Options.Sysctls order), and done when every one was checked.
func (m *Manager) sysctlState(name string, ifc *iface) (missing, done bool, err error) {
	if ifc.declErr != nil {
		return false, true, ifc.declErr
	}
	done = ifc.sysctls != nil
	for _, s := range m.sysctls {
		e, checked := ifc.sysctls[s.key(m.o.Family, name)]
		switch {
		case !checked:
			done = false
		case e != nil && errors.Is(e, kernel.ErrNotFound):
			missing = true
		case e != nil && err == nil:
			err = e
		}
	}
	return missing, done, err
}

// afterRoutes takes the outcome of the route table's Apply.
func (m *Manager) afterRoutes(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil && !errors.Is(err, dataplane.ErrPartial) {
		return // the table failed as a whole: it tells nothing of our routes
	}
	byKey := map[netip.Prefix][]*endpoint{}
	for _, e := range m.eps {
		for _, p := range e.u.Addrs {
			byKey[p] = append(byKey[p], e)
		}
	}
	failed := map[*endpoint]error{}
	complete := true
	var pe *dataplane.PartialError
	if errors.As(err, &pe) {
		for _, oe := range pe.Objects() {
			ro, ok := oe.Object.(routetable.RouteObject)
			if !ok {
				continue // neighbour or conntrack failures name no route
			}
			for _, e := range byKey[ro.Key.CIDR] {
				if ro.Iface == "" || ro.Iface == e.u.Iface {
					failed[e] = oe
				}
			}
		}
		complete = pe.Failed+pe.Waiting <= len(pe.Errs)
	}
	for _, e := range m.eps {
		if _, pending := m.dirty[e.u.Iface]; pending {
			// The Table refused the interface's routes: none was written.
			e.routesOK = false
			continue
		}
		switch ferr, bad := failed[e]; {
		case bad:
			e.routesOK, e.routeErr = false, ferr
		case complete:
			e.routesOK, e.routeErr = true, nil
		}
		// Not named in a truncated list: keep what was known.
	}
	m.publish()
}

// status computes the status of endpoint id.
func (m *Manager) status(id string) (Status, bool) {
	if err, bad := m.invalid[id]; bad {
		st := Status{ID: id, Family: m.o.Family, State: StateError, Err: err}
		if e := m.eps[id]; e != nil {
			st.Iface = e.u.Iface
		}
		return st, true
	}
	e := m.eps[id]
	if e == nil {
		return Status{}, false
	}
	st := Status{ID: id, Iface: e.u.Iface, Family: m.o.Family}
	l, ok := m.links[e.u.Iface]
	ifc := m.ifaces[e.u.Iface]
	var missing, sysctlsDone bool
	var sysctlErr error
	if ifc != nil {
		missing, sysctlsDone, sysctlErr = m.sysctlState(e.u.Iface, ifc)
	}
	switch {
	case !ok || missing:
		st.State = StateInterfaceMissing
	case sysctlErr != nil:
		st.State, st.Err = StateError, sysctlErr
	case e.routeErr != nil && errors.Is(e.routeErr, routetable.ErrIfaceGone):
		st.State = StateInterfaceMissing
	case l.state != kernel.LinkUp || (e.routeErr != nil && errors.Is(e.routeErr, routetable.ErrIfaceDown)):
		st.State = StateInterfaceDown
	case e.routeErr != nil:
		st.State, st.Err = StateError, managerutil.Quote(ErrRoute, e.routeErr)
	case ifc == nil || (len(m.sysctls) > 0 && (ifc.configured != l.index || !sysctlsDone)) || !e.routesOK:
		return Status{}, false // not known yet: the next Apply tells
	default:
		st.State = StateProgrammed
	}
	return st, true
}

// publish reports every status that changed.
func (m *Manager) publish() {
	ids := make([]string, 0, len(m.eps)+len(m.invalid))
	for id := range m.eps {
		ids = append(ids, id)
	}
	for id := range m.invalid {
		if m.eps[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		st, ok := m.status(id)
		if !ok {
			continue
		}
		if old, had := m.statuses[id]; had && old.State == st.State && old.Iface == st.Iface && sameErr(old.Err, st.Err) {
			continue
		}
		m.statuses[id] = st
		m.log.Debug("endpoints: status", "status", st.String())
		if cb := m.o.OnStatus; cb != nil {
			cb(st)
		}
	}
}

func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}

var (
	_ dataplane.Manager           = (*Manager)(nil)
	_ dataplane.Resyncer          = (*Manager)(nil)
	_ dataplane.InterfaceObserver = (*Manager)(nil)
)

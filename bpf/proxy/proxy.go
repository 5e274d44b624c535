package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/ifname"
	"github.com/nodeplane/nodeplane/internal/managerutil"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Kernel is what the Proxy needs of a network namespace: running the
// attachment of its programs inside it. *kernel.Namespace implements it.
type Kernel interface {
	kernel.Doer
}

// Default map sizes (entries).
const (
	DefaultFrontends    = 65536
	DefaultBackends     = 262144
	DefaultConnections  = 131072
	DefaultAffinities   = 65536
	DefaultSourceRanges = 16384
)

// Options configure a Proxy. The zero value of each field is its
// documented default; Kernel and PinDir are required.
type Options struct {
	// Name is used in logs and errors; default "bpf-proxy".
	Name string
	// Kernel is the namespace whose interfaces the programs are attached
	// to.
	Kernel Kernel
	// PinDir is a directory on a bpffs that holds the Proxy's maps and
	// attachments (their pins keep them working while no agent runs). One
	// Proxy per directory; it owns everything in it. It (or its nearest
	// existing parent) must be on a bpffs: the first Apply checks that
	// before it creates anything (the directory included) and otherwise
	// fails with an error wrapping ErrLoad and maps.ErrNotBPFFS.
	PinDir string
	// HostInterfaces are the node's interfaces that traffic from other
	// hosts arrives on (the underlay). NodePorts and external IPs are
	// served there. Like the pod interfaces, they must carry Ethernet
	// headers (physical, VXLAN, veth, bridge): a device OnLink reports
	// without them (kernel.Link.Encap other than kernel.EncapEthernet:
	// WireGuard, IPIP, tun), host or pod, is refused for itself — a
	// partial error wrapping ErrAttach, retried at each Apply, that holds
	// back no other interface. (A Link whose Encap is empty, one made by
	// hand, is taken as Ethernet.)
	HostInterfaces []string
	// PodInterfacePrefixes name the host side of pod interfaces: an
	// interface whose name starts with one of them is a pod's, and
	// connections its pod opens to a service are translated there.
	PodInterfacePrefixes []string
	// MasqueradeMark and MasqueradeMask: when MasqueradeMark is not zero,
	// a connection from another host to a NodePort or external IP that is
	// sent to a backend on another node carries this mark (in the bits of
	// MasqueradeMask), and the agent masquerades marked packets in
	// netfilter (see MasqueradeRule) so the reply comes back through this
	// node. Zero: no mark; give such services ExternalTrafficLocal.
	MasqueradeMark, MasqueradeMask uint32
	// RejectMark and RejectMask: when RejectMark is not zero, a new
	// connection to a frontend whose service has no ready backend is
	// passed on untranslated with this mark (in the bits of RejectMask),
	// and the agent rejects marked packets in netfilter's FORWARD path as
	// kube-proxy does — TCP with a reset, others with ICMP port
	// unreachable, so a client fails at once instead of waiting for its
	// timeout (package serviceloop takes the mark as Options.RejectMarks,
	// see RejectMark). The marked packet must reach FORWARD: the node
	// needs a route for the service addresses (its default route does);
	// without one, the kernel answers "network unreachable", which a TCP
	// client takes as a soft error and waits out. Zero: such packets are
	// dropped.
	// (Externally-local traffic that finds no local backend is dropped
	// either way, as with kube-proxy; a process of the node's own namespace
	// translated at connect() gets EPERM from connect.)
	RejectMark, RejectMask uint32
	// Cgroup is a cgroup v2 directory (such as
	// /sys/fs/cgroup/unified/kubepods, or the node's root cgroup in
	// production) whose processes' connections to services are translated
	// at connect() (and, for unconnected UDP, at each sendmsg()) by cgroup
	// programs, for the processes of the node's own network namespace
	// (hostNetwork pods, the kubelet) whose packets never cross the
	// interfaces the tc programs are on. Empty: none. Only sockets in
	// Kernel's network namespace are translated (the programs compare the
	// namespace's cookie), so a cgroup shared with processes of other
	// namespaces, pods included, is safe, unless ConnectTimePods says
	// otherwise. The directory must be an
	// absolute path; it is first opened by Apply, where a hook that cannot
	// be attached to it is a partial error (ErrAttach) that holds back
	// nothing else. See "Connect-time translation" in the package
	// documentation.
	Cgroup string
	// ConnectTimeTCPOnly leaves UDP out of the connect-time translation
	// (Options.Cgroup): the node's own datagrams to a service are
	// translated per packet at the egress of the host interface their
	// route leaves by, as when there is no Cgroup (see "Connect-time
	// translation"), so that a connected UDP socket whose backend goes
	// away reaches another one with its next datagram instead of keeping
	// the address connect() gave it. It needs a Cgroup (New refuses it
	// otherwise).
	ConnectTimeTCPOnly bool
	// ConnectTimePods translates at connect() the sockets of every
	// process in Cgroup, whatever its network namespace (pods, in the
	// kubepods cgroup or the root one), not only the node's: a pod's
	// connection to a service then carries the backend's address from its
	// first packet, and the tc programs have nothing to translate, track
	// or close for it. Netfilter (network policy included) sees the backend's
	// address, as it does after kube-proxy's DNAT. The pod's socket shows
	// the service as its peer (getpeername, recvmsg). What cannot be
	// decided at connect() stays with the tc programs, per packet: session
	// affinity and source ranges (they key on the client's address) and a
	// service without a backend for the client (so a pod still gets a
	// reset or an ICMP error, not EPERM). Like the node's, a pod's
	// connected UDP socket keeps its backend; ConnectTimeTCPOnly leaves
	// UDP per packet. Every network namespace in Cgroup is translated, so
	// Cgroup must hold only processes that are the cluster's clients. It
	// needs a Cgroup (New refuses it otherwise). See "Connect-time
	// translation" in the package documentation.
	ConnectTimePods bool
	// Attach is how the programs are attached to the interfaces:
	// AttachAuto (the zero value) uses TCX when the kernel has it (Linux
	// 6.6 or later) and classic tc (a bpf filter on the clsact qdisc)
	// otherwise; AttachTCX and AttachTC use one of them only. See "Attach
	// modes" in the package documentation.
	Attach AttachMode
	// Frontends, Backends and Connections size the maps; zero means
	// DefaultFrontends, DefaultBackends and DefaultConnections. A map of
	// another size found pinned is replaced (the connection map's entries
	// are then lost, so established connections re-pick a backend).
	// Connections also sizes the connect-time programs' map of translated
	// sockets. A service takes one frontend entry per frontend (cluster
	// IP, external IP, node address with its NodePort) and one backend
	// entry per backend; the services that do not fit wait, whole
	// (ErrMapFull). The connection map np_ct evicts nothing: a new
	// connection that finds it full is dropped and counted
	// (ConntrackStatus.Full); the socket map of the connect-time programs
	// is an LRU map.
	Frontends, Backends, Connections uint32
	// SourceRanges sizes the map of the services' source ranges (one
	// entry per range and service family); zero means
	// DefaultSourceRanges. A service whose ranges do not fit waits, whole
	// (ErrMapFull).
	SourceRanges uint32
	// Affinities sizes the map of session affinities (the backend each
	// client's last connection to a service with AffinityTimeout went to,
	// an LRU map); zero means DefaultAffinities.
	Affinities uint32
	// Maglev turns on consistent hashing for the connections from
	// outside the node; see MaglevOptions.
	Maglev MaglevOptions
	// DSR turns on direct server return for node ports, external and
	// load-balancer IPs: a connection from outside that this node sends
	// to a backend on another node goes there with the frontend in an IP
	// option (IPv6: a destination options header), unmasqueraded, and
	// that node's Proxy (with DSR too) answers the client directly from
	// the frontend's address. See "Direct server return" in the package
	// documentation for the topology it needs.
	DSR bool
	// LocalRedirect sends a pod's connection to a backend pod on this node,
	// and the backend's replies, from one pod's interface straight to the
	// other's (bpf_redirect_peer), past the node's routing and netfilter:
	// the connection costs about what a direct one does. What
	// netfilter would do to those packets does not happen — network
	// policy written in netfilter (package policy's rules, kube-proxy's),
	// conntrack, the FORWARD chain's counters — so turn it on only where
	// pod-to-pod traffic on the node needs none of it. Pods must be
	// attached by veth pairs whose host side the Proxy is on (the pod
	// interfaces of PodInterfacePrefixes); anything else takes the usual
	// way. See "Local redirect" in the package documentation.
	LocalRedirect bool
	// Conntrack sets the connection entries' timeouts and their
	// scanner's pace (run it with Run).
	Conntrack ConntrackOptions
	// Logger receives the Proxy's logs; nil discards them.
	Logger *slog.Logger
	// Clock times the retries of entries and interfaces that failed; nil
	// means the real clock.
	Clock clock.Clock
}

// Status is a snapshot of what the Proxy has programmed.
type Status struct {
	// Services is the number of services written; Frontends and Backends
	// count their map entries.
	Services, Frontends, Backends int
	// Interfaces are the interfaces the programs are attached to, and
	// "cgroup:" followed by Options.Cgroup once all the connect-time
	// programs are attached to it.
	Interfaces []string
	// Errors are the services and interfaces that are not programmed, and
	// why: one line per service that waits (a frontend conflict, no room
	// in the maps, no service ID) or was malformed, one per interface or
	// cgroup hook that failed to attach, one per host interface no link
	// update named, and one when no interface is known at all.
	Errors []string
	// Attach is the attach mode in use: AttachTCX or AttachTC once an
	// Apply chose it (with Options.Attach AttachAuto, by probing the
	// kernel once), Options.Attach before.
	Attach AttachMode
	// Conntrack is the state of the connection entries, as the scanner
	// (Run) last saw it: all zero while it does not run.
	Conntrack ConntrackStatus
}

// tally counts the services written and their entries.
type tally struct {
	services, frontends, backends int
}

// add counts service s in (sign 1) or out (sign -1).
func (t *tally) add(s *svc, sign int) {
	if len(s.fes) > 0 || len(s.bes) > 0 {
		t.services += sign
	}
	t.frontends += sign * len(s.fes)
	t.backends += sign * len(s.bes)
}

// kindService is the kind of a service's ObjectError: one that waits,
// refused whole (a frontend conflict, no service ID, no room).
const kindService dataplane.ObjectKind = "service"

// svc is one service as the Proxy tracks it.
type svc struct {
	s   cluster.Service
	ids [2]uint32 // by famIndex, once allocated (IDs are never 0)
	// written are the map keys the service has in the desired state.
	fes     []feKey
	bes     []beKey
	srcs    []srcKey
	mgs     []mgKey
	removed bool // a ServiceRemove came: the next Apply withdraws it
}

// iface is an interface as the interface monitor reported it.
type iface struct {
	index int
	host  bool   // a host interface, else a pod's
	encap string // kernel.Link.Encap: the link-layer type, "" when unknown
}

// Proxy is the BPF service proxy: a dataplane.Manager that takes services
// as messages and a dataplane.Driver that writes them into the maps of its
// NAT program and keeps the program attached to the host and pod
// interfaces. Use New; register it with the loop as both.
type Proxy struct {
	o   Options
	log *slog.Logger

	mu sync.Mutex // guards everything below; Status reads it from other goroutines

	services  map[string]*svc
	dirty     map[string]bool
	report    []error // invalid messages, for the next CompleteDeferredWork
	invalid   map[string]error
	nodeAddrs []netip.Addr
	links     map[string]iface
	// owners maps each frontend in the desired state to its service.
	owners map[feKey]string
	// refused holds the services that wait, by name: refused for a
	// frontend another holds, for want of a free service ID or of room in
	// the maps, each held (no timed retry) until what held it back
	// changes (a service lets go of frontends, and so of its IDs and its
	// room; a resync).
	refused *dataplane.Ledger[string]
	// unseen is what warnUnseen last logged.
	unseen string
	// tally is what Status reports of the services, kept up to date by
	// Apply so that Status costs nothing per service.
	tally tally

	// failed holds the interfaces and cgroup hooks whose attachment
	// failed, with their backoff.
	failed *dataplane.Ledger[string]
	k      *kstate // the kernel side: maps, program, attachments (nil until the first Apply)
	resync bool
	// linksDirDue asks the next Apply to make the attachments' directory
	// again (after a resync: someone may have removed it).
	linksDirDue bool
	// linksChanged says the wanted interfaces changed since the last
	// sweep of np_ifs (attach_linux.go).
	linksChanged bool

	// ct is what the connection scanner (Run) reports; it has its own lock.
	ct ctShared
}

// New validates opts and returns a Proxy. It does no I/O.
func New(opts Options) (*Proxy, error) {
	o := opts
	if o.Name == "" {
		o.Name = "bpf-proxy"
	}
	if o.Kernel == nil {
		return nil, fmt.Errorf("%w: no Kernel", ErrInvalidOptions)
	}
	if o.PinDir == "" || !filepath.IsAbs(o.PinDir) {
		return nil, fmt.Errorf("%w: PinDir %q is not an absolute path", ErrInvalidOptions, o.PinDir)
	}
	o.PinDir = filepath.Clean(o.PinDir)
	for _, n := range o.HostInterfaces {
		if err := ifname.Valid(n); err != nil {
			return nil, fmt.Errorf("%w: host interface: %w", ErrInvalidOptions, err)
		}
	}
	for _, p := range o.PodInterfacePrefixes {
		// A prefix is the start of an interface name, so it obeys the same
		// rules.
		if err := ifname.Valid(p); err != nil {
			return nil, fmt.Errorf("%w: pod interface prefix: %w", ErrInvalidOptions, err)
		}
	}
	if o.Cgroup != "" {
		if !filepath.IsAbs(o.Cgroup) {
			return nil, fmt.Errorf("%w: Cgroup %q is not an absolute path", ErrInvalidOptions, o.Cgroup)
		}
		o.Cgroup = filepath.Clean(o.Cgroup)
	} else if o.ConnectTimeTCPOnly || o.ConnectTimePods {
		return nil, fmt.Errorf("%w: ConnectTimeTCPOnly or ConnectTimePods without a Cgroup: there is no connect-time translation", ErrInvalidOptions)
	}
	if o.Attach > AttachTC {
		return nil, fmt.Errorf("%w: unknown Attach %v", ErrInvalidOptions, o.Attach)
	}
	if o.MasqueradeMark&^o.MasqueradeMask != 0 || (o.MasqueradeMark == 0) != (o.MasqueradeMask == 0) {
		return nil, fmt.Errorf("%w: MasqueradeMark %#x must be non-zero and within MasqueradeMask %#x (or both zero)",
			ErrInvalidOptions, o.MasqueradeMark, o.MasqueradeMask)
	}
	if o.RejectMark&^o.RejectMask != 0 || (o.RejectMark == 0) != (o.RejectMask == 0) {
		return nil, fmt.Errorf("%w: RejectMark %#x must be non-zero and within RejectMask %#x (or both zero)",
			ErrInvalidOptions, o.RejectMark, o.RejectMask)
	}
	if o.RejectMask != 0 && o.RejectMask&o.MasqueradeMask != 0 {
		return nil, fmt.Errorf("%w: RejectMask %#x and MasqueradeMask %#x overlap", ErrInvalidOptions, o.RejectMask, o.MasqueradeMask)
	}
	o.Frontends = orDefault(o.Frontends, DefaultFrontends)
	o.Backends = orDefault(o.Backends, DefaultBackends)
	o.Connections = orDefault(o.Connections, DefaultConnections)
	o.Affinities = orDefault(o.Affinities, DefaultAffinities)
	o.SourceRanges = orDefault(o.SourceRanges, DefaultSourceRanges)
	var err error
	if o.Maglev, err = o.Maglev.withDefaults(); err != nil {
		return nil, err
	}
	if o.Conntrack, err = o.Conntrack.withDefaults(); err != nil {
		return nil, err
	}
	o.Clock = clock.OrReal(o.Clock)
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Proxy{o: o, log: log, services: map[string]*svc{}, dirty: map[string]bool{},
		invalid: map[string]error{}, links: map[string]iface{}, owners: map[feKey]string{},
		refused: dataplane.NewLedger[string](dataplane.Backoff{}, o.Clock), failed: dataplane.NewLedger[string](dataplane.Backoff{}, o.Clock)}, nil
}

func orDefault(v, d uint32) uint32 {
	if v == 0 {
		return d
	}
	return v
}

// Name returns Options.Name.
func (p *Proxy) Name() string { return p.o.Name }

// Phase places the Proxy with the tables: its maps refer to nothing the
// other drivers write.
func (p *Proxy) Phase() dataplane.Phase { return dataplane.PhaseTables }

// MasqueradeRule is the netfilter rule an agent puts in its nat table's
// POSTROUTING (or a chain it jumps to from there) when it sets
// Options.MasqueradeMark: masquerade the packets the program marked. ok is
// false without a mark.
func (p *Proxy) MasqueradeRule() (r netfilter.Rule, ok bool) {
	if p.o.MasqueradeMark == 0 {
		return netfilter.Rule{}, false
	}
	return netfilter.Rule{
		Matches:  []netfilter.Match{netfilter.Mark(p.o.MasqueradeMark, p.o.MasqueradeMask)},
		Action:   netfilter.Masquerade(),
		Comments: []string{"bpf-proxy: service traffic to a backend on another node"},
	}, true
}

// RejectMark is Options.RejectMark with its mask, as a netfilter match,
// for the rules that reject the marked packets: give it to package
// serviceloop (Options.RejectMarks), which answers them as kube-proxy
// answers a connection to a service without endpoints. ok is false
// without a mark.
func (p *Proxy) RejectMark() (m netfilter.MatchMark, ok bool) {
	if p.o.RejectMark == 0 {
		return netfilter.MatchMark{}, false
	}
	return netfilter.MatchMark{Mark: p.o.RejectMark, Mask: p.o.RejectMask}, true
}

// OnUpdate records a message of the cluster vocabulary: cluster.Service
// (declare or replace a service, by name), cluster.ServiceRemove and
// cluster.NodeAddrs (the addresses NodePorts answer on; each replaces the
// last). Others are ignored. A malformed message changes nothing and is
// reported by the next CompleteDeferredWork.
func (p *Proxy) OnUpdate(msg any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch m := msg.(type) {
	case cluster.Service:
		s := m
		if err := s.Validate(); err != nil {
			err = managerutil.Refused(ErrInvalidService, err)
			p.report = append(p.report, err)
			if s.Name != "" {
				p.invalid[s.Name] = err
			}
			return
		}
		delete(p.invalid, s.Name)
		s.ClusterIPs, s.ExternalIPs, s.Backends = slices.Clone(s.ClusterIPs), slices.Clone(s.ExternalIPs), slices.Clone(s.Backends)
		old := p.services[s.Name]
		if old == nil {
			old = &svc{}
			p.services[s.Name] = old
		}
		old.s, old.removed = s, false
		p.dirty[s.Name] = true
	case cluster.ServiceRemove:
		if err := m.Validate(); err != nil {
			p.report = append(p.report, managerutil.Refused(ErrInvalidService, err))
			return
		}
		delete(p.invalid, m.Name)
		if s, ok := p.services[m.Name]; ok {
			s.removed = true
			p.dirty[m.Name] = true
		}
	case cluster.NodeAddrs:
		if err := m.Validate(); err != nil {
			p.report = append(p.report, managerutil.Refused(ErrInvalidService, err))
			return
		}
		addrs := slices.Clone(m.Addrs)
		slices.SortFunc(addrs, netip.Addr.Compare)
		addrs = slices.Compact(addrs)
		if slices.Equal(addrs, p.nodeAddrs) {
			return
		}
		p.nodeAddrs = addrs
		for name, s := range p.services {
			// Node ports are served on the node's addresses; whether the
			// node may reach source-ranged IPs depends on them too.
			if s.s.NodePort != 0 || len(s.s.SourceRanges) > 0 {
				p.dirty[name] = true
			}
		}
	}
}

// OnLink records the state of an interface the programs go on (one of
// Options.HostInterfaces, or a name with one of
// Options.PodInterfacePrefixes) and ignores the others. It implements
// dataplane.InterfaceObserver: the loop calls it for every link update it
// is given, and runs an apply pass after, which attaches the programs to an
// interface that appeared and follows a name that comes back with a new
// index.
func (p *Proxy) OnLink(l kernel.Link, state kernel.LinkState) {
	host, ok := p.wanted(l.Name)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	was, had := p.links[l.Name]
	if state == kernel.LinkGone {
		delete(p.links, l.Name)
	} else {
		p.links[l.Name] = iface{index: l.Index, host: host, encap: l.Encap}
	}
	if now, has := p.links[l.Name]; has != had || now != was {
		p.linksChanged = true
	}
}

// OnAddrs does nothing: the Proxy attaches to interfaces whatever their
// addresses (NodePorts answer on cluster.NodeAddrs). It completes
// dataplane.InterfaceObserver.
func (p *Proxy) OnAddrs(string, []netip.Prefix) {}

var (
	_ dataplane.InterfaceObserver = (*Proxy)(nil)
	_ dataplane.StatsReporter     = (*Proxy)(nil)
)

// wanted says whether the programs go on interface name, and as a host
// interface or a pod's.
func (p *Proxy) wanted(name string) (host, ok bool) {
	if slices.Contains(p.o.HostInterfaces, name) {
		return true, true
	}
	for _, pre := range p.o.PodInterfacePrefixes {
		if strings.HasPrefix(name, pre) {
			return false, true
		}
	}
	return false, false
}

// CompleteDeferredWork reports the malformed messages received since the
// last call. The Proxy turns services into map entries in Apply, where it
// can read the maps to keep the IDs it gave before a restart.
func (p *Proxy) CompleteDeferredWork(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := p.report
	p.report = nil
	return errors.Join(errs...)
}

// QueueResync makes the next Apply read the maps and the attachments
// again.
func (p *Proxy) QueueResync() {
	p.mu.Lock()
	p.resync = true
	p.mu.Unlock()
}

// Status returns a snapshot of what is programmed. It is safe to call from
// any goroutine.
func (p *Proxy) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Status{Services: p.tally.services, Frontends: p.tally.frontends, Backends: p.tally.backends, Attach: p.attachModeInUse()}
	for _, e := range p.refused.Errors() {
		st.Errors = append(st.Errors, e.Error())
	}
	for n, err := range p.invalid {
		st.Errors = append(st.Errors, fmt.Sprintf("%s: %v", n, err))
	}
	if p.k != nil {
		st.Interfaces = p.k.attachedNames()
		for _, e := range p.failed.Errors() {
			st.Errors = append(st.Errors, e.Error())
		}
		st.Errors = append(st.Errors, p.unseenInterfaces()...)
	}
	slices.Sort(st.Errors)
	st.Conntrack = p.ct.get()
	return st
}

// Counters returns the programs' counters of each service written, by
// name; nil before the first Apply. It reads the kernel (one map lookup
// per service family), which Status does not, and is safe to call from
// any goroutine.
func (p *Proxy) Counters() map[string]ServiceCounters {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.k == nil {
		return nil
	}
	return p.k.serviceCounters(p.services)
}

// Stats returns the Proxy's dataplane.DriverStats: map entries,
// interface attachments and cgroup hooks wanted, held and failing, with
// the services waiting (refused for a conflict, an ID or room) counted as
// failing, and the writes since New: entries written and deleted,
// attachments made, replaced in place and detached. It is all
// zero before the first Apply opened the maps. It implements
// dataplane.StatsReporter and is safe to call from any goroutine.
func (p *Proxy) Stats() dataplane.DriverStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.k == nil {
		return dataplane.DriverStats{}
	}
	st := p.k.stats(len(p.links))
	st.Failing += p.failed.Len() + p.refused.Len()
	return st
}

// unseenInterfaces says which interfaces the programs cannot be attached
// to for want of a link update: each of Options.HostInterfaces that no
// update says exists, and, when no interface is known at all, that the
// programs are attached to none (an agent that does not feed the Proxy
// its interface monitor's updates).
func (p *Proxy) unseenInterfaces() []string {
	var out []string
	if len(p.links) == 0 {
		out = append(out, "no interface known: the programs are attached to none "+
			"(no link update the loop handed to OnLink named a host interface or a pod interface)")
	}
	for _, n := range p.o.HostInterfaces {
		if _, ok := p.links[n]; !ok {
			out = append(out, fmt.Sprintf("interface %s: no link update says it exists: the programs are not attached to it", n))
		}
	}
	return out
}

// warnUnseen logs unseenInterfaces when it changed since the last Apply:
// a warning while interfaces are missing, once per change.
func (p *Proxy) warnUnseen() {
	msgs := p.unseenInterfaces()
	now := strings.Join(msgs, "; ")
	if now == p.unseen {
		return
	}
	p.unseen = now
	if now == "" {
		p.log.Info("bpf proxy: the interfaces are known", "name", p.o.Name)
		return
	}
	p.log.Warn("bpf proxy: interfaces missing", "name", p.o.Name, "problems", msgs)
}

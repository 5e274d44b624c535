package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routetable"
)

// Status is the agent's state as its local endpoint serves it (GET /status)
// and the status command prints it.
type Status struct {
	// Node and Overlay are the agent's configuration.
	Node    string `json:"node"`
	Overlay string `json:"overlay"`
	// WireGuard is whether encryption is on.
	WireGuard bool `json:"wireguard"`
	// Masquerade is the netfilter backend of the masquerade rules
	// ("iptables-legacy", "iptables-nft" or "nftables"), or "off".
	Masquerade string `json:"masquerade"`
	// StartedAt is when the agent started.
	StartedAt time.Time `json:"startedAt"`
	// Live, Ready and the in-sync markers are the loop's health.
	Live             bool `json:"live"`
	Ready            bool `json:"ready"`
	DatastoreInSync  bool `json:"datastoreInSync"`
	InterfacesInSync bool `json:"interfacesInSync"`
	// Datastore is the datastore's link to its server, for a datastore
	// that reports one (the Kubernetes API server's); nil for one that
	// does not (a file).
	Datastore *DatastoreStatus `json:"datastore,omitempty"`
	// InSyncAt is when the first successful apply pass ended: the
	// dataplane was programmed.
	InSyncAt time.Time `json:"inSyncAt,omitzero"`
	// LastApply is when the last successful apply pass ended.
	LastApply time.Time `json:"lastApply,omitzero"`
	// Applies counts apply passes.
	Applies uint64 `json:"applies"`
	// LastError and LastErrorAt are the loop's most recent failure.
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	// ConsecutiveFailures, FailingDrivers and FailingObjects say what is
	// failing now.
	ConsecutiveFailures int      `json:"consecutiveFailures"`
	FailingDrivers      []string `json:"failingDrivers,omitempty"`
	FailingObjects      int      `json:"failingObjects"`
	// HostMTU, HostMTUInterface and PodMTU are the MTU monitor's.
	HostMTU          int    `json:"hostMTU"`
	HostMTUInterface string `json:"hostMTUInterface,omitempty"`
	PodMTU           int    `json:"podMTU"`
	// Nodes are the cluster's nodes as the datastore has them.
	Nodes []NodeStatus `json:"nodes"`
	// LocalPods are this node's pods.
	LocalPods []PodStatus `json:"localPods"`
	// Routes are the routes the agent owns in the kernel (main table and
	// the WireGuard table), read when the status was asked for.
	Routes []RouteStatus `json:"routes"`
	// RoutesError is why Routes could not be read, if so.
	RoutesError string `json:"routesError,omitempty"`
	// Services counts the datastore's services; ServicesNote says what
	// the agent does with them.
	Services     int    `json:"services"`
	ServicesNote string `json:"servicesNote,omitempty"`
	// ProxyErrors are the services and interfaces the BPF proxy could
	// not program, and why.
	ProxyErrors []string `json:"proxyErrors,omitempty"`
	// Zone is this node's zone for topology aware routing (--node-zone,
	// else the datastore's), empty for none.
	Zone string `json:"zone,omitempty"`
	// HealthChecks are the load balancer health check servers of the
	// services with externalTrafficPolicy Local (with the BPF proxy).
	HealthChecks []HealthCheckStatus `json:"healthChecks,omitempty"`
	// WireGuardDevices are the WireGuard managers' reports.
	WireGuardDevices []WireGuardStatus `json:"wireguardDevices,omitempty"`
	// Errors are the agent's own recent errors (publishing, say).
	Errors []string `json:"errors,omitempty"`
	// Drivers are the states of the drivers that report one
	// (dataplane.Stater), and DriversError why some could not.
	Drivers      []DriverState `json:"drivers,omitempty"`
	DriversError string        `json:"driversError,omitempty"`
}

// DatastoreStatus is the datastore's link to its server
// (datastore.ConnectionReporter). While it is lost the dataplane keeps the
// last cluster the datastore delivered, and the agent stays ready: the
// pods' traffic flows as before, only changes wait.
type DatastoreStatus struct {
	// Connected is whether the datastore reaches its server now.
	Connected bool `json:"connected"`
	// Since is when Connected last changed: since when the server has
	// been lost, or reached again (zero: not known).
	Since time.Time `json:"since,omitzero"`
	// Stale are the resources the datastore has not read again since an
	// outage (datastore.StaleReporter: a permission lost meanwhile, say):
	// their last state stands while the others are followed.
	Stale []string `json:"stale,omitempty"`
}

// datastoreStatus returns the link of the agent's datastore, nil when it
// does not report one.
func (a *Agent) datastoreStatus() *DatastoreStatus {
	r := connectionReporter(a.cfg.Datastore)
	if r == nil {
		return nil
	}
	ok, since := r.Connected()
	st := &DatastoreStatus{Connected: ok, Since: since}
	if s, isStale := r.(datastore.StaleReporter); isStale {
		st.Stale = s.Stale()
	}
	return st
}

// connectionReporter returns ds (or the datastore it wraps, for the CNI
// installation's) as a datastore.ConnectionReporter, nil when it is not
// one.
func connectionReporter(ds datastore.Datastore) datastore.ConnectionReporter {
	if c, ok := ds.(*cniInstaller); ok {
		ds = c.Datastore
	}
	r, _ := ds.(datastore.ConnectionReporter)
	return r
}

// NodeStatus is one node as the agent sees it.
type NodeStatus struct {
	// Name is the node's name; Self marks this node.
	Name string `json:"name"`
	Self bool   `json:"self,omitempty"`
	// Underlay are its underlay addresses, comma-separated.
	Underlay string `json:"underlay"`
	// PodCIDRs are its blocks.
	PodCIDRs []string `json:"podCIDRs"`
	// TunnelIP and VTEPMAC are its IPv4 VXLAN endpoint's, TunnelIPv6 and
	// VTEPMACv6 its IPv6 one's.
	TunnelIP   string `json:"tunnelIP,omitempty"`
	VTEPMAC    string `json:"vtepMAC,omitempty"`
	TunnelIPv6 string `json:"tunnelIPv6,omitempty"`
	VTEPMACv6  string `json:"vtepMACv6,omitempty"`
	// WireGuard and WireGuardV6 are the public keys of its IPv4 and IPv6
	// WireGuard devices, if published.
	WireGuard   string `json:"wireguardKey,omitempty"`
	WireGuardV6 string `json:"wireguardKeyV6,omitempty"`
}

// PodStatus is one local pod.
type PodStatus struct {
	// Name is "namespace/name".
	Name string `json:"name"`
	// Interface is its host-side interface.
	Interface string `json:"interface"`
	// IPs are its addresses.
	IPs []string `json:"ips"`
	// State is the interface's: up, down or missing.
	State string `json:"state"`
}

// RouteStatus is one route the agent owns.
type RouteStatus struct {
	// Destination is the route's prefix.
	Destination string `json:"destination"`
	// Via is its gateway, if any.
	Via string `json:"via,omitempty"`
	// Device is its output interface, if any.
	Device string `json:"device,omitempty"`
	// Table is its routing table.
	Table uint32 `json:"table"`
	// Kind is what the route is for: local pod, vxlan, ipip, wireguard,
	// direct, blackhole.
	Kind string `json:"kind"`
}

// WireGuardStatus is one WireGuard manager's state.
type WireGuardStatus struct {
	// Device is the interface name.
	Device string `json:"device"`
	// Enabled is whether encryption is on.
	Enabled bool `json:"enabled"`
	// Mode is the provider in use (kernel or userspace), and ModeReason
	// why.
	Mode       string `json:"mode"`
	ModeReason string `json:"modeReason,omitempty"`
	// PublicKey is this node's key.
	PublicKey string `json:"publicKey,omitempty"`
	// Peers counts the nodes that are peers; NotPeers names the others.
	Peers    int      `json:"peers"`
	NotPeers []string `json:"notPeers,omitempty"`
	// RuleInstalled is whether the routing rule is in place.
	RuleInstalled bool `json:"ruleInstalled"`
}

// status gathers the agent's Status; it reads the kernel's routes.
func (a *Agent) status(ctx context.Context) Status {
	a.mu.Lock()
	h, c, m, inSync := a.health, a.cluster, a.mtu, a.inSyncAt
	errs := slices.Clone(a.lastErrs)
	a.mu.Unlock()
	s := Status{Node: a.cfg.NodeName, Overlay: string(a.cfg.Overlay), WireGuard: a.cfg.WireGuard, Masquerade: string(a.plane.netfilter), StartedAt: a.started,
		Live: h.Live, Ready: h.Ready, DatastoreInSync: h.DatastoreInSync, InterfacesInSync: h.InterfacesInSync,
		InSyncAt: inSync, LastApply: h.LastApply, Applies: h.Applies, LastErrorAt: h.LastErrorAt, ConsecutiveFailures: h.ConsecutiveFailures,
		FailingDrivers: h.FailingDrivers, FailingObjects: h.FailingObjects,
		HostMTU: m.Host.MTU, HostMTUInterface: m.Host.Interface, PodMTU: m.PodMTU,
		Services: len(c.Services), ServicesNote: "not load-balanced (run with --bpf-proxy)", Errors: errs,
		Datastore: a.datastoreStatus()}
	if a.plane.proxy != nil {
		ps := a.plane.proxy.Status()
		s.ServicesNote = fmt.Sprintf("bpf proxy: service ports %d, frontends %d, backends %d, on %s",
			ps.Services, ps.Frontends, ps.Backends, strings.Join(ps.Interfaces, ","))
		s.ProxyErrors = ps.Errors
	}
	s.Zone = nodeZone(c, a.cfg.NodeName, a.cfg.NodeZone)
	if a.healthChecks != nil {
		s.HealthChecks = a.healthChecks.Status()
	}
	if a.cfg.NoMasquerade {
		s.Masquerade = "off"
	}
	s.Drivers, s.DriversError = a.driverStates(ctx)
	if h.LastError != nil {
		s.LastError = h.LastError.Error()
	}
	for _, n := range c.Nodes {
		v := nodeOf(n)
		ns := NodeStatus{Name: n.Name, Self: n.Name == a.cfg.NodeName, WireGuard: n.WireGuardPublicKey,
			WireGuardV6: n.WireGuardPublicKeyV6}
		if n.UnderlayIPv4.IsValid() {
			ns.Underlay = n.UnderlayIPv4.String()
		}
		if n.UnderlayIPv6.IsValid() {
			ns.Underlay = strings.TrimPrefix(ns.Underlay+","+n.UnderlayIPv6.String(), ",")
		}
		for _, p := range n.PodCIDRs {
			ns.PodCIDRs = append(ns.PodCIDRs, p.String())
		}
		if v.TunnelV4.IsValid() {
			ns.TunnelIP, ns.VTEPMAC = v.TunnelV4.String(), v.VXLANMACV4.String()
		}
		if v.TunnelV6.IsValid() {
			ns.TunnelIPv6, ns.VTEPMACv6 = v.TunnelV6.String(), v.VXLANMACV6.String()
		}
		s.Nodes = append(s.Nodes, ns)
	}
	links, lerr := a.ns.Links(ctx)
	byIndex, byName := map[int]kernel.Link{}, map[string]kernel.Link{}
	for _, l := range links {
		byIndex[l.Index], byName[l.Name] = l, l
	}
	for _, p := range c.Pods {
		if p.Node != a.cfg.NodeName {
			continue
		}
		ps := PodStatus{Name: p.Key(), Interface: p.HostInterface(), State: "missing"}
		for _, ip := range p.IPs {
			ps.IPs = append(ps.IPs, ip.String())
		}
		if l, ok := byName[ps.Interface]; ok {
			ps.State = l.State().String()
		}
		s.LocalPods = append(s.LocalPods, ps)
	}
	for _, w := range a.plane.wg {
		st := w.Status()
		ws := WireGuardStatus{Device: st.Device, Enabled: st.Enabled, Mode: st.Mode.String(), ModeReason: st.ModeReason,
			Peers: st.Peers, NotPeers: st.NotPeers, RuleInstalled: st.RuleInstalled}
		if !st.PublicKey.IsZero() {
			ws.PublicKey = st.PublicKey.String()
		}
		s.WireGuardDevices = append(s.WireGuardDevices, ws)
	}
	if lerr != nil {
		s.RoutesError = lerr.Error()
		return s
	}
	for fam := range a.plane.tables {
		for _, table := range []uint32{kernel.TableMain, a.plane.wgTable} {
			err := a.ns.DumpRoutes(ctx, fam, table, func(r *kernel.Route) error {
				if rs, ok := a.routeStatus(r, byIndex); ok {
					s.Routes = append(s.Routes, rs)
				}
				return nil
			}, func() { s.Routes = slices.DeleteFunc(s.Routes, func(rs RouteStatus) bool { return rs.Table == table }) })
			if err != nil {
				s.RoutesError = err.Error()
			}
		}
	}
	slices.SortFunc(s.Routes, func(x, y RouteStatus) int {
		if x.Table != y.Table {
			return int(x.Table) - int(y.Table)
		}
		px, _ := netip.ParsePrefix(x.Destination)
		py, _ := netip.ParsePrefix(y.Destination)
		if c := px.Addr().Compare(py.Addr()); c != 0 {
			return c
		}
		return px.Bits() - py.Bits()
	})
	return s
}

// routeStatus describes a route of ours; ok is false for a foreign one.
func (a *Agent) routeStatus(r *kernel.Route, links map[int]kernel.Link) (RouteStatus, bool) {
	dev := links[r.OIF].Name
	ours := r.Protocol == routetable.DefaultProtocol || r.Table == a.plane.wgTable ||
		(strings.HasPrefix(dev, a.cfg.PodInterfacePrefix) && r.Protocol != kernel.ProtoKernel)
	if !ours {
		return RouteStatus{}, false
	}
	rs := RouteStatus{Destination: r.Dst.String(), Device: dev, Table: r.Table}
	if r.Gateway.IsValid() {
		rs.Via = r.Gateway.String()
	}
	switch {
	case r.Type == kernel.RTNBlackhole && r.Table == a.plane.wgTable:
		rs.Kind = "blackhole (WireGuard fail-closed)"
	case r.Type == kernel.RTNBlackhole:
		rs.Kind = "blackhole (own block)"
	case r.Type == kernel.RTNThrow:
		rs.Kind = "throw (not a peer)"
	case strings.HasPrefix(dev, a.cfg.PodInterfacePrefix):
		rs.Kind = "local pod"
	case a.plane.devices[dev] != "":
		rs.Kind = a.plane.devices[dev]
	case rs.Via != "":
		rs.Kind = "direct"
	default:
		rs.Kind = "other"
	}
	return rs, true
}

func (a *Agent) serveStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(a.status(ctx))
}

// WriteTable prints s as a table for people: the agent's health, the nodes,
// the local pods, the routes, WireGuard and the services.
func WriteTable(out io.Writer, s Status, now time.Time) error {
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return now.Sub(t).Round(time.Millisecond).String() + " ago"
	}
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	fmt.Fprintf(w, "node %s\toverlay %s\twireguard %s\tmasquerade %s\tup %s\n", s.Node, s.Overlay, yes(s.WireGuard), dash(s.Masquerade), now.Sub(s.StartedAt).Round(time.Second))
	fmt.Fprintf(w, "ready %s\tlast apply %s\tapplies %d\tpod MTU %d (host %d, %s)\n", yes(s.Ready), ago(s.LastApply), s.Applies, s.PodMTU, s.HostMTU, s.HostMTUInterface)
	errs := "none"
	if s.LastError != "" {
		errs = fmt.Sprintf("%s (%s)", s.LastError, ago(s.LastErrorAt))
	}
	fmt.Fprintf(w, "errors\t%s; failing now: %d passes, %d objects, drivers %v\n", errs, s.ConsecutiveFailures, s.FailingObjects, s.FailingDrivers)
	if d := s.Datastore; d != nil {
		state := "connected"
		if !d.Connected {
			state = "DISCONNECTED"
		}
		if !d.Since.IsZero() {
			state += fmt.Sprintf(" for %s (since %s)", now.Sub(d.Since).Round(time.Second), d.Since.UTC().Format(time.RFC3339))
		}
		if !d.Connected {
			state += ": the dataplane keeps the last cluster it learned"
		}
		if len(d.Stale) > 0 {
			state += fmt.Sprintf("; STALE %s: not read again since an outage, their last state stands", strings.Join(d.Stale, ", "))
		}
		fmt.Fprintf(w, "datastore\t%s\n", state)
	}
	for _, e := range s.Errors {
		fmt.Fprintf(w, "agent error\t%s\n", e)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "NODE\tUNDERLAY\tPOD CIDRS\tTUNNEL IP\tVTEP MAC\tWIREGUARD KEY")
	for _, n := range s.Nodes {
		name := n.Name
		if n.Self {
			name += " (self)"
		}
		both := func(v4, v6 string) string { return strings.Trim(v4+","+v6, ",") }
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", name, dash(n.Underlay), dash(strings.Join(n.PodCIDRs, ",")),
			dash(both(n.TunnelIP, n.TunnelIPv6)), dash(both(n.VTEPMAC, n.VTEPMACv6)), dash(both(short(n.WireGuard), short(n.WireGuardV6))))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "LOCAL POD\tINTERFACE\tIPS\tSTATE")
	for _, p := range s.LocalPods {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", p.Name, p.Interface, strings.Join(p.IPs, ","), p.State)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "ROUTE\tVIA\tDEVICE\tTABLE\tKIND")
	for _, r := range s.Routes {
		table := fmt.Sprint(r.Table)
		if r.Table == kernel.TableMain {
			table = "main"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.Destination, dash(r.Via), dash(r.Device), table, r.Kind)
	}
	if s.RoutesError != "" {
		fmt.Fprintf(w, "routes not read: %s\n", s.RoutesError)
	}
	for _, g := range s.WireGuardDevices {
		if !g.Enabled {
			continue
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "wireguard %s\tmode %s\tpeers %d\trule %s\tkey %s\n", g.Device, g.Mode, g.Peers, yes(g.RuleInstalled), dash(short(g.PublicKey)))
		if len(g.NotPeers) > 0 {
			fmt.Fprintf(w, "  not peers\t%s\n", strings.Join(g.NotPeers, ","))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "services %d\t%s\n", s.Services, s.ServicesNote)
	for _, e := range s.ProxyErrors {
		fmt.Fprintf(w, "  not programmed\t%s\n", e)
	}
	if s.Zone != "" {
		fmt.Fprintf(w, "  zone\t%s (topology aware routing)\n", s.Zone)
	}
	for _, h := range s.HealthChecks {
		var where []string
		if len(h.Listening) > 0 {
			where = append(where, "on "+strings.Join(h.Listening, ","))
		}
		if len(h.Errors) > 0 {
			where = append(where, "not listening: "+strings.Join(h.Errors, "; "))
		}
		fmt.Fprintf(w, "  health check\t%s port %d, local endpoints %d, %s\n", h.Service, h.Port, h.LocalEndpoints, strings.Join(where, "; "))
	}
	writeDriverStates(w, s)
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func short(key string) string {
	if len(key) > 12 {
		return key[:10] + "…"
	}
	return key
}

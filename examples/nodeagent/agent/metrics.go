package agent

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeplane/nodeplane/bpf/proxy"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/wireguard"
)

// Metrics backs dataplane.Metrics (and wireguard.Metrics) with Prometheus
// collectors, all named nodeplane_agent_*. Register it once with Register.
type Metrics struct {
	dataplane.NopMetrics

	driverApply    *prometheus.HistogramVec
	failedObjects  *prometheus.CounterVec
	managerWork    *prometheus.HistogramVec
	passes         *prometheus.HistogramVec
	queueDepth     prometheus.Gauge
	resyncs        *prometheus.CounterVec
	ready          prometheus.Gauge
	consecFailures prometheus.Gauge
	failingObjects prometheus.Gauge
	nodes          prometheus.Gauge
	localPods      prometheus.Gauge
	services       prometheus.Gauge
	proxyState     *prometheus.GaugeVec
	wgRx, wgTx     *prometheus.GaugeVec
	wgHandshake    *prometheus.GaugeVec
	datastore      *datastoreCollector
	reg            prometheus.Registerer
}

var _ dataplane.Metrics = (*Metrics)(nil)
var _ wireguard.Metrics = (*Metrics)(nil)

// NewMetrics returns the agent's collectors, registered on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	const ns = "nodeplane_agent"
	buckets := prometheus.ExponentialBuckets(0.0001, 4, 10) // 100 µs … 26 s
	m := &Metrics{
		reg: reg,
		driverApply: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "driver_apply_seconds",
			Help: "Duration of each driver Apply (deletions=true: ApplyDeletions), by outcome.", Buckets: buckets},
			[]string{"driver", "phase", "deletions", "outcome"}),
		failedObjects: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "driver_failed_objects_total",
			Help: "Objects a driver tried to write and the kernel refused."}, []string{"driver"}),
		managerWork: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "manager_work_seconds",
			Help: "Duration of each manager's CompleteDeferredWork, by outcome.", Buckets: buckets},
			[]string{"manager", "outcome"}),
		passes: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "pass_seconds",
			Help: "Duration of each pass of the dataplane loop, by outcome (active=false: standby).", Buckets: buckets},
			[]string{"active", "outcome"}),
		queueDepth: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "queue_depth",
			Help: "Messages waiting in the dataplane loop's input queue."}),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "resyncs_total",
			Help: "Resyncs the loop asked of a driver or manager, by reason."}, []string{"name", "reason"}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "ready",
			Help: "1 once the dataplane has been programmed after both in-sync markers."}),
		consecFailures: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "consecutive_failed_passes",
			Help: "Passes since the last success in which a manager or driver failed."}),
		failingObjects: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "failing_objects",
			Help: "Objects the drivers report as failing, waiting for their retry."}),
		nodes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "nodes",
			Help: "Nodes in the datastore, this one included."}),
		localPods: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "local_pods",
			Help: "Pods of this node in the datastore."}),
		services: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "services",
			Help: "Services in the datastore."}),
		proxyState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "bpf_proxy",
			Help: "What the BPF service proxy has programmed (service_ports, frontends, backends, interfaces), what it could not (errors), " +
				"and its connection entries (conntrack_entries of conntrack_capacity; conntrack_full_drops: new connections dropped for want of room; " +
				"conntrack_closed, _expired, _stale, _orphans: entries removed; conntrack_scan_seconds: the last full scan's cost)."},
			[]string{"what"}),
		wgRx: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "wireguard_peer_receive_bytes",
			Help: "Bytes received from each WireGuard peer."}, []string{"peer"}),
		wgTx: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "wireguard_peer_transmit_bytes",
			Help: "Bytes sent to each WireGuard peer."}, []string{"peer"}),
		wgHandshake: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "wireguard_peer_last_handshake_seconds",
			Help: "Unix time of each WireGuard peer's last handshake."}, []string{"peer"}),
		datastore: &datastoreCollector{},
	}
	for _, c := range []prometheus.Collector{m.driverApply, m.failedObjects, m.managerWork, m.passes, m.queueDepth,
		m.resyncs, m.ready, m.consecFailures, m.failingObjects, m.nodes, m.localPods, m.services, m.proxyState, m.wgRx, m.wgTx, m.wgHandshake, m.datastore} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// DriverApplied implements dataplane.Metrics.
func (m *Metrics) DriverApplied(a dataplane.DriverApply) {
	m.driverApply.WithLabelValues(a.Driver, a.Phase.String(), strconv.FormatBool(a.Deletions), a.Outcome.String()).Observe(a.Duration.Seconds())
	if a.FailedObjects > 0 {
		m.failedObjects.WithLabelValues(a.Driver).Add(float64(a.FailedObjects))
	}
}

// ManagerCompleted implements dataplane.Metrics.
func (m *Metrics) ManagerCompleted(w dataplane.ManagerWork) {
	m.managerWork.WithLabelValues(w.Manager, w.Outcome.String()).Observe(w.Duration.Seconds())
}

// PassCompleted implements dataplane.Metrics.
func (m *Metrics) PassCompleted(p dataplane.PassStats) {
	m.passes.WithLabelValues(strconv.FormatBool(p.Active), p.Outcome.String()).Observe(p.Duration.Seconds())
}

// QueueDepth implements dataplane.Metrics.
func (m *Metrics) QueueDepth(n int) { m.queueDepth.Set(float64(n)) }

// Resynced implements dataplane.Metrics.
func (m *Metrics) Resynced(e dataplane.ResyncEvent) {
	m.resyncs.WithLabelValues(e.Name, e.Reason.String()).Inc()
}

// ObservePeer implements wireguard.Metrics.
func (m *Metrics) ObservePeer(s wireguard.PeerStats) {
	peer := s.Node
	if peer == "" {
		peer = s.PublicKey.String()
	}
	m.wgRx.WithLabelValues(peer).Set(float64(s.ReceiveBytes))
	m.wgTx.WithLabelValues(peer).Set(float64(s.TransmitBytes))
	if !s.LastHandshake.IsZero() {
		m.wgHandshake.WithLabelValues(peer).Set(float64(s.LastHandshake.Unix()))
	}
}

// health records the loop's health in the gauges.
func (m *Metrics) health(h dataplane.Health) {
	if h.Ready {
		m.ready.Set(1)
	} else {
		m.ready.Set(0)
	}
	m.consecFailures.Set(float64(h.ConsecutiveFailures))
	m.failingObjects.Set(float64(h.FailingObjects))
}

// proxy records what the BPF proxy reports.
func (m *Metrics) proxy(st proxy.Status) {
	ct := st.Conntrack
	for what, n := range map[string]float64{"service_ports": float64(st.Services), "frontends": float64(st.Frontends),
		"backends": float64(st.Backends), "interfaces": float64(len(st.Interfaces)), "errors": float64(len(st.Errors)),
		"conntrack_entries": float64(ct.Entries), "conntrack_capacity": float64(ct.Capacity),
		"conntrack_full_drops": float64(ct.Full), "conntrack_closed": float64(ct.Closed), "conntrack_expired": float64(ct.Expired),
		"conntrack_stale": float64(ct.Stale), "conntrack_orphans": float64(ct.Orphans),
		"conntrack_scan_seconds": ct.LastPass.Seconds()} {
		m.proxyState.WithLabelValues(what).Set(n)
	}
}

// serviceCounters exports, at each scrape, the BPF proxy's per-service
// counters that counters returns.
func (m *Metrics) serviceCounters(counters func() map[string]proxy.ServiceCounters) error {
	return m.reg.Register(&proxyCounters{counters: counters})
}

// proxyCounters is a collector of the BPF proxy's per-service counters,
// read from the kernel when Prometheus scrapes.
type proxyCounters struct {
	counters func() map[string]proxy.ServiceCounters
}

var proxyCounterDescs = map[string]*prometheus.Desc{
	"connections": prometheus.NewDesc("nodeplane_agent_bpf_proxy_service_connections_total",
		"Connections the BPF proxy sent to a backend of the service (one per service port: namespace/name:port).", []string{"service"}, nil),
	"packets": prometheus.NewDesc("nodeplane_agent_bpf_proxy_service_packets_total",
		"Packets of the service's connections the BPF proxy translated, both ways.", []string{"service"}, nil),
	"bytes": prometheus.NewDesc("nodeplane_agent_bpf_proxy_service_bytes_total",
		"Bytes of the service's connections the BPF proxy translated, both ways.", []string{"service"}, nil),
	"rejects": prometheus.NewDesc("nodeplane_agent_bpf_proxy_service_rejects_total",
		"Connections to the service refused for want of a ready backend.", []string{"service"}, nil),
}

// Describe implements prometheus.Collector.
func (c *proxyCounters) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range proxyCounterDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *proxyCounters) Collect(ch chan<- prometheus.Metric) {
	for name, v := range c.counters() {
		for what, n := range map[string]uint64{"connections": v.Connections, "packets": v.Packets, "bytes": v.Bytes, "rejects": v.Rejects} {
			ch <- prometheus.MustNewConstMetric(proxyCounterDescs[what], prometheus.CounterValue, float64(n), name)
		}
	}
}

// cluster records the datastore's sizes.
func (m *Metrics) cluster(nodes, localPods, services int) {
	m.nodes.Set(float64(nodes))
	m.localPods.Set(float64(localPods))
	m.services.Set(float64(services))
}

// datastoreConnected is the gauge of the datastore's link to its server.
var datastoreConnected = prometheus.NewDesc("nodeplane_agent_datastore_connected",
	"1 while the datastore reaches its server (the Kubernetes API server), 0 while it does not: the dataplane then keeps "+
		"the last cluster it learned and the agent stays ready. Absent for a datastore that does not report it (a file).", nil, nil)

// datastoreCollector exports the report of the datastore's
// ConnectionReporter, read at each scrape; none until one is set.
type datastoreCollector struct {
	mu       sync.Mutex
	reporter datastore.ConnectionReporter
}

// set makes r the datastore reported (nil: none).
func (c *datastoreCollector) set(r datastore.ConnectionReporter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reporter = r
}

// Describe implements prometheus.Collector.
func (c *datastoreCollector) Describe(ch chan<- *prometheus.Desc) { ch <- datastoreConnected }

// Collect implements prometheus.Collector.
func (c *datastoreCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	r := c.reporter
	c.mu.Unlock()
	if r == nil {
		return
	}
	v := 0.0
	if ok, _ := r.Connected(); ok {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(datastoreConnected, prometheus.GaugeValue, v)
}

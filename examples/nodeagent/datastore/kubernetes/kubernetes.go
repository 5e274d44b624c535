// Package kubernetes is the reference agent's datastore on a Kubernetes
// cluster, through client-go: Nodes give the underlay addresses (their
// InternalIPs), the pod CIDRs (spec.podCIDRs) and what each agent published
// as annotations (VTEP MACs, WireGuard public keys); Pods on this node give
// the local workloads; Services and EndpointSlices give the services. The
// agent publishes its own VTEP MACs and WireGuard keys back onto its Node.
package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"reflect"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	policyclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

// The annotations the agents publish on their Nodes.
const (
	AnnotationVTEPMAC        = "nodeplane.io/vxlan-mac"
	AnnotationVTEPMACV6      = "nodeplane.io/vxlan-mac-v6"
	AnnotationWireGuardKey   = "nodeplane.io/wireguard-public-key"
	AnnotationWireGuardKeyV6 = "nodeplane.io/wireguard-public-key-v6"
)

// DefaultDebounce is how long the Datastore waits after a change for more
// before it delivers the cluster, so a burst of events costs one update.
const DefaultDebounce = 100 * time.Millisecond

// DefaultSyncTimeout is how long Watch waits for its first complete read
// of the cluster before it gives up with ErrUnreachable.
const DefaultSyncTimeout = 60 * time.Second

// DefaultPublishTimeout bounds one Publish call.
const DefaultPublishTimeout = 10 * time.Second

// Options configure a Datastore.
type Options struct {
	// Client is the API client: kubernetes.NewForConfig of a rest config,
	// or k8s.io/client-go/kubernetes/fake in tests. Required.
	Client k8s.Interface
	// Policies is the client of sigs.k8s.io/network-policy-api
	// (versioned.NewForConfig of the same rest config, or its fake):
	// AdminNetworkPolicies and the BaselineAdminNetworkPolicy are watched
	// when the server serves them. Nil: they are not watched.
	Policies policyclient.Interface
	// NodeName is this node: only its pods are read. Required.
	NodeName string
	// Pools are the pod IP pools; empty means one pool per node pod CIDR,
	// each masquerading.
	Pools []datastore.Pool
	// Resync is the informers' resync period; zero means none.
	Resync time.Duration
	// Debounce is DefaultDebounce when zero.
	Debounce time.Duration
	// SyncTimeout bounds Watch's first read of the cluster: when its
	// caches have not all synced by then (the API server is down, frozen
	// or unreachable), Watch returns an error wrapping ErrUnreachable that
	// names the resources not read and the last error seen. Zero means
	// DefaultSyncTimeout. After the first read an unreachable server is
	// logged and retried, as the informers do, and no error is returned.
	SyncTimeout time.Duration
	// PublishTimeout bounds one Publish call (a server that does not
	// answer); zero means DefaultPublishTimeout.
	PublishTimeout time.Duration
	// ProbeInterval is how often, after Watch's first read, it asks the
	// API server whether it is back (GET /readyz) while its informers'
	// requests find it down; when it answers, Watch starts new informers,
	// which list at once, rather than wait for client-go's, which retry
	// with a backoff growing to 30 s (see reconnect.go). Zero means
	// DefaultProbeInterval; negative turns the probes and the restarts
	// off: the informers retry on their own, as client-go does.
	ProbeInterval time.Duration
	// Clock times the debounce, the sync timeout, the retries of the
	// admin policies' discovery and the probes; nil means clock.Real().
	Clock clock.Clock
	// Logger receives warnings, and the informers' own logs (client-go's
	// contextual logging); nil discards them. RouteKlog sends the rest of
	// client-go's logs there too.
	Logger *slog.Logger
}

// Datastore implements datastore.Datastore on the Kubernetes API, and
// datastore.ConnectionReporter.
type Datastore struct {
	opts  Options
	log   *slog.Logger
	clock clock.Clock
	// retryWait is the first wait after a failed look-up of the admin
	// policy resources.
	retryWait time.Duration
	// conn is the running Watch's link to the API server.
	conn *connection
}

var (
	_ datastore.ConnectionReporter = (*Datastore)(nil)
	_ datastore.StaleReporter      = (*Datastore)(nil)
)

// New validates opts and returns a Datastore. It does no I/O.
func New(opts Options) (*Datastore, error) {
	if opts.Client == nil || opts.NodeName == "" {
		return nil, errors.New("kubernetes datastore: Client and NodeName are required")
	}
	if opts.Debounce < 0 || opts.SyncTimeout < 0 || opts.PublishTimeout < 0 {
		return nil, fmt.Errorf("kubernetes datastore: negative Debounce (%v), SyncTimeout (%v) or PublishTimeout (%v)",
			opts.Debounce, opts.SyncTimeout, opts.PublishTimeout)
	}
	if opts.Debounce == 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.SyncTimeout == 0 {
		opts.SyncTimeout = DefaultSyncTimeout
	}
	if opts.PublishTimeout == 0 {
		opts.PublishTimeout = DefaultPublishTimeout
	}
	if opts.ProbeInterval == 0 {
		opts.ProbeInterval = DefaultProbeInterval
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := clock.OrReal(opts.Clock)
	return &Datastore{opts: opts, log: log, clock: c, retryWait: defaultRetry, conn: newConnection(c, log)}, nil
}

// RouteKlog sends klog's output, the process-wide logger of client-go
// (request warnings, client-side throttling, what is not logged through
// a context), to log, so that it appears with the agent's structured logs.
// It changes global state: a program calls it once, before it starts a
// Datastore; nil discards klog's output.
func RouteKlog(log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	klog.SetSlogLogger(log)
}

// Watch implements datastore.Datastore: it starts informers on Nodes, Pods
// (every node's: network policies select peers anywhere), Services,
// EndpointSlices, Namespaces and NetworkPolicies (and, with Options.Policies,
// the admin network policies the server serves), waits for their caches
// and then delivers the cluster, and again after every change (debounced).
//
// Before the first delivery it returns an error wrapping ErrForbidden when
// the server refuses to list or watch one of these resources, and one
// wrapping ErrUnreachable when the caches are not read within
// Options.SyncTimeout. After it, failures are logged and retried as the
// informers retry them, and an outage of the server is caught up as soon
// as it answers again (Options.ProbeInterval, reconnect.go): the cluster is
// then delivered from new informers once they have all read it, never half
// read. When ctx ends Watch stops the informers and returns at once (nil
// after the first delivery, the context's error before it).
func (d *Datastore) Watch(ctx context.Context, update func(datastore.Cluster)) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithCancel(ctx)
	// The informers log through the context: to our logger.
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(d.log.Handler()))
	d.conn.set(false, false)
	// The informer sets in use: the one read (active), and the one started
	// after an outage, until it has read everything (pending). Stop them
	// first, then wait for them.
	var active, pending *informerSet
	defer func() {
		cancel()
		for _, s := range []*informerSet{active, pending} {
			if s != nil {
				s.stop()
			}
		}
		d.conn.set(false, false)
	}()

	// Until the first read is complete, a forbidden resource or the
	// timeout ends start with the reason as its cause.
	start, fail := context.WithCancelCause(ctx)
	errs := newWatchErrors(d.log, fail)
	deadline := d.clock.NewTimer(d.opts.SyncTimeout)
	timing := make(chan struct{})
	go func() {
		defer close(timing)
		defer deadline.Stop()
		select {
		case <-deadline.C():
			fail(errs.unreachable(d.opts.SyncTimeout))
		case <-start.Done():
		}
	}()
	defer func() { fail(nil); <-timing }()

	changed := make(chan struct{}, 1)
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { signal(changed) },
		UpdateFunc: func(any, any) { signal(changed) },
		DeleteFunc: func(any) { signal(changed) },
	}
	var err error
	if active, err = d.newInformerSet(ctx, handler, errs); err != nil {
		return err
	}
	// The core informers start before the admin policies are looked up.
	active.start()
	adminResources, err := d.adminResources(start, errs)
	if err != nil {
		return d.startFailed(ctx, start, err)
	}
	if err := active.addAdmin(d, adminResources, handler); err != nil {
		return err
	}
	active.start()
	if err := errs.waitForSync(start); err != nil {
		return d.startFailed(ctx, start, err)
	}
	fail(nil) // stops the deadline
	d.conn.set(true, true)
	if d.opts.ProbeInterval > 0 {
		probing := make(chan struct{})
		go func() { defer close(probing); d.probeWhileDown(ctx) }()
		defer func() { cancel(); <-probing }()
	}

	var last *datastore.Cluster
	deliver := func() {
		// Drain the notifications of what this read covers.
		select {
		case <-changed:
		default:
		}
		c, err := d.read(active.view())
		if err != nil {
			d.log.Warn("kubernetes datastore: listing the caches failed", "err", err)
			return
		}
		if last != nil && reflect.DeepEqual(*last, c) {
			return
		}
		last = &c
		update(c)
	}
	deliver()
	debounce := d.clock.NewTimer(d.opts.Debounce)
	debounce.Stop()
	defer debounce.Stop()
	debouncing := false
	// After an outage: restarts spaced by gap (see reconnect.go).
	retry := d.clock.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	// A new set that has not read everything within rereadTimeout takes
	// over all the same, falling back for the rest on what the sets
	// before it read (see informerSet.frozen).
	reread := d.clock.NewTimer(time.Hour)
	reread.Stop()
	defer reread.Stop()
	var (
		lastRestart time.Time
		gap         time.Duration
	)
	restart := func() {
		cur := pending
		if cur == nil {
			cur = active
		}
		if d.opts.ProbeInterval < 0 || !cur.req.stuck() {
			return // the informers are reading again on their own
		}
		now := d.clock.Now()
		if !lastRestart.IsZero() && now.Sub(lastRestart) >= restartReset {
			gap = 0
		}
		if wait := gap - now.Sub(lastRestart); !lastRestart.IsZero() && wait > 0 {
			retry.Reset(wait)
			return
		}
		next, err := d.newInformerSet(ctx, handler, newWatchErrors(d.log, nil))
		if err == nil {
			err = next.addAdmin(d, adminResources, handler)
		}
		if err != nil {
			d.log.Warn("kubernetes datastore: new informers not started after the outage", "err", err)
			return
		}
		// The stuck set goes (its caches are frozen); the agent keeps the
		// last cluster delivered until the new one has read everything,
		// or for rereadTimeout, after which it goes on with what the new
		// one read and, for the rest, what the old ones had.
		next.fallback = cur.frozen()
		cur.stop()
		active, pending = nil, next
		pending.start()
		pending.watchSync()
		reread.Reset(min(d.opts.SyncTimeout, rereadTimeout))
		lastRestart, gap = now, min(max(2*gap, d.opts.ProbeInterval), maxRestartGap)
		d.log.Info("kubernetes datastore: informers started again to read the cluster at once", "restart", d.conn.restarted())
	}
	for {
		var synced, caughtUp <-chan struct{}
		if pending != nil {
			synced = pending.synced
		} else if active.fallback != nil {
			caughtUp = active.synced
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			// While a new set reads, the delivery once it is synced
			// covers its changes.
			if pending == nil && !debouncing {
				debounce.Reset(d.opts.Debounce)
				debouncing = true
			}
		case <-debounce.C():
			debouncing = false
			if pending == nil {
				deliver()
			}
		case <-d.conn.back:
			restart()
		case <-retry.C():
			restart()
		case <-synced:
			reread.Stop()
			active, pending = pending, nil
			active.fallback = nil
			d.conn.setStale(nil)
			d.log.Info("kubernetes datastore: caught up with the API server", "took", d.clock.Since(lastRestart).Round(time.Millisecond))
			deliver()
		case <-reread.C():
			if pending == nil {
				break
			}
			unread := pending.unread()
			active, pending = pending, nil
			d.conn.setStale(unread)
			d.log.Warn("kubernetes datastore: not every resource read again after the outage; going on with the others, "+
				"and with the last state of these until they are read", "unread", unread, "after", d.clock.Since(lastRestart).Round(time.Millisecond))
			deliver()
		case <-caughtUp:
			active.fallback = nil
			d.conn.setStale(nil)
			d.log.Info("kubernetes datastore: caught up with the API server", "took", d.clock.Since(lastRestart).Round(time.Millisecond))
			deliver()
		}
	}
}

// listThenWatch is a client whose informers list, then watch, as they did
// before client-go's streaming watch-list: it says it does not support
// watch-list semantics. In client-go v0.37 a watch-list that finds the
// server refusing connections waits for its backoff (up to 30 s) without
// heeding its context, so a Watch stopped while the server is down would
// return only after that wait; the list and the watch heed it.
type listThenWatch struct{ k8s.Interface }

// IsWatchListSemanticsUnSupported tells client-go's informers to list,
// then watch.
func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// policyListThenWatch is listThenWatch for the admin network policies'
// client.
type policyListThenWatch struct{ policyclient.Interface }

// IsWatchListSemanticsUnSupported tells client-go's informers to list,
// then watch.
func (policyListThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// startFailed returns the error of a Watch whose first read did not
// complete: the context's end, or why start ended (forbidden, timeout),
// else err.
func (d *Datastore) startFailed(ctx, start context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("kubernetes datastore: stopped before the first read of the cluster: %w", context.Cause(ctx))
	case start.Err() != nil:
		return context.Cause(start)
	}
	return err
}

// cluster converts the API objects into a datastore.Cluster.
func (d *Datastore) cluster(nodes []*corev1.Node, pods []*corev1.Pod, services []*corev1.Service, slices []*discoveryv1.EndpointSlice) datastore.Cluster {
	var c datastore.Cluster
	for _, n := range nodes {
		c.Nodes = append(c.Nodes, d.node(n))
	}
	for _, p := range pods {
		if pod, ok := podOf(p); ok {
			c.Pods = append(c.Pods, pod)
		}
	}
	c.Pools = append(c.Pools, d.opts.Pools...)
	if len(d.opts.Pools) == 0 {
		for _, n := range c.Nodes {
			for i, cidr := range n.PodCIDRs {
				c.Pools = append(c.Pools, datastore.Pool{Name: fmt.Sprintf("node-%s-%d", n.Name, i), CIDR: cidr, Masquerade: true})
			}
		}
	}
	bySvc := map[types.NamespacedName][]*discoveryv1.EndpointSlice{}
	for _, s := range slices {
		name := s.Labels[discoveryv1.LabelServiceName]
		if name == "" {
			continue
		}
		k := types.NamespacedName{Namespace: s.Namespace, Name: name}
		bySvc[k] = append(bySvc[k], s)
	}
	for _, s := range services {
		if svc, ok := serviceOf(s, bySvc[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}]); ok {
			c.Services = append(c.Services, svc)
		}
	}
	// Drop what does not validate, object by object, rather than the
	// whole cluster for one bad Node.
	c = d.valid(c)
	c.Normalize()
	return c
}

// valid keeps the objects of c that validate on their own.
func (d *Datastore) valid(c datastore.Cluster) datastore.Cluster {
	var out datastore.Cluster
	for _, n := range c.Nodes {
		one := datastore.Cluster{Nodes: []datastore.Node{n}}
		if err := one.Validate(); err != nil {
			d.log.Warn("kubernetes datastore: node ignored", "node", n.Name, "err", err)
			continue
		}
		out.Nodes = append(out.Nodes, n)
	}
	for _, p := range c.Pods {
		if err := (&datastore.Cluster{Pods: []datastore.Pod{p}}).Validate(); err == nil {
			out.Pods = append(out.Pods, p)
		}
	}
	for _, p := range c.Pools {
		if err := (&datastore.Cluster{Pools: []datastore.Pool{p}}).Validate(); err == nil {
			out.Pools = append(out.Pools, p)
		}
	}
	for _, s := range c.Services {
		if err := (&datastore.Cluster{Services: []datastore.Service{s}}).Validate(); err != nil {
			d.log.Warn("kubernetes datastore: service ignored", "service", s.Key(), "err", err)
			continue
		}
		out.Services = append(out.Services, s)
	}
	return out
}

func (d *Datastore) node(n *corev1.Node) datastore.Node {
	out := datastore.Node{Name: n.Name}
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		switch {
		case ip.Is4() && !out.UnderlayIPv4.IsValid():
			out.UnderlayIPv4 = ip
		case ip.Is6() && !ip.Is4In6() && !out.UnderlayIPv6.IsValid():
			out.UnderlayIPv6 = ip
		}
	}
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	for _, s := range cidrs {
		if p, err := netip.ParsePrefix(s); err == nil {
			out.PodCIDRs = append(out.PodCIDRs, p)
		}
	}
	if mac, err := net.ParseMAC(n.Annotations[AnnotationVTEPMAC]); err == nil && len(mac) == 6 {
		out.VTEPMAC = datastore.MAC(mac)
	}
	if mac, err := net.ParseMAC(n.Annotations[AnnotationVTEPMACV6]); err == nil && len(mac) == 6 {
		out.VTEPMACV6 = datastore.MAC(mac)
	}
	out.WireGuardPublicKey = n.Annotations[AnnotationWireGuardKey]
	out.WireGuardPublicKeyV6 = n.Annotations[AnnotationWireGuardKeyV6]
	out.Zone = n.Labels[corev1.LabelTopologyZone]
	return out
}

// podOf converts a pod with addresses that runs in its own network namespace.
func podOf(p *corev1.Pod) (datastore.Pod, bool) {
	if p.Spec.HostNetwork || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return datastore.Pod{}, false
	}
	out := datastore.Pod{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName}
	ips := p.Status.PodIPs
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: p.Status.PodIP}}
	}
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out.IPs = append(out.IPs, a)
		}
	}
	out.Labels = p.Labels
	out.Ports = containerPorts(p)
	return out, len(out.IPs) > 0
}

// Publish implements datastore.Datastore: it sets this node's annotations
// (those of info's non-zero fields) with one merge patch. It gives up after
// Options.PublishTimeout, or when ctx ends, without waiting for a client
// that does not honour its context; an error the server answers with a 403
// wraps ErrForbidden.
func (d *Datastore) Publish(ctx context.Context, info datastore.NodeInfo) error {
	ann := map[string]string{}
	if len(info.VTEPMAC) > 0 {
		ann[AnnotationVTEPMAC] = info.VTEPMAC.String()
	}
	if len(info.VTEPMACV6) > 0 {
		ann[AnnotationVTEPMACV6] = info.VTEPMACV6.String()
	}
	if !info.WireGuardKey.IsZero() {
		ann[AnnotationWireGuardKey] = info.WireGuardKey.String()
	}
	if !info.WireGuardKeyV6.IsZero() {
		ann[AnnotationWireGuardKeyV6] = info.WireGuardKeyV6.String()
	}
	if len(ann) == 0 {
		return nil
	}
	name := info.Name
	if name == "" {
		name = d.opts.NodeName
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.PublishTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := d.opts.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w: publish on node %s: %w", ErrForbidden, name, err)
	}
	return fmt.Errorf("kubernetes datastore: publish on node %s: %w", name, err)
}

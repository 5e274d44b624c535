// Package kubernetes is the reference agent's datastore on a Kubernetes
// cluster, through client-go: Nodes give the underlay addresses (their
// InternalIPs), the pod CIDRs (spec.podCIDRs) and what each agent published
// as annotations (VTEP MACs, WireGuard public key); Pods on this node give
// the local workloads; Services and EndpointSlices give the services. The
// agent publishes its own VTEP MACs and WireGuard key back onto its Node.
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
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	policyclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

// The annotations the agents publish on their Nodes.
const (
	AnnotationVTEPMAC      = "nodeplane.io/vxlan-mac"
	AnnotationVTEPMACV6    = "nodeplane.io/vxlan-mac-v6"
	AnnotationWireGuardKey = "nodeplane.io/wireguard-public-key"
)

// DefaultDebounce is how long the Datastore waits after a change for more
// before it delivers the cluster, so a burst of events costs one update.
const DefaultDebounce = 100 * time.Millisecond

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
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

// Datastore implements datastore.Datastore on the Kubernetes API.
type Datastore struct {
	opts Options
	log  *slog.Logger
	// retryWait is the first wait after a failed look-up of the admin
	// policy resources.
	retryWait time.Duration
}

// New validates opts and returns a Datastore. It does no I/O.
func New(opts Options) (*Datastore, error) {
	if opts.Client == nil || opts.NodeName == "" {
		return nil, errors.New("kubernetes datastore: Client and NodeName are required")
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Datastore{opts: opts, log: log, retryWait: defaultRetry}, nil
}

// Watch implements datastore.Datastore: it starts informers on Nodes, Pods
// (every node's: network policies select peers anywhere), Services,
// EndpointSlices, Namespaces and NetworkPolicies (and, with Options.Policies,
// the admin network policies the server serves), waits for their caches
// and then delivers the cluster, and again after every change (debounced).
func (d *Datastore) Watch(ctx context.Context, update func(datastore.Cluster)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The caches keep only what the conversion reads (slim).
	all := informers.NewSharedInformerFactoryWithOptions(d.opts.Client, d.opts.Resync, informers.WithTransform(slim))
	nodes := all.Core().V1().Nodes()
	services := all.Core().V1().Services()
	slices := all.Discovery().V1().EndpointSlices()
	// Every pod of the cluster, not only this node's: network policies
	// select peers anywhere by their labels and named ports.
	pods := all.Core().V1().Pods()
	namespaces := all.Core().V1().Namespaces()
	policies := all.Networking().V1().NetworkPolicies()

	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	for _, inf := range []cache.SharedIndexInformer{nodes.Informer(), services.Informer(), slices.Informer(), pods.Informer(),
		namespaces.Informer(), policies.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("kubernetes datastore: %w", err)
		}
	}
	admin, err := d.watchAdminPolicies(ctx, handler)
	if err != nil {
		return err
	}
	all.Start(ctx.Done())
	defer all.Shutdown()
	if admin != nil {
		admin.factory.Start(ctx.Done())
		// Shutdown waits for the informers, which stop with ctx.
		defer func() { cancel(); admin.factory.Shutdown() }()
	}
	for typ, ok := range all.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("kubernetes datastore: %v cache not synced: %w", typ, context.Cause(ctx))
		}
	}
	if admin != nil {
		for typ, ok := range admin.factory.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("kubernetes datastore: %v cache not synced: %w", typ, context.Cause(ctx))
			}
		}
	}
	build := func() (datastore.Cluster, error) {
		ns, err := nodes.Lister().List(labels.Everything())
		if err != nil {
			return datastore.Cluster{}, err
		}
		ps, err := pods.Lister().List(labels.Everything())
		if err != nil {
			return datastore.Cluster{}, err
		}
		ss, err := services.Lister().List(labels.Everything())
		if err != nil {
			return datastore.Cluster{}, err
		}
		es, err := slices.Lister().List(labels.Everything())
		if err != nil {
			return datastore.Cluster{}, err
		}
		nss, err := namespaces.Lister().List(labels.Everything())
		if err != nil {
			return datastore.Cluster{}, err
		}
		nps, err := policies.Lister().List(labels.Everything())
		if err != nil {
			return datastore.Cluster{}, err
		}
		c := d.cluster(ns, ps, ss, es)
		d.addPolicies(&c, nss, nps)
		if admin != nil {
			anps, banps, err := admin.list()
			if err != nil {
				return datastore.Cluster{}, err
			}
			d.addAdminPolicies(&c, anps, banps)
		}
		return c, nil
	}
	var last *datastore.Cluster
	deliver := func() {
		c, err := build()
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
	// Drain the notifications of the initial listing: the first delivery
	// below covers them.
	select {
	case <-changed:
	default:
	}
	deliver()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		t := time.NewTimer(d.opts.Debounce)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		select {
		case <-changed:
		default:
		}
		deliver()
	}
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

// serviceOf converts a service with a cluster IP and its endpoint slices.
func serviceOf(s *corev1.Service, eps []*discoveryv1.EndpointSlice) (datastore.Service, bool) {
	if s.Spec.Type == corev1.ServiceTypeExternalName {
		return datastore.Service{}, false
	}
	out := datastore.Service{Namespace: s.Namespace, Name: s.Name, Type: string(s.Spec.Type),
		ExternalTrafficPolicy: string(s.Spec.ExternalTrafficPolicy)}
	ips := s.Spec.ClusterIPs
	if len(ips) == 0 && s.Spec.ClusterIP != "" {
		ips = []string{s.Spec.ClusterIP}
	}
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil {
			out.ClusterIPs = append(out.ClusterIPs, a)
		}
	}
	if len(out.ClusterIPs) == 0 { // headless: nothing to load-balance
		return datastore.Service{}, false
	}
	for _, ip := range s.Spec.ExternalIPs {
		if a, err := netip.ParseAddr(ip); err == nil && !slices.Contains(out.ExternalIPs, a) {
			out.ExternalIPs = append(out.ExternalIPs, a)
		}
	}
	for _, in := range s.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil && !slices.Contains(out.LoadBalancerIPs, a) {
			out.LoadBalancerIPs = append(out.LoadBalancerIPs, a)
		}
	}
	trafficSettings(&out, s)
	// The endpoints' port of each service port: the EndpointSlices say it
	// (by port name), also for a target port given by name.
	slicePorts := map[string]int32{}
	for _, es := range eps {
		for _, p := range es.Ports {
			if p.Port != nil {
				name := ""
				if p.Name != nil {
					name = *p.Name
				}
				slicePorts[name] = *p.Port
			}
		}
	}
	for _, p := range s.Spec.Ports {
		sp := datastore.ServicePort{Name: p.Name, Protocol: string(p.Protocol), Port: uint16(p.Port), NodePort: uint16(p.NodePort)}
		if port, ok := slicePorts[p.Name]; ok && port > 0 {
			sp.TargetPort = uint16(port)
		} else if p.TargetPort.IntVal > 0 {
			sp.TargetPort = uint16(p.TargetPort.IntVal)
		}
		out.Ports = append(out.Ports, sp)
	}
	out.Endpoints = endpointsOf(eps)
	return out, true
}

// trafficSettings copies what decides where the service's traffic goes:
// the internal traffic policy, the health check port, session affinity,
// the source ranges and whether topology aware routing is on.
func trafficSettings(out *datastore.Service, s *corev1.Service) {
	if p := s.Spec.InternalTrafficPolicy; p != nil {
		out.InternalTrafficPolicy = string(*p)
	}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal &&
		s.Spec.HealthCheckNodePort > 0 && s.Spec.HealthCheckNodePort <= 65535 {
		out.HealthCheckNodePort = uint16(s.Spec.HealthCheckNodePort)
	}
	out.SessionAffinity = string(s.Spec.SessionAffinity)
	if c := s.Spec.SessionAffinityConfig; s.Spec.SessionAffinity == corev1.ServiceAffinityClientIP && c != nil && c.ClientIP != nil &&
		c.ClientIP.TimeoutSeconds != nil && *c.ClientIP.TimeoutSeconds > 0 {
		out.SessionAffinityTimeoutSeconds = uint32(*c.ClientIP.TimeoutSeconds)
	}
	// Source ranges as kube-proxy reads them: the field (not the older
	// annotation, which the cloud providers read), masked; one that does
	// not parse (the API server validates them) is left out.
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, r := range s.Spec.LoadBalancerSourceRanges {
			if p, err := netip.ParsePrefix(strings.TrimSpace(r)); err == nil && !slices.Contains(out.LoadBalancerSourceRanges, p.Masked()) {
				out.LoadBalancerSourceRanges = append(out.LoadBalancerSourceRanges, p.Masked())
			}
		}
	}
	if topologyAware(s) {
		out.TrafficDistribution = datastore.TrafficDistributionPreferSameZone
	}
}

// topologyAware reports whether the service asks for topology aware
// routing: spec.trafficDistribution is PreferSameZone, PreferClose (its
// older name) or PreferSameNode (which the EndpointSlice controller also
// gives zone hints for; the agent routes by zone only), or the annotation
// service.kubernetes.io/topology-mode (or the deprecated
// service.kubernetes.io/topology-aware-hints) is Auto or another value but
// Disabled (a value of another implementation that writes hints).
func topologyAware(s *corev1.Service) bool {
	if d := s.Spec.TrafficDistribution; d != nil {
		switch *d {
		case corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferClose,
			corev1.ServiceTrafficDistributionPreferSameNode:
			return true
		}
	}
	for _, k := range serviceAnnotations {
		switch s.Annotations[k] {
		case "", "Disabled", "disabled":
		default:
			return true
		}
	}
	return false
}

// endpointsOf converts the endpoints of a service's slices: each address
// once, with its conditions and zone hints, sorted by address. An address
// in several slices (while they are rewritten) is kept in its ready form
// when one is ready, as kube-proxy keeps it.
func endpointsOf(eps []*discoveryv1.EndpointSlice) []datastore.Endpoint {
	var out []datastore.Endpoint
	at := map[netip.Addr]int{}
	for _, es := range eps {
		for _, e := range es.Endpoints {
			// The conditions as the API defines their nil values (ready
			// and serving: true; terminating: false).
			c := e.Conditions
			ready := c.Ready == nil || *c.Ready
			serving := c.Serving == nil || *c.Serving
			terminating := c.Terminating != nil && *c.Terminating
			ep := datastore.Endpoint{NotReady: !ready, Terminating: terminating, Serving: serving && terminating}
			if e.NodeName != nil {
				ep.Node = *e.NodeName
			}
			if e.Hints != nil {
				for _, z := range e.Hints.ForZones {
					if z.Name != "" && !slices.Contains(ep.ForZones, z.Name) {
						ep.ForZones = append(ep.ForZones, z.Name)
					}
				}
			}
			for _, a := range e.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil || !ip.IsValid() || ip.IsUnspecified() {
					continue
				}
				ep.IP = ip
				if i, ok := at[ip]; ok {
					if ready && out[i].NotReady {
						out[i] = ep
					}
					continue
				}
				at[ip] = len(out)
				out = append(out, ep)
			}
		}
	}
	slices.SortFunc(out, func(a, b datastore.Endpoint) int { return a.IP.Compare(b.IP) })
	return out
}

// Publish implements datastore.Datastore: it sets this node's annotations
// (those of info's non-zero fields) with one merge patch.
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
	if _, err := d.opts.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("kubernetes datastore: publish on node %s: %w", name, err)
	}
	return nil
}

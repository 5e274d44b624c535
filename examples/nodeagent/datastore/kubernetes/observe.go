package kubernetes

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"
	networkingv1client "k8s.io/client-go/kubernetes/typed/networking/v1"
	policyv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	policyclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"
	policyv1alpha1client "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned/typed/apis/v1alpha1"
)

// The informers' requests are observed through their client, not through
// their watch error handler: a reflector whose watch finds the server
// refusing connections backs off and tries again inside client-go, and
// the handler never hears of it.

// reach is what the outcome of one request says of the API server.
type reach int

const (
	// reachUnknown: nothing (the request was stopped, or the server
	// answered that it is too busy or failed: 429, 500, 504, which its
	// own retries are for).
	reachUnknown reach = iota
	// reachAnswered: the server answered (with a success, or with an
	// error of the request's own: 403, 404, 410).
	reachAnswered
	// reachDown: no answer (the connection was refused, reset or timed
	// out), or 502 or 503: nothing serves behind a proxy, or the server
	// is starting or stopping.
	reachDown
)

// reachOf classifies the outcome err of a request made with ctx.
func reachOf(ctx context.Context, err error) reach {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return reachUnknown
	}
	if err == nil {
		return reachAnswered
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return reachDown // no HTTP answer
	}
	switch code := st.Status().Code; {
	case code == http.StatusBadGateway || code == http.StatusServiceUnavailable:
		return reachDown
	case code == http.StatusTooManyRequests || code >= 500:
		return reachUnknown
	}
	return reachAnswered
}

// requests follows the requests of one set of informers: which resources'
// last request found the server down (their reflectors are then waiting
// out client-go's backoff), and tells conn what each outcome says of the
// server.
type requests struct {
	conn *connection

	mu sync.Mutex
	// down are the resources whose last request found the server down.
	down map[string]bool
}

func newRequests(conn *connection) *requests {
	return &requests{conn: conn, down: map[string]bool{}}
}

// done records the outcome err of a request for resource made with ctx,
// and returns err.
func (r *requests) done(ctx context.Context, start time.Time, resource string, err error) error {
	switch reachOf(ctx, err) {
	case reachAnswered:
		r.mu.Lock()
		delete(r.down, resource)
		r.mu.Unlock()
		r.conn.answered("the "+resource+" informer", start)
	case reachDown:
		r.mu.Lock()
		r.down[resource] = true
		r.mu.Unlock()
		r.conn.lost(err)
	}
	return err
}

// stuck reports whether the last request of some resource found the
// server down: its informer waits for client-go's backoff.
func (r *requests) stuck() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.down) > 0
}

// observedClient is a client whose informers' lists and watches (of the
// resources Watch reads) are recorded in req.
type observedClient struct {
	k8s.Interface
	req *requests
}

// CoreV1 returns the observed core client.
func (c observedClient) CoreV1() corev1client.CoreV1Interface {
	return observedCore{c.Interface.CoreV1(), c.req}
}

// DiscoveryV1 returns the observed discovery client.
func (c observedClient) DiscoveryV1() discoveryv1client.DiscoveryV1Interface {
	return observedDiscovery{c.Interface.DiscoveryV1(), c.req}
}

// NetworkingV1 returns the observed networking client.
func (c observedClient) NetworkingV1() networkingv1client.NetworkingV1Interface {
	return observedNetworking{c.Interface.NetworkingV1(), c.req}
}

type observedCore struct {
	corev1client.CoreV1Interface
	req *requests
}

func (c observedCore) Nodes() corev1client.NodeInterface {
	return observedNodes{c.CoreV1Interface.Nodes(), c.req}
}

func (c observedCore) Pods(ns string) corev1client.PodInterface {
	return observedPods{c.CoreV1Interface.Pods(ns), c.req}
}

func (c observedCore) Services(ns string) corev1client.ServiceInterface {
	return observedServices{c.CoreV1Interface.Services(ns), c.req}
}

func (c observedCore) Namespaces() corev1client.NamespaceInterface {
	return observedNamespaces{c.CoreV1Interface.Namespaces(), c.req}
}

type observedDiscovery struct {
	discoveryv1client.DiscoveryV1Interface
	req *requests
}

func (c observedDiscovery) EndpointSlices(ns string) discoveryv1client.EndpointSliceInterface {
	return observedSlices{c.DiscoveryV1Interface.EndpointSlices(ns), c.req}
}

type observedNetworking struct {
	networkingv1client.NetworkingV1Interface
	req *requests
}

func (c observedNetworking) NetworkPolicies(ns string) networkingv1client.NetworkPolicyInterface {
	return observedPolicies{c.NetworkingV1Interface.NetworkPolicies(ns), c.req}
}

type observedNodes struct {
	corev1client.NodeInterface
	req *requests
}

func (c observedNodes) List(ctx context.Context, o metav1.ListOptions) (*corev1.NodeList, error) {
	start := c.req.conn.clock.Now()
	l, err := c.NodeInterface.List(ctx, o)
	return l, c.req.done(ctx, start, "nodes", err)
}

func (c observedNodes) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	start := c.req.conn.clock.Now()
	w, err := c.NodeInterface.Watch(ctx, o)
	return w, c.req.done(ctx, start, "nodes", err)
}

type observedPods struct {
	corev1client.PodInterface
	req *requests
}

func (c observedPods) List(ctx context.Context, o metav1.ListOptions) (*corev1.PodList, error) {
	start := c.req.conn.clock.Now()
	l, err := c.PodInterface.List(ctx, o)
	return l, c.req.done(ctx, start, "pods", err)
}

func (c observedPods) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	start := c.req.conn.clock.Now()
	w, err := c.PodInterface.Watch(ctx, o)
	return w, c.req.done(ctx, start, "pods", err)
}

type observedServices struct {
	corev1client.ServiceInterface
	req *requests
}

func (c observedServices) List(ctx context.Context, o metav1.ListOptions) (*corev1.ServiceList, error) {
	start := c.req.conn.clock.Now()
	l, err := c.ServiceInterface.List(ctx, o)
	return l, c.req.done(ctx, start, "services", err)
}

func (c observedServices) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	start := c.req.conn.clock.Now()
	w, err := c.ServiceInterface.Watch(ctx, o)
	return w, c.req.done(ctx, start, "services", err)
}

type observedNamespaces struct {
	corev1client.NamespaceInterface
	req *requests
}

func (c observedNamespaces) List(ctx context.Context, o metav1.ListOptions) (*corev1.NamespaceList, error) {
	start := c.req.conn.clock.Now()
	l, err := c.NamespaceInterface.List(ctx, o)
	return l, c.req.done(ctx, start, "namespaces", err)
}

func (c observedNamespaces) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	start := c.req.conn.clock.Now()
	w, err := c.NamespaceInterface.Watch(ctx, o)
	return w, c.req.done(ctx, start, "namespaces", err)
}

type observedSlices struct {
	discoveryv1client.EndpointSliceInterface
	req *requests
}

func (c observedSlices) List(ctx context.Context, o metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	start := c.req.conn.clock.Now()
	l, err := c.EndpointSliceInterface.List(ctx, o)
	return l, c.req.done(ctx, start, "endpointslices", err)
}

func (c observedSlices) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	start := c.req.conn.clock.Now()
	w, err := c.EndpointSliceInterface.Watch(ctx, o)
	return w, c.req.done(ctx, start, "endpointslices", err)
}

type observedPolicies struct {
	networkingv1client.NetworkPolicyInterface
	req *requests
}

func (c observedPolicies) List(ctx context.Context, o metav1.ListOptions) (*networkingv1.NetworkPolicyList, error) {
	start := c.req.conn.clock.Now()
	l, err := c.NetworkPolicyInterface.List(ctx, o)
	return l, c.req.done(ctx, start, "networkpolicies", err)
}

func (c observedPolicies) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	start := c.req.conn.clock.Now()
	w, err := c.NetworkPolicyInterface.Watch(ctx, o)
	return w, c.req.done(ctx, start, "networkpolicies", err)
}

// observedPolicyClient is observedClient for the admin network policies'
// client.
type observedPolicyClient struct {
	policyclient.Interface
	req *requests
}

// PolicyV1alpha1 returns the observed v1alpha1 client.
func (c observedPolicyClient) PolicyV1alpha1() policyv1alpha1client.PolicyV1alpha1Interface {
	return observedPolicyV1alpha1{c.Interface.PolicyV1alpha1(), c.req}
}

type observedPolicyV1alpha1 struct {
	policyv1alpha1client.PolicyV1alpha1Interface
	req *requests
}

func (c observedPolicyV1alpha1) AdminNetworkPolicies() policyv1alpha1client.AdminNetworkPolicyInterface {
	return observedAdmins{c.PolicyV1alpha1Interface.AdminNetworkPolicies(), c.req}
}

func (c observedPolicyV1alpha1) BaselineAdminNetworkPolicies() policyv1alpha1client.BaselineAdminNetworkPolicyInterface {
	return observedBaselines{c.PolicyV1alpha1Interface.BaselineAdminNetworkPolicies(), c.req}
}

type observedAdmins struct {
	policyv1alpha1client.AdminNetworkPolicyInterface
	req *requests
}

func (c observedAdmins) List(ctx context.Context, o metav1.ListOptions) (*policyv1alpha1.AdminNetworkPolicyList, error) {
	start := c.req.conn.clock.Now()
	l, err := c.AdminNetworkPolicyInterface.List(ctx, o)
	return l, c.req.done(ctx, start, ResourceAdminNetworkPolicies, err)
}

func (c observedAdmins) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	start := c.req.conn.clock.Now()
	w, err := c.AdminNetworkPolicyInterface.Watch(ctx, o)
	return w, c.req.done(ctx, start, ResourceAdminNetworkPolicies, err)
}

type observedBaselines struct {
	policyv1alpha1client.BaselineAdminNetworkPolicyInterface
	req *requests
}

func (c observedBaselines) List(ctx context.Context, o metav1.ListOptions) (*policyv1alpha1.BaselineAdminNetworkPolicyList, error) {
	start := c.req.conn.clock.Now()
	l, err := c.BaselineAdminNetworkPolicyInterface.List(ctx, o)
	return l, c.req.done(ctx, start, ResourceBaselineAdminNetworkPolicies, err)
}

func (c observedBaselines) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	start := c.req.conn.clock.Now()
	w, err := c.BaselineAdminNetworkPolicyInterface.Watch(ctx, o)
	return w, c.req.done(ctx, start, ResourceBaselineAdminNetworkPolicies, err)
}

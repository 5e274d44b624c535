package kubernetes

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

// AdminPoliciesOf returns an empty cluster with the admin policies added as
// Watch adds them.
func (d *Datastore) AdminPoliciesOf(admins []*policyv1alpha1.AdminNetworkPolicy, baselines []*policyv1alpha1.BaselineAdminNetworkPolicy) datastore.Cluster {
	var c datastore.Cluster
	d.addAdminPolicies(&c, admins, baselines)
	return c
}

// SetRetryWait sets the first wait after a failed look-up of the admin
// policy resources.
func (d *Datastore) SetRetryWait(w time.Duration) { d.retryWait = w }

// Convert converts the objects as Watch converts its caches.
func (d *Datastore) Convert(nodes []*corev1.Node, pods []*corev1.Pod, services []*corev1.Service, slices []*discoveryv1.EndpointSlice,
	namespaces []*corev1.Namespace, policies []*networkingv1.NetworkPolicy) datastore.Cluster {
	c := d.cluster(nodes, pods, services, slices)
	d.addPolicies(&c, namespaces, policies)
	return c
}

// Slim is the informers' transform.
func Slim(obj any) (any, error) { return slim(obj) }

// Restarts counts the informer sets Watch started after an outage.
func (d *Datastore) Restarts() int {
	d.conn.mu.Lock()
	defer d.conn.mu.Unlock()
	return d.conn.restarts
}

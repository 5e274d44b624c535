package kubernetes

import (
	"context"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

// informerSet is one set of Watch's informers: those of the core
// resources and of the admin policies the server serves, their listers,
// and what their requests say of the server. Watch reads the cluster from
// one set; after an outage it starts another (see reconnect.go).
type informerSet struct {
	ctx    context.Context
	cancel context.CancelFunc
	core   informers.SharedInformerFactory
	// admin reads the admin policies; nil when none is read.
	admin *adminWatch
	errs  *watchErrors
	req   *requests

	nodes      corelisters.NodeLister
	pods       corelisters.PodLister
	services   corelisters.ServiceLister
	slices     discoverylisters.EndpointSliceLister
	namespaces corelisters.NamespaceLister
	policies   networkinglisters.NetworkPolicyLister

	// synced is closed once every informer has read its resource, and
	// waited when the goroutine that waits for that has ended; both nil
	// until watchSync.
	synced, waited chan struct{}
}

// newInformerSet sets up the core informers, handler on each, their errors
// to errs and their requests to d's connection. It starts nothing.
func (d *Datastore) newInformerSet(ctx context.Context, handler cache.ResourceEventHandler, errs *watchErrors) (*informerSet, error) {
	s := &informerSet{errs: errs, req: newRequests(d.conn)}
	s.ctx, s.cancel = context.WithCancel(ctx)
	// The caches keep only what the conversion reads (slim); the informers
	// list, then watch (see listThenWatch).
	s.core = informers.NewSharedInformerFactoryWithOptions(listThenWatch{observedClient{d.opts.Client, s.req}}, d.opts.Resync,
		informers.WithTransform(slim))
	nodes, services, slices := s.core.Core().V1().Nodes(), s.core.Core().V1().Services(), s.core.Discovery().V1().EndpointSlices()
	// Every pod of the cluster, not only this node's: network policies
	// select peers anywhere by their labels and named ports.
	pods := s.core.Core().V1().Pods()
	namespaces, policies := s.core.Core().V1().Namespaces(), s.core.Networking().V1().NetworkPolicies()
	s.nodes, s.pods, s.services, s.slices = nodes.Lister(), pods.Lister(), services.Lister(), slices.Lister()
	s.namespaces, s.policies = namespaces.Lister(), policies.Lister()
	for _, r := range []struct {
		resource string
		inf      cache.SharedIndexInformer
	}{{"nodes", nodes.Informer()}, {"services", services.Informer()}, {"endpointslices", slices.Informer()},
		{"pods", pods.Informer()}, {"namespaces", namespaces.Informer()}, {"networkpolicies", policies.Informer()}} {
		if err := errs.watch(r.resource, r.inf, handler); err != nil {
			s.cancel()
			return nil, err
		}
	}
	return s, nil
}

// addAdmin sets up the informers of the admin policy resources (none:
// nothing), as newInformerSet does the core's.
func (s *informerSet) addAdmin(d *Datastore, resources []string, handler cache.ResourceEventHandler) error {
	var err error
	s.admin, err = d.newAdminWatch(resources, handler, s.errs, s.req)
	return err
}

// start starts the informers set up and not yet started.
func (s *informerSet) start() {
	s.core.StartWithContext(s.ctx)
	if s.admin != nil {
		s.admin.factory.StartWithContext(s.ctx)
	}
}

// watchSync closes s.synced once every informer has read its resource.
func (s *informerSet) watchSync() {
	s.synced, s.waited = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.waited)
		if s.errs.waitForSync(s.ctx) == nil {
			close(s.synced)
		}
	}()
}

// stop stops the informers and waits for them: they return as soon as
// their context ends (a request in flight is not waited for). The caches
// stay readable.
func (s *informerSet) stop() {
	s.cancel()
	s.core.Shutdown()
	if s.admin != nil {
		s.admin.factory.Shutdown()
	}
	if s.waited != nil {
		<-s.waited
	}
}

// read converts the caches of s into a datastore.Cluster.
func (d *Datastore) read(s *informerSet) (datastore.Cluster, error) {
	ns, err := s.nodes.List(labels.Everything())
	if err != nil {
		return datastore.Cluster{}, err
	}
	ps, err := s.pods.List(labels.Everything())
	if err != nil {
		return datastore.Cluster{}, err
	}
	ss, err := s.services.List(labels.Everything())
	if err != nil {
		return datastore.Cluster{}, err
	}
	es, err := s.slices.List(labels.Everything())
	if err != nil {
		return datastore.Cluster{}, err
	}
	nss, err := s.namespaces.List(labels.Everything())
	if err != nil {
		return datastore.Cluster{}, err
	}
	nps, err := s.policies.List(labels.Everything())
	if err != nil {
		return datastore.Cluster{}, err
	}
	c := d.cluster(ns, ps, ss, es)
	d.addPolicies(&c, nss, nps)
	if s.admin != nil {
		anps, banps, err := s.admin.list()
		if err != nil {
			return datastore.Cluster{}, err
		}
		d.addAdminPolicies(&c, anps, banps)
	}
	return c, nil
}

package kubernetes

import (
	"context"
	"slices"

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

	// fallback is what the set before this one held, as it stood when it
	// stopped (listers only, see frozen): read for the resources this set
	// has not read yet (see view); nil once it has read them all.
	fallback *informerSet
}

// hasRead reports whether s's informer of resource has read it; a
// resource s does not read counts as read.
func (s *informerSet) hasRead(resource string) bool { return !slices.Contains(s.unread(), resource) }

// unread returns the resources s has not read yet.
func (s *informerSet) unread() []string {
	if s.errs == nil {
		return nil // a frozen set
	}
	s.errs.mu.Lock()
	defer s.errs.mu.Unlock()
	var out []string
	for _, w := range s.errs.watched {
		if !w.inf.HasSynced() {
			out = append(out, w.resource)
		}
	}
	return out
}

// frozen returns the listers to read s through, alone in a set that
// reads nothing: s's own for the resources it has read, and its
// fallback's for the others. A set started after an outage falls back on
// it, so that a resource it cannot read (a permission lost meanwhile)
// keeps its last state instead of holding back the others; it keeps only
// the caches it needs of the sets before it.
func (s *informerSet) frozen() *informerSet {
	f := s.fallback
	if f == nil {
		f = &informerSet{}
	}
	v := &informerSet{
		nodes:      choose(s, "nodes", s.nodes, f.nodes),
		pods:       choose(s, "pods", s.pods, f.pods),
		services:   choose(s, "services", s.services, f.services),
		slices:     choose(s, "endpointslices", s.slices, f.slices),
		namespaces: choose(s, "namespaces", s.namespaces, f.namespaces),
		policies:   choose(s, "networkpolicies", s.policies, f.policies),
	}
	if s.admin != nil || f.admin != nil {
		v.admin = &adminWatch{}
		if f.admin != nil {
			v.admin.admins, v.admin.baselines = f.admin.admins, f.admin.baselines
		}
		if s.admin != nil {
			if s.admin.admins != nil {
				v.admin.admins = choose(s, ResourceAdminNetworkPolicies, s.admin.admins, v.admin.admins)
			}
			if s.admin.baselines != nil {
				v.admin.baselines = choose(s, ResourceBaselineAdminNetworkPolicies, s.admin.baselines, v.admin.baselines)
			}
		}
	}
	return v
}

// choose returns s's lister own of resource when s has read it or there is
// no other (theirs, the fallback's, nil), else theirs.
func choose[L any](s *informerSet, resource string, own, theirs L) L {
	if any(theirs) == nil || s.hasRead(resource) {
		return own
	}
	return theirs
}

// view returns the set to read s through: s itself, or with a fallback,
// its frozen listers.
func (s *informerSet) view() *informerSet {
	if s.fallback == nil {
		return s
	}
	return s.frozen()
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

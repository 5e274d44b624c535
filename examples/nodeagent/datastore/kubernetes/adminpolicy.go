package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	policyv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	policyinformers "sigs.k8s.io/network-policy-api/pkg/client/informers/externalversions"
	policylisters "sigs.k8s.io/network-policy-api/pkg/client/listers/apis/v1alpha1"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

// The resources of sigs.k8s.io/network-policy-api (group
// policy.networking.k8s.io, version v1alpha1) the Datastore reads.
const (
	ResourceAdminNetworkPolicies         = "adminnetworkpolicies"
	ResourceBaselineAdminNetworkPolicies = "baselineadminnetworkpolicies"
)

// BaselineName is the name of the one BaselineAdminNetworkPolicy a cluster
// may have; one of another name is ignored.
const BaselineName = "default"

// defaultRetry is the first wait after a failed look-up of the admin
// policy resources; each further failure doubles it up to maxRetry.
const (
	defaultRetry = time.Second
	maxRetry     = 30 * time.Second
)

// adminWatch reads the admin policies: its listers are nil for the
// resources the server does not serve or does not let this agent list.
type adminWatch struct {
	factory   policyinformers.SharedInformerFactory
	admins    policylisters.AdminNetworkPolicyLister
	baselines policylisters.BaselineAdminNetworkPolicyLister
}

// adminResources returns the admin policy resources Watch reads: those
// the server serves and this agent may list (none without a policy
// client). A missing resource is logged once at Info, a forbidden one at
// Warn; other failures (the server unreachable) are retried until ctx
// ends (Watch's first read, which the sync timeout ends), as the
// informers would. Watch asks once: an informer set started after an
// outage reads the same resources.
func (d *Datastore) adminResources(ctx context.Context, errs *watchErrors) ([]string, error) {
	if d.opts.Policies == nil {
		return nil, nil
	}
	served, err := d.servedAdminResources(ctx, errs)
	if err != nil {
		return nil, err
	}
	lists := map[string]func(context.Context) error{
		ResourceAdminNetworkPolicies: func(ctx context.Context) error {
			_, err := d.opts.Policies.PolicyV1alpha1().AdminNetworkPolicies().List(ctx, metav1.ListOptions{Limit: 1})
			return err
		},
		ResourceBaselineAdminNetworkPolicies: func(ctx context.Context) error {
			_, err := d.opts.Policies.PolicyV1alpha1().BaselineAdminNetworkPolicies().List(ctx, metav1.ListOptions{Limit: 1})
			return err
		},
	}
	var out []string
	for _, r := range []string{ResourceAdminNetworkPolicies, ResourceBaselineAdminNetworkPolicies} {
		if !served[r] {
			continue
		}
		ok, err := d.listable(ctx, errs, r, lists[r])
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// newAdminWatch sets up the informers of resources (admin policy
// resources, from adminResources), with handler on each, their errors to
// errs and their requests to req, or returns nil for none. It starts
// nothing.
func (d *Datastore) newAdminWatch(resources []string, handler cache.ResourceEventHandler, errs *watchErrors, req *requests) (*adminWatch, error) {
	if len(resources) == 0 {
		return nil, nil
	}
	w := &adminWatch{factory: policyinformers.NewSharedInformerFactoryWithOptions(policyListThenWatch{observedPolicyClient{d.opts.Policies, req}},
		d.opts.Resync, policyinformers.WithTransform(slim))}
	v1alpha1 := w.factory.Policy().V1alpha1()
	for _, r := range resources {
		var inf cache.SharedIndexInformer
		switch r {
		case ResourceAdminNetworkPolicies:
			i := v1alpha1.AdminNetworkPolicies()
			w.admins, inf = i.Lister(), i.Informer()
		case ResourceBaselineAdminNetworkPolicies:
			i := v1alpha1.BaselineAdminNetworkPolicies()
			w.baselines, inf = i.Lister(), i.Informer()
		default:
			return nil, fmt.Errorf("kubernetes datastore: %s is not an admin policy resource", r)
		}
		if err := errs.watch(r, inf, handler); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// servedAdminResources asks the server's discovery which admin policy
// resources it serves.
func (d *Datastore) servedAdminResources(ctx context.Context, errs *watchErrors) (map[string]bool, error) {
	gv := policyv1alpha1.GroupVersion.String()
	served := map[string]bool{}
	forbidden := false
	err := d.retry(ctx, errs, "discovery of "+gv, func(ctx context.Context) (bool, error) {
		list, err := discovery.ToServerResourcesInterfaceWithContext(d.opts.Policies.Discovery()).ServerResourcesForGroupVersionWithContext(ctx, gv)
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case apierrors.IsForbidden(err):
			forbidden = true
			d.log.Warn("kubernetes datastore: discovery of the admin network policies is forbidden; they are not watched", "groupVersion", gv, "err", err)
			return true, nil
		case err != nil:
			return false, err
		}
		for _, r := range list.APIResources {
			served[r.Name] = true
		}
		return true, nil
	})
	if err != nil || forbidden {
		return served, err
	}
	for _, r := range []string{ResourceAdminNetworkPolicies, ResourceBaselineAdminNetworkPolicies} {
		if !served[r] {
			d.log.Info("kubernetes datastore: the server does not serve this resource (its CRD is not installed); not watched until the agent restarts",
				"resource", r+"."+gv)
		}
	}
	return served, nil
}

// listable reports whether this agent may list the resource, by listing
// one object: false (logged) when that is forbidden or the resource went
// away.
func (d *Datastore) listable(ctx context.Context, errs *watchErrors, resource string, list func(context.Context) error) (bool, error) {
	ok := false
	err := d.retry(ctx, errs, "listing "+resource, func(ctx context.Context) (bool, error) {
		err := list(ctx)
		switch {
		case apierrors.IsForbidden(err):
			d.log.Warn("kubernetes datastore: listing this resource is forbidden (RBAC); not watched", "resource", resource, "err", err)
			return true, nil
		case apierrors.IsNotFound(err):
			d.log.Info("kubernetes datastore: the server does not serve this resource; not watched", "resource", resource)
			return true, nil
		case err != nil:
			return false, err
		}
		ok = true
		return true, nil
	})
	return ok, err
}

// retry calls f until it reports done, waiting after each error (logged
// at Warn the first time, Debug after, and noted in errs), and fails only
// when ctx ends, with its cause.
func (d *Datastore) retry(ctx context.Context, errs *watchErrors, what string, f func(context.Context) (bool, error)) error {
	wait := d.retryWait
	for attempt := 0; ; attempt++ {
		done, err := f(ctx)
		switch {
		case done:
			return nil
		case ctx.Err() != nil: // stopped, or out of time: not worth a warning
			return fmt.Errorf("kubernetes datastore: %s: %w (last error: %v)", what, context.Cause(ctx), err)
		}
		errs.note(what, err)
		level := d.log.Debug
		if attempt == 0 {
			level = d.log.Warn
		}
		level("kubernetes datastore: "+what+" failed; retrying", "err", err, "in", wait)
		t := d.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("kubernetes datastore: %s: %w (last error: %v)", what, context.Cause(ctx), err)
		case <-t.C():
		}
		wait = min(2*wait, maxRetry)
	}
}

// list returns the cached admin policies.
func (w *adminWatch) list() ([]*policyv1alpha1.AdminNetworkPolicy, []*policyv1alpha1.BaselineAdminNetworkPolicy, error) {
	var (
		admins    []*policyv1alpha1.AdminNetworkPolicy
		baselines []*policyv1alpha1.BaselineAdminNetworkPolicy
		err       error
	)
	if w.admins != nil {
		if admins, err = w.admins.List(labels.Everything()); err != nil {
			return nil, nil, err
		}
	}
	if w.baselines != nil {
		if baselines, err = w.baselines.List(labels.Everything()); err != nil {
			return nil, nil, err
		}
	}
	return admins, baselines, nil
}

// addAdminPolicies adds the admin policies and the baseline to c, each
// kept only when it converts and validates on its own (one bad policy
// never holds back the rest), and normalizes c again.
func (d *Datastore) addAdminPolicies(c *datastore.Cluster, admins []*policyv1alpha1.AdminNetworkPolicy, baselines []*policyv1alpha1.BaselineAdminNetworkPolicy) {
	for _, p := range admins {
		ap, err := adminPolicyOf(p)
		if err == nil {
			err = (&datastore.Cluster{AdminNetworkPolicies: []datastore.AdminNetworkPolicy{ap}}).Validate()
		}
		if err != nil {
			d.log.Warn("kubernetes datastore: admin network policy ignored", "policy", p.Name, "err", err)
			continue
		}
		c.AdminNetworkPolicies = append(c.AdminNetworkPolicies, ap)
	}
	for _, p := range baselines {
		if p.Name != BaselineName {
			d.log.Warn("kubernetes datastore: baseline admin network policy ignored", "policy", p.Name,
				"err", fmt.Sprintf("only the one named %q applies", BaselineName))
			continue
		}
		bp, err := baselinePolicyOf(p)
		if err == nil {
			err = (&datastore.Cluster{BaselineAdminNetworkPolicy: &bp}).Validate()
		}
		if err != nil {
			d.log.Warn("kubernetes datastore: baseline admin network policy ignored", "policy", p.Name, "err", err)
			continue
		}
		c.BaselineAdminNetworkPolicy = &bp
	}
	c.Normalize()
}

// peerForms are the forms one subject or peer of the API may take, of
// which exactly one is set.
type peerForms struct {
	namespaces *metav1.LabelSelector
	pods       *policyv1alpha1.NamespacedPod
	// unsupported names the forms set that the datastore cannot express.
	unsupported []string
}

// peer converts the form that is set; the error says why there is none
// the datastore can express.
func (f peerForms) peer() (datastore.AdminPeer, error) {
	set := len(f.unsupported)
	if f.namespaces != nil {
		set++
	}
	if f.pods != nil {
		set++
	}
	switch {
	case set == 0:
		// The API's advice for a peer without a known form (a field of
		// a newer version): fail closed. Refusing the policy is the
		// datastore's way.
		return datastore.AdminPeer{}, errors.New("no namespaces or pods (a field this agent does not know?)")
	case set > 1:
		return datastore.AdminPeer{}, errors.New("more than one of namespaces, pods, nodes, networks and domainNames")
	case len(f.unsupported) > 0:
		return datastore.AdminPeer{}, fmt.Errorf("%s peers are not supported", f.unsupported[0])
	case f.namespaces != nil:
		ns := selectorOf(f.namespaces)
		return datastore.AdminPeer{NamespaceSelector: &ns}, nil
	}
	ns, pods := selectorOf(&f.pods.NamespaceSelector), selectorOf(&f.pods.PodSelector)
	return datastore.AdminPeer{NamespaceSelector: &ns, PodSelector: &pods}, nil
}

// subjectOf converts a policy's subject.
func subjectOf(s policyv1alpha1.AdminNetworkPolicySubject) (datastore.AdminPeer, error) {
	p, err := peerForms{namespaces: s.Namespaces, pods: s.Pods}.peer()
	if err != nil {
		return p, fmt.Errorf("subject: %w", err)
	}
	return p, nil
}

// namedPortProtocols are the protocols a named port may stand for: the API
// gives it none, the container port of that name has one.
var namedPortProtocols = []string{"TCP", "UDP", "SCTP"}

// adminRuleOf converts one rule of either direction.
func adminRuleOf(name, action string, peers []peerForms, ports *[]policyv1alpha1.AdminNetworkPolicyPort) (datastore.AdminRule, error) {
	out := datastore.AdminRule{Name: name, Action: action}
	// An empty list would mean every peer (every port) in the datastore;
	// the API requires at least one.
	if len(peers) == 0 {
		return out, errors.New("no peers")
	}
	for i, f := range peers {
		p, err := f.peer()
		if err != nil {
			return out, fmt.Errorf("peer %d: %w", i, err)
		}
		out.Peers = append(out.Peers, p)
	}
	if ports == nil {
		return out, nil
	}
	if len(*ports) == 0 {
		return out, errors.New("an empty ports list")
	}
	for i, p := range *ports {
		dps, err := adminPortOf(p)
		if err != nil {
			return out, fmt.Errorf("port %d: %w", i, err)
		}
		out.Ports = append(out.Ports, dps...)
	}
	return out, nil
}

// adminPortOf converts one port: a number, an inclusive range, or a
// container port's name (one port per protocol it may have). What is out
// of range is kept in a form Validate refuses, except a range's end, which
// has no such form.
func adminPortOf(p policyv1alpha1.AdminNetworkPolicyPort) ([]datastore.NetworkPolicyPort, error) {
	forms := 0
	for _, set := range []bool{p.PortNumber != nil, p.PortRange != nil, p.NamedPort != nil} {
		if set {
			forms++
		}
	}
	if forms != 1 {
		return nil, fmt.Errorf("%d of portNumber, portRange and namedPort set, not one", forms)
	}
	switch {
	case p.PortNumber != nil:
		return []datastore.NetworkPolicyPort{{Protocol: string(p.PortNumber.Protocol), Port: strconv.Itoa(int(p.PortNumber.Port))}}, nil
	case p.PortRange != nil:
		r := p.PortRange
		if r.End < 1 || r.End > 65535 {
			return nil, fmt.Errorf("portRange end %d is not a port", r.End)
		}
		return []datastore.NetworkPolicyPort{{Protocol: string(r.Protocol), Port: strconv.Itoa(int(r.Start)), EndPort: uint16(r.End)}}, nil
	}
	if *p.NamedPort == "" {
		return nil, errors.New("an empty namedPort")
	}
	var out []datastore.NetworkPolicyPort
	for _, proto := range namedPortProtocols {
		out = append(out, datastore.NetworkPolicyPort{Protocol: proto, Port: *p.NamedPort})
	}
	return out, nil
}

// egressForms lists the forms of an egress peer set that the datastore
// cannot express.
func egressForms(nodes *metav1.LabelSelector, networks []policyv1alpha1.CIDR, domainNames []policyv1alpha1.DomainName) []string {
	var out []string
	if nodes != nil {
		out = append(out, "nodes")
	}
	if len(networks) > 0 {
		out = append(out, "networks")
	}
	if len(domainNames) > 0 {
		out = append(out, "domainNames")
	}
	return out
}

// adminPolicyOf converts an AdminNetworkPolicy; the error says what the
// datastore cannot express. What it can express but does not accept is
// left to Validate.
func adminPolicyOf(p *policyv1alpha1.AdminNetworkPolicy) (datastore.AdminNetworkPolicy, error) {
	var in, eg []ruleSource
	for _, r := range p.Spec.Ingress {
		src := ruleSource{name: r.Name, action: string(r.Action), ports: r.Ports}
		for _, f := range r.From {
			src.peers = append(src.peers, peerForms{namespaces: f.Namespaces, pods: f.Pods})
		}
		in = append(in, src)
	}
	for _, r := range p.Spec.Egress {
		src := ruleSource{name: r.Name, action: string(r.Action), ports: r.Ports}
		for _, t := range r.To {
			src.peers = append(src.peers, peerForms{namespaces: t.Namespaces, pods: t.Pods, unsupported: egressForms(t.Nodes, t.Networks, t.DomainNames)})
		}
		eg = append(eg, src)
	}
	return policyOfRules(datastore.AdminNetworkPolicy{Name: p.Name, Priority: int(p.Spec.Priority)}, p.Spec.Subject, in, eg)
}

// baselinePolicyOf converts a BaselineAdminNetworkPolicy as adminPolicyOf
// does an AdminNetworkPolicy.
func baselinePolicyOf(p *policyv1alpha1.BaselineAdminNetworkPolicy) (datastore.AdminNetworkPolicy, error) {
	var in, eg []ruleSource
	for _, r := range p.Spec.Ingress {
		src := ruleSource{name: r.Name, action: string(r.Action), ports: r.Ports}
		for _, f := range r.From {
			src.peers = append(src.peers, peerForms{namespaces: f.Namespaces, pods: f.Pods})
		}
		in = append(in, src)
	}
	for _, r := range p.Spec.Egress {
		src := ruleSource{name: r.Name, action: string(r.Action), ports: r.Ports}
		for _, t := range r.To {
			src.peers = append(src.peers, peerForms{namespaces: t.Namespaces, pods: t.Pods, unsupported: egressForms(t.Nodes, t.Networks, nil)})
		}
		eg = append(eg, src)
	}
	return policyOfRules(datastore.AdminNetworkPolicy{Name: p.Name}, p.Spec.Subject, in, eg)
}

// ruleSource is one rule of either kind of admin policy, as the
// conversion reads it.
type ruleSource struct {
	name, action string
	peers        []peerForms
	ports        *[]policyv1alpha1.AdminNetworkPolicyPort
}

// policyOfRules completes out with its subject and its ingress and egress
// rules.
func policyOfRules(out datastore.AdminNetworkPolicy, subject policyv1alpha1.AdminNetworkPolicySubject, in, eg []ruleSource) (datastore.AdminNetworkPolicy, error) {
	var err error
	if out.Subject, err = subjectOf(subject); err != nil {
		return out, err
	}
	for _, d := range []struct {
		name  string
		rules []ruleSource
		to    *[]datastore.AdminRule
	}{{"ingress", in, &out.Ingress}, {"egress", eg, &out.Egress}} {
		for i, r := range d.rules {
			rule, err := adminRuleOf(r.name, r.action, r.peers, r.ports)
			if err != nil {
				return out, fmt.Errorf("%s rule %d: %w", d.name, i, err)
			}
			*d.to = append(*d.to, rule)
		}
	}
	return out, nil
}

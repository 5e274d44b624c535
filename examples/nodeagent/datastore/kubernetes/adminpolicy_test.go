package kubernetes_test

import (
	"bytes"
	"context"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	policyv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	policyfake "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned/fake"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
)

// logBuffer collects a logger's lines; safe for the Watch goroutine to
// write while the test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines returns the lines that hold every one of parts.
func (b *logBuffer) lines(parts ...string) []string {
	var out []string
	for l := range strings.Lines(b.String()) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}

func newLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

func labelSel(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func dsSel(kv ...string) *datastore.LabelSelector {
	s := &datastore.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func anp(name string, priority int32, spec policyv1alpha1.AdminNetworkPolicySpec) *policyv1alpha1.AdminNetworkPolicy {
	spec.Priority = priority
	return &policyv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func banp(name string, spec policyv1alpha1.BaselineAdminNetworkPolicySpec) *policyv1alpha1.BaselineAdminNetworkPolicy {
	return &policyv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

// nsSubject selects the pods of the namespaces with the labels.
func nsSubject(kv ...string) policyv1alpha1.AdminNetworkPolicySubject {
	return policyv1alpha1.AdminNetworkPolicySubject{Namespaces: labelSel(kv...)}
}

// denyFrom is one ingress rule denying the namespaces with the labels.
func denyFrom(kv ...string) []policyv1alpha1.AdminNetworkPolicyIngressRule {
	return []policyv1alpha1.AdminNetworkPolicyIngressRule{{Action: policyv1alpha1.AdminNetworkPolicyRuleActionDeny,
		From: []policyv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: labelSel(kv...)}}}}
}

// dsDenyFrom is denyFrom converted.
func dsDenyFrom(kv ...string) []datastore.AdminRule {
	return []datastore.AdminRule{{Action: "Deny", Peers: []datastore.AdminPeer{{NamespaceSelector: dsSel(kv...)}}}}
}

func portNumber(proto corev1.Protocol, port int32) policyv1alpha1.AdminNetworkPolicyPort {
	return policyv1alpha1.AdminNetworkPolicyPort{PortNumber: &policyv1alpha1.Port{Protocol: proto, Port: port}}
}

func portRange(proto corev1.Protocol, start, end int32) policyv1alpha1.AdminNetworkPolicyPort {
	return policyv1alpha1.AdminNetworkPolicyPort{PortRange: &policyv1alpha1.PortRange{Protocol: proto, Start: start, End: end}}
}

// egressTo is one egress rule of action to the peer, on the ports (nil:
// every port).
func egressTo(action policyv1alpha1.AdminNetworkPolicyRuleAction, peer policyv1alpha1.AdminNetworkPolicyEgressPeer,
	ports ...policyv1alpha1.AdminNetworkPolicyPort) []policyv1alpha1.AdminNetworkPolicyEgressRule {
	r := policyv1alpha1.AdminNetworkPolicyEgressRule{Action: action, To: []policyv1alpha1.AdminNetworkPolicyEgressPeer{peer}}
	if ports != nil {
		r.Ports = &ports
	}
	return []policyv1alpha1.AdminNetworkPolicyEgressRule{r}
}

var toBlue = policyv1alpha1.AdminNetworkPolicyEgressPeer{Namespaces: labelSel("team", "blue")}

// TestAdminPolicyConversion: the admin policies as the datastore takes
// them; one the datastore cannot express, or that does not validate, is
// left out alone, with a warning naming it and the reason.
func TestAdminPolicyConversion(t *testing.T) {
	allow, deny, pass := policyv1alpha1.AdminNetworkPolicyRuleActionAllow, policyv1alpha1.AdminNetworkPolicyRuleActionDeny, policyv1alpha1.AdminNetworkPolicyRuleActionPass
	dns := "dns"
	empty := ""
	for _, tc := range []struct {
		name         string
		admins       []*policyv1alpha1.AdminNetworkPolicy
		baselines    []*policyv1alpha1.BaselineAdminNetworkPolicy
		want         []datastore.AdminNetworkPolicy
		wantBaseline *datastore.AdminNetworkPolicy
		// warn: what the one warning says (with the policy's name); empty:
		// no warning.
		warn []string
	}{{
		name: "namespaces subject, ingress from namespaces on a port",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("guard", 10, policyv1alpha1.AdminNetworkPolicySpec{
			Subject: nsSubject("team", "blue"),
			Ingress: []policyv1alpha1.AdminNetworkPolicyIngressRule{{Name: "no-red", Action: deny,
				From:  []policyv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: labelSel("team", "red")}},
				Ports: &[]policyv1alpha1.AdminNetworkPolicyPort{portNumber(corev1.ProtocolTCP, 80)}}},
		})},
		want: []datastore.AdminNetworkPolicy{{Name: "guard", Priority: 10, Subject: datastore.AdminPeer{NamespaceSelector: dsSel("team", "blue")},
			Ingress: []datastore.AdminRule{{Name: "no-red", Action: "Deny",
				Peers: []datastore.AdminPeer{{NamespaceSelector: dsSel("team", "red")}},
				Ports: []datastore.NetworkPolicyPort{{Protocol: "TCP", Port: "80"}}}}}},
	}, {
		name: "pods subject, egress to pods with a port range and a named port",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("web", 0, policyv1alpha1.AdminNetworkPolicySpec{
			Subject: policyv1alpha1.AdminNetworkPolicySubject{Pods: &policyv1alpha1.NamespacedPod{
				PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}}}}}},
			Egress: egressTo(pass, policyv1alpha1.AdminNetworkPolicyEgressPeer{Pods: &policyv1alpha1.NamespacedPod{
				NamespaceSelector: *labelSel("team", "blue"), PodSelector: *labelSel("app", "dns")}},
				portRange(corev1.ProtocolUDP, 5000, 5010), policyv1alpha1.AdminNetworkPolicyPort{NamedPort: &dns}),
		})},
		want: []datastore.AdminNetworkPolicy{{Name: "web",
			Subject: datastore.AdminPeer{NamespaceSelector: &datastore.LabelSelector{},
				PodSelector: &datastore.LabelSelector{MatchExpressions: []datastore.LabelRequirement{{Key: "app", Operator: "In", Values: []string{"web", "api"}}}}},
			Egress: []datastore.AdminRule{{Action: "Pass",
				Peers: []datastore.AdminPeer{{NamespaceSelector: dsSel("team", "blue"), PodSelector: dsSel("app", "dns")}},
				// The named port has the protocol of the container port
				// of that name, whichever it is.
				Ports: []datastore.NetworkPolicyPort{{Protocol: "UDP", Port: "5000", EndPort: 5010},
					{Protocol: "TCP", Port: "dns"}, {Protocol: "UDP", Port: "dns"}, {Protocol: "SCTP", Port: "dns"}}}}}},
	}, {
		name:   "an egress networks peer is refused",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("cidr", 1, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(), Egress: egressTo(deny, policyv1alpha1.AdminNetworkPolicyEgressPeer{Networks: []policyv1alpha1.CIDR{"192.0.2.0/24"}})})},
		warn:   []string{"policy=cidr", "egress rule 0: peer 0: networks peers are not supported"},
	}, {
		name:   "an egress nodes peer is refused",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("nodes", 1, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(), Egress: egressTo(allow, policyv1alpha1.AdminNetworkPolicyEgressPeer{Nodes: labelSel()})})},
		warn:   []string{"policy=nodes", "nodes peers are not supported"},
	}, {
		name:   "an egress domainNames peer is refused",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("fqdn", 1, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(), Egress: egressTo(allow, policyv1alpha1.AdminNetworkPolicyEgressPeer{DomainNames: []policyv1alpha1.DomainName{"example.org"}})})},
		warn:   []string{"policy=fqdn", "domainNames peers are not supported"},
	}, {
		name:   "a peer of no known form is refused (not read as every pod)",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("unknown", 1, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(), Egress: egressTo(deny, policyv1alpha1.AdminNetworkPolicyEgressPeer{})})},
		warn:   []string{"policy=unknown", "no namespaces or pods"},
	}, {
		name: "a peer of two forms is refused",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("two", 1, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(),
			Egress: egressTo(deny, policyv1alpha1.AdminNetworkPolicyEgressPeer{Namespaces: labelSel(), Pods: &policyv1alpha1.NamespacedPod{}})})},
		warn: []string{"policy=two", "more than one of"},
	}, {
		name:   "a subject of no form is refused",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("nosubject", 1, policyv1alpha1.AdminNetworkPolicySpec{Ingress: denyFrom()})},
		warn:   []string{"policy=nosubject", "subject: no namespaces or pods"},
	}, {
		name: "a rule without peers is refused (not read as every peer)",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("nopeers", 1, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(),
			Ingress: []policyv1alpha1.AdminNetworkPolicyIngressRule{{Action: deny}}})},
		warn: []string{"policy=nopeers", "ingress rule 0: no peers"},
	}, {
		name:   "an empty ports list is refused (not read as every port)",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("noports", 1, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(), Egress: egressTo(allow, toBlue, []policyv1alpha1.AdminNetworkPolicyPort{}...)})},
		warn:   []string{"policy=noports", "an empty ports list"},
	}, {
		name:   "a port of no form is refused",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("portless", 1, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(), Egress: egressTo(allow, toBlue, policyv1alpha1.AdminNetworkPolicyPort{})})},
		warn:   []string{"policy=portless", "0 of portNumber, portRange and namedPort set"},
	}, {
		name:   "an empty named port is refused",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("noname", 1, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(), Egress: egressTo(allow, toBlue, policyv1alpha1.AdminNetworkPolicyPort{NamedPort: &empty})})},
		warn:   []string{"policy=noname", "an empty namedPort"},
	}, {
		name:   "a range's end beyond the ports is refused",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("far", 1, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(), Egress: egressTo(allow, toBlue, portRange("", 1000, 70000))})},
		warn:   []string{"policy=far", "portRange end 70000 is not a port"},
	}, {
		name:   "the datastore's validation: a range ending below its start",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("backwards", 1, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(), Egress: egressTo(allow, toBlue, portRange("", 2000, 1000))})},
		warn:   []string{"policy=backwards", "endPort 1000 is below port 2000"},
	}, {
		name:   "the datastore's validation: port 0",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("zero", 1, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(), Egress: egressTo(allow, toBlue, portNumber("", 0))})},
		warn:   []string{"policy=zero", "neither a port number nor a port name"},
	}, {
		name:   "the datastore's validation: an unknown action",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("reject", 1, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(), Egress: egressTo("Reject", toBlue)})},
		warn:   []string{"policy=reject", `action \"Reject\"`},
	}, {
		name: "the datastore's validation: a bad selector",
		admins: []*policyv1alpha1.AdminNetworkPolicy{anp("badsel", 1, policyv1alpha1.AdminNetworkPolicySpec{
			Subject: policyv1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}}},
			Ingress: denyFrom()})},
		warn: []string{"policy=badsel", `unknown operator \"Near\"`},
	}, {
		name: "the baseline",
		baselines: []*policyv1alpha1.BaselineAdminNetworkPolicy{banp("default", policyv1alpha1.BaselineAdminNetworkPolicySpec{
			Subject: nsSubject(),
			Ingress: []policyv1alpha1.BaselineAdminNetworkPolicyIngressRule{{Action: policyv1alpha1.BaselineAdminNetworkPolicyRuleActionAllow,
				From: []policyv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: labelSel()}}}},
			Egress: []policyv1alpha1.BaselineAdminNetworkPolicyEgressRule{{Action: policyv1alpha1.BaselineAdminNetworkPolicyRuleActionDeny,
				To:    []policyv1alpha1.BaselineAdminNetworkPolicyEgressPeer{{Namespaces: labelSel("team", "red")}},
				Ports: &[]policyv1alpha1.AdminNetworkPolicyPort{portNumber(corev1.ProtocolSCTP, 9)}}},
		})},
		wantBaseline: &datastore.AdminNetworkPolicy{Name: "default", Subject: datastore.AdminPeer{NamespaceSelector: dsSel()},
			Ingress: []datastore.AdminRule{{Action: "Allow", Peers: []datastore.AdminPeer{{NamespaceSelector: dsSel()}}}},
			Egress: []datastore.AdminRule{{Action: "Deny", Peers: []datastore.AdminPeer{{NamespaceSelector: dsSel("team", "red")}},
				Ports: []datastore.NetworkPolicyPort{{Protocol: "SCTP", Port: "9"}}}}},
	}, {
		name: "a baseline of another name is ignored",
		baselines: []*policyv1alpha1.BaselineAdminNetworkPolicy{banp("other", policyv1alpha1.BaselineAdminNetworkPolicySpec{Subject: nsSubject(),
			Ingress: []policyv1alpha1.BaselineAdminNetworkPolicyIngressRule{{Action: "Deny", From: []policyv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: labelSel()}}}}})},
		warn: []string{"policy=other", `only the one named \"default\" applies`},
	}, {
		name: "the baseline with a Pass rule is refused (the datastore's validation)",
		baselines: []*policyv1alpha1.BaselineAdminNetworkPolicy{banp("default", policyv1alpha1.BaselineAdminNetworkPolicySpec{Subject: nsSubject(),
			Ingress: []policyv1alpha1.BaselineAdminNetworkPolicyIngressRule{{Action: "Pass", From: []policyv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: labelSel()}}}}})},
		warn: []string{"policy=default", `action \"Pass\"`},
	}, {
		name: "the baseline with a networks peer is refused",
		baselines: []*policyv1alpha1.BaselineAdminNetworkPolicy{banp("default", policyv1alpha1.BaselineAdminNetworkPolicySpec{Subject: nsSubject(),
			Egress: []policyv1alpha1.BaselineAdminNetworkPolicyEgressRule{{Action: "Deny",
				To: []policyv1alpha1.BaselineAdminNetworkPolicyEgressPeer{{Networks: []policyv1alpha1.CIDR{"0.0.0.0/0"}}}}}})},
		warn: []string{"policy=default", "networks peers are not supported"},
	}, {
		name: "a mixed list: the bad one is dropped, the rest kept in priority order",
		admins: []*policyv1alpha1.AdminNetworkPolicy{
			anp("late", 30, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject("team", "blue"), Ingress: denyFrom("team", "red")}),
			anp("bad", 20, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(), Egress: egressTo(deny, policyv1alpha1.AdminNetworkPolicyEgressPeer{Networks: []policyv1alpha1.CIDR{"10.0.0.0/8"}})}),
			anp("early", 5, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject("team", "green"), Ingress: denyFrom("team", "blue")}),
		},
		baselines: []*policyv1alpha1.BaselineAdminNetworkPolicy{banp("default", policyv1alpha1.BaselineAdminNetworkPolicySpec{Subject: nsSubject()})},
		want: []datastore.AdminNetworkPolicy{
			{Name: "early", Priority: 5, Subject: datastore.AdminPeer{NamespaceSelector: dsSel("team", "green")}, Ingress: dsDenyFrom("team", "blue")},
			{Name: "late", Priority: 30, Subject: datastore.AdminPeer{NamespaceSelector: dsSel("team", "blue")}, Ingress: dsDenyFrom("team", "red")},
		},
		wantBaseline: &datastore.AdminNetworkPolicy{Name: "default", Subject: datastore.AdminPeer{NamespaceSelector: dsSel()}},
		warn:         []string{"policy=bad", "networks peers are not supported"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			log, logs := newLogger()
			d, err := kubernetes.New(kubernetes.Options{Client: fake.NewClientset(), NodeName: "node1", Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			c := d.AdminPoliciesOf(tc.admins, tc.baselines)
			if !reflect.DeepEqual(c.AdminNetworkPolicies, tc.want) {
				t.Errorf("admin policies:\n got %+v\nwant %+v", c.AdminNetworkPolicies, tc.want)
			}
			if !reflect.DeepEqual(c.BaselineAdminNetworkPolicy, tc.wantBaseline) {
				t.Errorf("baseline:\n got %+v\nwant %+v", c.BaselineAdminNetworkPolicy, tc.wantBaseline)
			}
			warns := logs.lines("level=WARN")
			switch {
			case len(tc.warn) == 0 && len(warns) > 0:
				t.Errorf("unexpected warnings: %q", warns)
			case len(tc.warn) > 0 && (len(warns) != 1 || len(logs.lines(append([]string{"level=WARN"}, tc.warn...)...)) != 1):
				t.Errorf("warnings %q, want one with %q", warns, tc.warn)
			}
			// What is kept validates as a whole.
			if err := c.Validate(); err != nil {
				t.Errorf("the cluster does not validate: %v", err)
			}
		})
	}
}

// policyClient returns a fake network-policy-api client whose discovery
// serves the resources given. It is the simple one: the field-managed
// NewClientset of v0.3.0 has no schema of the v1alpha1 types and refuses
// to create them.
func policyClient(resources []string, objects ...runtime.Object) *policyfake.Clientset {
	client := policyfake.NewSimpleClientset(objects...)
	if len(resources) > 0 {
		list := &metav1.APIResourceList{GroupVersion: policyv1alpha1.GroupVersion.String()}
		for _, r := range resources {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: r})
		}
		client.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{list}
	}
	return client
}

var bothResources = []string{kubernetes.ResourceAdminNetworkPolicies, kubernetes.ResourceBaselineAdminNetworkPolicies}

// TestWatchAdminPolicies: admin policies created, changed and deleted
// through the API reach the Cluster; a bad one is left out alone.
func TestWatchAdminPolicies(t *testing.T) {
	guard := anp("guard", 10, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject("team", "blue"), Ingress: denyFrom("team", "red")})
	policies := policyClient(bothResources, guard)
	log, logs := newLogger()
	d, err := kubernetes.New(kubernetes.Options{Client: fake.NewClientset(objects(t)...), Policies: policies,
		NodeName: "node1", Debounce: time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	next := watch(t, d)
	c := next()
	want := datastore.AdminNetworkPolicy{Name: "guard", Priority: 10, Subject: datastore.AdminPeer{NamespaceSelector: dsSel("team", "blue")},
		Ingress: dsDenyFrom("team", "red")}
	if len(c.AdminNetworkPolicies) != 1 || !reflect.DeepEqual(c.AdminNetworkPolicies[0], want) || c.BaselineAdminNetworkPolicy != nil {
		t.Fatalf("first update: %+v, baseline %+v", c.AdminNetworkPolicies, c.BaselineAdminNetworkPolicy)
	}
	if len(c.Nodes) != 2 || len(c.Pods) != 2 {
		t.Errorf("the rest of the cluster is missing: %d nodes, %d pods", len(c.Nodes), len(c.Pods))
	}

	ctx := context.Background()
	v1alpha1 := policies.PolicyV1alpha1()
	// Created: an earlier policy, a bad one (left out) and the baseline.
	early := anp("early", 1, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject("team", "red"), Ingress: denyFrom("team", "blue")})
	bad := anp("bad", 2, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(),
		Egress: egressTo(policyv1alpha1.AdminNetworkPolicyRuleActionDeny, policyv1alpha1.AdminNetworkPolicyEgressPeer{Nodes: labelSel()})})
	for _, p := range []*policyv1alpha1.AdminNetworkPolicy{early, bad} {
		if _, err := v1alpha1.AdminNetworkPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	baseline := banp("default", policyv1alpha1.BaselineAdminNetworkPolicySpec{Subject: nsSubject()})
	if _, err := v1alpha1.BaselineAdminNetworkPolicies().Create(ctx, baseline, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for c = next(); len(c.AdminNetworkPolicies) != 2 || c.BaselineAdminNetworkPolicy == nil; c = next() {
	}
	if c.AdminNetworkPolicies[0].Name != "early" || c.AdminNetworkPolicies[1].Name != "guard" {
		t.Errorf("admin policies: %+v", c.AdminNetworkPolicies)
	}
	if len(logs.lines("level=WARN", "policy=bad", "nodes peers are not supported")) == 0 {
		t.Errorf("no warning about the bad policy:\n%s", logs)
	}

	// Updated: guard moves before early.
	guard.Spec.Priority = 0
	if _, err := v1alpha1.AdminNetworkPolicies().Update(ctx, guard, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for c = next(); c.AdminNetworkPolicies[0].Name != "guard"; c = next() {
	}
	if c.AdminNetworkPolicies[0].Priority != 0 || c.AdminNetworkPolicies[1].Name != "early" {
		t.Errorf("after the update: %+v", c.AdminNetworkPolicies)
	}

	// Deleted: guard and the baseline are gone.
	if err := v1alpha1.AdminNetworkPolicies().Delete(ctx, "guard", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.BaselineAdminNetworkPolicies().Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for c = next(); len(c.AdminNetworkPolicies) != 1 || c.BaselineAdminNetworkPolicy != nil; c = next() {
	}
	if c.AdminNetworkPolicies[0].Name != "early" {
		t.Errorf("after the deletion: %+v", c.AdminNetworkPolicies)
	}
}

// TestWatchWithoutAdminPolicyCRDs: when the server does not serve the
// resources, Watch says so once at Info and delivers the cluster without
// them, update after update.
func TestWatchWithoutAdminPolicyCRDs(t *testing.T) {
	log, logs := newLogger()
	client := fake.NewClientset(objects(t)...)
	d, err := kubernetes.New(kubernetes.Options{Client: client, Policies: policyClient(nil),
		NodeName: "node1", Debounce: time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	next := watch(t, d)
	c := next()
	if len(c.Nodes) != 2 || c.AdminNetworkPolicies != nil || c.BaselineAdminNetworkPolicy != nil {
		t.Fatalf("first update: %d nodes, admin policies %+v, baseline %+v", len(c.Nodes), c.AdminNetworkPolicies, c.BaselineAdminNetworkPolicy)
	}
	if _, err := client.CoreV1().Nodes().Create(context.Background(), k8sNode("node3", "198.18.0.3", "10.244.3.0/24", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for c = next(); len(c.Nodes) != 3; c = next() {
	}
	for _, r := range bothResources {
		if n := len(logs.lines("level=INFO", "does not serve", "resource="+r+".")); n != 1 {
			t.Errorf("%s: %d Info lines, want one:\n%s", r, n, logs)
		}
	}
	if w := logs.lines("level=WARN"); len(w) > 0 {
		t.Errorf("warnings: %q", w)
	}
}

// TestWatchAdminPoliciesPartlyAvailable: a resource the server does not
// serve, or that this agent may not list, is left out; the other is
// watched.
func TestWatchAdminPoliciesPartlyAvailable(t *testing.T) {
	guard := anp("guard", 10, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(), Ingress: denyFrom()})
	baseline := banp("default", policyv1alpha1.BaselineAdminNetworkPolicySpec{Subject: nsSubject(), Ingress: []policyv1alpha1.BaselineAdminNetworkPolicyIngressRule{
		{Action: "Deny", From: []policyv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: labelSel()}}}}})
	t.Run("baseline not served", func(t *testing.T) {
		log, logs := newLogger()
		d, err := kubernetes.New(kubernetes.Options{Client: fake.NewClientset(objects(t)...), NodeName: "node1", Debounce: time.Millisecond, Logger: log,
			Policies: policyClient([]string{kubernetes.ResourceAdminNetworkPolicies}, guard, baseline)})
		if err != nil {
			t.Fatal(err)
		}
		c := watch(t, d)()
		if len(c.AdminNetworkPolicies) != 1 || c.BaselineAdminNetworkPolicy != nil {
			t.Errorf("admin policies %+v, baseline %+v", c.AdminNetworkPolicies, c.BaselineAdminNetworkPolicy)
		}
		if n := len(logs.lines("level=INFO", "does not serve", "resource="+kubernetes.ResourceBaselineAdminNetworkPolicies+".")); n != 1 {
			t.Errorf("%d Info lines about the baseline:\n%s", n, logs)
		}
	})
	t.Run("listing the admin policies forbidden", func(t *testing.T) {
		log, logs := newLogger()
		policies := policyClient(bothResources, guard, baseline)
		policies.PrependReactor("list", kubernetes.ResourceAdminNetworkPolicies, func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(policyv1alpha1.Resource(kubernetes.ResourceAdminNetworkPolicies), "", nil)
		})
		d, err := kubernetes.New(kubernetes.Options{Client: fake.NewClientset(objects(t)...), NodeName: "node1", Debounce: time.Millisecond, Logger: log,
			Policies: policies})
		if err != nil {
			t.Fatal(err)
		}
		c := watch(t, d)()
		if c.AdminNetworkPolicies != nil || c.BaselineAdminNetworkPolicy == nil || len(c.Nodes) != 2 {
			t.Errorf("admin policies %+v, baseline %+v, %d nodes", c.AdminNetworkPolicies, c.BaselineAdminNetworkPolicy, len(c.Nodes))
		}
		if n := len(logs.lines("level=WARN", "forbidden", "resource="+kubernetes.ResourceAdminNetworkPolicies+" ")); n != 1 {
			t.Errorf("%d warnings about the forbidden list:\n%s", n, logs)
		}
	})
	t.Run("discovery forbidden", func(t *testing.T) {
		log, logs := newLogger()
		policies := policyClient(bothResources, guard, baseline)
		policies.PrependReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(policyv1alpha1.Resource("resource"), "", nil)
		})
		d, err := kubernetes.New(kubernetes.Options{Client: fake.NewClientset(objects(t)...), NodeName: "node1", Debounce: time.Millisecond, Logger: log,
			Policies: policies})
		if err != nil {
			t.Fatal(err)
		}
		c := watch(t, d)()
		if c.AdminNetworkPolicies != nil || c.BaselineAdminNetworkPolicy != nil || len(c.Nodes) != 2 {
			t.Errorf("admin policies %+v, baseline %+v, %d nodes", c.AdminNetworkPolicies, c.BaselineAdminNetworkPolicy, len(c.Nodes))
		}
		if n := len(logs.lines("level=WARN", "discovery", "forbidden")); n != 1 {
			t.Errorf("%d warnings about the forbidden discovery:\n%s", n, logs)
		}
	})
}

// TestWatchAdminPoliciesRetriesDiscovery: a failure other than a missing or
// forbidden resource (the server unreachable) is retried, not taken for a
// missing CRD.
func TestWatchAdminPoliciesRetriesDiscovery(t *testing.T) {
	guard := anp("guard", 10, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject(), Ingress: denyFrom()})
	policies := policyClient(bothResources, guard)
	failures := 3
	var mu sync.Mutex
	policies.PrependReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if failures == 0 {
			return false, nil, nil
		}
		failures--
		return true, nil, apierrors.NewServiceUnavailable("the server is down")
	})
	log, logs := newLogger()
	d, err := kubernetes.New(kubernetes.Options{Client: fake.NewClientset(objects(t)...), NodeName: "node1", Debounce: time.Millisecond, Logger: log,
		Policies: policies})
	if err != nil {
		t.Fatal(err)
	}
	d.SetRetryWait(time.Millisecond)
	c := watch(t, d)()
	if len(c.AdminNetworkPolicies) != 1 {
		t.Errorf("admin policies %+v", c.AdminNetworkPolicies)
	}
	if n := len(logs.lines("failed; retrying")); n != 3 || len(logs.lines("level=WARN", "failed; retrying")) != 1 {
		t.Errorf("%d retries logged, want 3 (the first at Warn):\n%s", n, logs)
	}
}

// TestWatchEndsWhileDiscoveryFails: Watch returns when its context ends,
// also while it retries the discovery.
func TestWatchEndsWhileDiscoveryFails(t *testing.T) {
	policies := policyClient(bothResources)
	tried := make(chan struct{}, 1)
	policies.PrependReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case tried <- struct{}{}:
		default:
		}
		return true, nil, apierrors.NewServiceUnavailable("the server is down")
	})
	d, err := kubernetes.New(kubernetes.Options{Client: fake.NewClientset(), NodeName: "node1", Policies: policies})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- d.Watch(ctx, func(datastore.Cluster) { t.Error("an update without the admin policies") })
	}()
	<-tried
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("Watch = %v, want the context's end", err)
	}
}

package deploy

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
)

// writeOperations are the admission operations of RBAC's write verbs.
var writeOperations = map[string]admissionregistrationv1.OperationType{
	"create": admissionregistrationv1.Create, "update": admissionregistrationv1.Update, "patch": admissionregistrationv1.Update,
	"delete": admissionregistrationv1.Delete, "deletecollection": admissionregistrationv1.Delete,
}

// nodeNameExtra is the user info extra in which the API server gives the
// node of a pod-bound service account token (Kubernetes 1.30 and later).
const nodeNameExtra = "authentication.kubernetes.io/node-name"

func TestAdmissionPolicy(t *testing.T) {
	m := load(t)
	pol, binding, sa, role := m.policies[0], m.policyBindings[0], m.serviceAccounts[0], m.clusterRoles[0]
	if binding.Spec.PolicyName != pol.Name {
		t.Errorf("binding %s is for policy %q, not %s", binding.Name, binding.Spec.PolicyName, pol.Name)
	}
	if !slices.Contains(binding.Spec.ValidationActions, admissionregistrationv1.Deny) {
		t.Errorf("binding %s: actions %v do not deny", binding.Name, binding.Spec.ValidationActions)
	}
	if binding.Spec.ParamRef != nil || pol.Spec.ParamKind != nil {
		t.Error("the policy takes no parameters")
	}
	if fp := pol.Spec.FailurePolicy; fp == nil || *fp != admissionregistrationv1.Fail {
		t.Error("failurePolicy must be Fail: an expression that cannot be evaluated must not let a patch through")
	}

	// Every write the ClusterRole allows is one the policy sees.
	mc := pol.Spec.MatchConstraints
	if mc == nil {
		t.Fatal("no matchConstraints")
	}
	for _, r := range role.Rules {
		for _, v := range r.Verbs {
			op, ok := writeOperations[v]
			if !ok {
				continue
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					if !slices.ContainsFunc(mc.ResourceRules, func(rr admissionregistrationv1.NamedRuleWithOperations) bool {
						return slices.Contains(rr.APIGroups, g) && slices.Contains(rr.Resources, res) &&
							(slices.Contains(rr.Operations, op) || slices.Contains(rr.Operations, admissionregistrationv1.OperationAll))
					}) {
						t.Errorf("the ClusterRole grants %s on %q %s; the policy does not match its %s", v, g, res, op)
					}
				}
			}
		}
	}

	// It applies to the agent's service account, by name.
	username := "'system:serviceaccount:" + sa.Namespace + ":" + sa.Name + "'"
	if !slices.ContainsFunc(pol.Spec.MatchConditions, func(c admissionregistrationv1.MatchCondition) bool {
		return strings.Contains(c.Expression, "request.userInfo.username == "+username)
	}) {
		t.Errorf("no match condition selects request.userInfo.username == %s", username)
	}

	// It ties the Node to the node the token is bound to, and keeps the
	// changes to the agent's own annotations.
	var all strings.Builder
	for _, v := range pol.Spec.Validations {
		all.WriteString(v.Expression + "\n")
	}
	for _, want := range []string{
		"request.userInfo.extra['" + nodeNameExtra + "']",
		"== object.metadata.name",
		"object.spec == oldObject.spec",
		"object.metadata.labels == oldObject.metadata.labels",
		"k.startsWith('nodeplane.io/')",
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("no validation contains %s", want)
		}
	}
	for _, a := range []string{kubernetes.AnnotationVTEPMAC, kubernetes.AnnotationVTEPMACV6, kubernetes.AnnotationWireGuardKey,
		kubernetes.AnnotationWireGuardKeyV6} {
		if !strings.HasPrefix(a, "nodeplane.io/") {
			t.Errorf("the agent publishes %s, which the policy does not let it change", a)
		}
	}

	// Every expression is CEL (see cel_test.go for how far that is
	// checked).
	exprs := map[string]string{}
	for _, c := range pol.Spec.MatchConditions {
		exprs["matchCondition "+c.Name] = c.Expression
	}
	for i, v := range pol.Spec.Validations {
		exprs["validation "+strconv.Itoa(i)] = v.Expression
		if v.MessageExpression != "" {
			exprs["messageExpression "+strconv.Itoa(i)] = v.MessageExpression
		}
	}
	for _, v := range pol.Spec.Variables {
		exprs["variable "+v.Name] = v.Expression
	}
	for _, a := range pol.Spec.AuditAnnotations {
		exprs["auditAnnotation "+a.Key] = a.ValueExpression
	}
	for what, e := range exprs {
		if err := celCheck(e); err != nil {
			t.Errorf("%s: %v\n%s", what, err, e)
		}
	}
}

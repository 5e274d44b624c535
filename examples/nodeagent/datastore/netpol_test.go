package datastore_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

const policyDoc = `
nodes: [{name: a}]
namespaces:
- name: "y"  # quoted: a bare y is a boolean in YAML 1.1
  labels: {team: blue}
- name: x
pods:
- {namespace: x, name: web, node: a, ips: [10.244.1.2], labels: {app: web}, ports: [{name: http, port: 8080}]}
networkPolicies:
- namespace: x
  name: allow-y
  podSelector: {matchLabels: {app: web}}
  ingress:
  - peers:
    - namespaceSelector: {matchExpressions: [{key: team, operator: In, values: [blue]}]}
      podSelector: {}
    - ipBlock: {cidr: 192.0.2.0/24, except: [192.0.2.128/25]}
    ports:
    - {port: http}
    - {protocol: UDP, port: "5000", endPort: 5010}
- namespace: x
  name: deny-egress
  podSelector: {}
  policyTypes: [Egress]
`

func TestParseNetworkPolicies(t *testing.T) {
	c, err := datastore.Parse([]byte(policyDoc))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Namespaces) != 2 || c.Namespaces[0].Name != "x" {
		t.Fatalf("namespaces not parsed or not sorted: %+v", c.Namespaces)
	}
	for _, n := range c.Namespaces {
		if n.Labels[datastore.NamespaceNameLabel] != n.Name {
			t.Errorf("namespace %s lacks its name label: %v", n.Name, n.Labels)
		}
	}
	if c.Namespaces[1].Labels["team"] != "blue" {
		t.Errorf("namespace y lost its labels: %v", c.Namespaces[1].Labels)
	}
	if p := c.Pods[0]; p.Labels["app"] != "web" || len(p.Ports) != 1 || p.Ports[0] != (datastore.ContainerPort{Name: "http", Port: 8080}) {
		t.Errorf("pod = %+v", p)
	}
	if len(c.NetworkPolicies) != 2 || c.NetworkPolicies[0].Key() != "x/allow-y" {
		t.Fatalf("policies not parsed or not sorted: %+v", c.NetworkPolicies)
	}
	allow := c.NetworkPolicies[0]
	if in, out := allow.Types(); !in || out {
		t.Errorf("allow-y types = %v, %v; want ingress only (Kubernetes' default without egress rules)", in, out)
	}
	if in, out := c.NetworkPolicies[1].Types(); in || !out {
		t.Errorf("deny-egress types = %v, %v; want egress only", in, out)
	}
	peers := allow.Ingress[0].Peers
	if peers[0].PodSelector == nil || peers[0].NamespaceSelector.MatchExpressions[0].Values[0] != "blue" {
		t.Errorf("peer 0 = %+v", peers[0])
	}
	if b := peers[1].IPBlock; b == nil || b.CIDR != netip.MustParsePrefix("192.0.2.0/24") || b.Except[0] != netip.MustParsePrefix("192.0.2.128/25") {
		t.Errorf("peer 1 = %+v", peers[1])
	}
	ports := allow.Ingress[0].Ports
	if _, numeric := ports[0].Number(); numeric || ports[0].Port != "http" {
		t.Errorf("named port = %+v", ports[0])
	}
	if n, numeric := ports[1].Number(); !numeric || n != 5000 || ports[1].EndPort != 5010 || ports[1].Protocol != "UDP" {
		t.Errorf("port range = %+v", ports[1])
	}
}

func TestParseRejectsBadNetworkPolicies(t *testing.T) {
	base := "nodes: [{name: a}]\n"
	for name, doc := range map[string]string{
		"no namespace":          "networkPolicies: [{name: p, podSelector: {}}]",
		"bad policy type":       "networkPolicies: [{namespace: x, name: p, podSelector: {}, policyTypes: [Both]}]",
		"unknown operator":      "networkPolicies: [{namespace: x, name: p, podSelector: {matchExpressions: [{key: a, operator: Has}]}}]",
		"In without values":     "networkPolicies: [{namespace: x, name: p, podSelector: {matchExpressions: [{key: a, operator: In}]}}]",
		"Exists with values":    "networkPolicies: [{namespace: x, name: p, podSelector: {matchExpressions: [{key: a, operator: Exists, values: [b]}]}}]",
		"empty peer":            "networkPolicies: [{namespace: x, name: p, podSelector: {}, ingress: [{peers: [{}]}]}]",
		"ipBlock and selector":  "networkPolicies: [{namespace: x, name: p, podSelector: {}, ingress: [{peers: [{podSelector: {}, ipBlock: {cidr: 10.0.0.0/8}}]}]}]",
		"ipBlock host bits":     "networkPolicies: [{namespace: x, name: p, podSelector: {}, ingress: [{peers: [{ipBlock: {cidr: 10.0.0.1/8}}]}]}]",
		"except outside":        "networkPolicies: [{namespace: x, name: p, podSelector: {}, ingress: [{peers: [{ipBlock: {cidr: 10.0.0.0/16, except: [10.1.0.0/24]}}]}]}]",
		"except wider":          "networkPolicies: [{namespace: x, name: p, podSelector: {}, ingress: [{peers: [{ipBlock: {cidr: 10.0.0.0/16, except: [10.0.0.0/8]}}]}]}]",
		"bad protocol":          "networkPolicies: [{namespace: x, name: p, podSelector: {}, ingress: [{ports: [{protocol: ICMP}]}]}]",
		"endPort with name":     "networkPolicies: [{namespace: x, name: p, podSelector: {}, ingress: [{ports: [{port: http, endPort: 90}]}]}]",
		"endPort below port":    "networkPolicies: [{namespace: x, name: p, podSelector: {}, ingress: [{ports: [{port: '90', endPort: 80}]}]}]",
		"bad port name":         "networkPolicies: [{namespace: x, name: p, podSelector: {}, ingress: [{ports: [{port: Http_1}]}]}]",
		"duplicate policy":      "networkPolicies: [{namespace: x, name: p, podSelector: {}}, {namespace: x, name: p, podSelector: {}}]",
		"duplicate namespace":   "namespaces: [{name: x}, {name: x}]",
		"admin action":          "adminNetworkPolicies: [{name: a, subject: {}, ingress: [{action: Drop}]}]",
		"admin no name":         "adminNetworkPolicies: [{subject: {}}]",
		"baseline pass":         "baselineAdminNetworkPolicy: {name: b, subject: {}, ingress: [{action: Pass}]}",
		"admin bad selector":    "adminNetworkPolicies: [{name: a, subject: {podSelector: {matchExpressions: [{key: k, operator: In}]}}}]",
		"bad container port":    "pods: [{name: p, node: a, ips: [10.0.0.1], ports: [{name: http, port: 0}]}]",
		"container port proto":  "pods: [{name: p, node: a, ips: [10.0.0.1], ports: [{protocol: ICMP, port: 1}]}]",
		"container port naming": "pods: [{name: p, node: a, ips: [10.0.0.1], ports: [{name: -x, port: 1}]}]",
	} {
		if _, err := datastore.Parse([]byte(base + doc)); !errors.Is(err, datastore.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

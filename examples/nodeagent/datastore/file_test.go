package datastore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/wireguard"
)

const sample = `
nodes:
- name: node2
  underlayIPv4: 198.18.0.2
  podCIDRs: [10.244.2.0/24]
- name: node1
  underlayIPv4: 198.18.0.1
  podCIDRs: [10.244.1.0/24, "fd00:10:244:1::/64"]
  vtepMAC: "02:4e:00:00:00:01"
pods:
- {namespace: demo, name: web, node: node1, ips: [10.244.1.10]}
- namespace: demo
  name: db
  node: node1
  ips: [10.244.1.11]
  mac: "02:00:00:00:00:11"
  floatingIPs: [{floating: 203.0.113.11, internal: 10.244.1.11}]
pools:
- {name: default, cidr: 10.244.0.0/16, masquerade: true}
services:
- name: echo
  namespace: demo
  clusterIPs: [10.96.0.10]
  ports: [{port: 80, targetPort: 8080}]
  endpoints: [{ip: 10.244.1.10, node: node1}]
serviceCIDRs: [10.96.0.0/12, "fd00:96::/112"]
`

func TestParse(t *testing.T) {
	c, err := datastore.Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) != 2 || c.Nodes[0].Name != "node1" {
		t.Fatalf("nodes not parsed or not sorted: %+v", c.Nodes)
	}
	n := c.Nodes[0]
	if n.UnderlayIPv4 != netip.MustParseAddr("198.18.0.1") || len(n.PodCIDRs) != 2 || n.VTEPMAC.String() != "02:4e:00:00:00:01" {
		t.Errorf("node1 = %+v", n)
	}
	if p := c.Pods[1]; p.Key() != "demo/web" || p.HostInterface() != datastore.PodInterface("demo", "web") {
		t.Errorf("pod = %+v", p)
	}
	if p := c.Pods[0]; p.Key() != "demo/db" || p.MAC.String() != "02:00:00:00:00:11" ||
		len(p.FloatingIPs) != 1 || p.FloatingIPs[0] != (datastore.FloatingIP{Floating: netip.MustParseAddr("203.0.113.11"), Internal: p.IPs[0]}) {
		t.Errorf("pod = %+v", p)
	}
	if len(c.ServiceCIDRs) != 2 || c.ServiceCIDRs[1] != netip.MustParsePrefix("fd00:96::/112") {
		t.Errorf("service CIDRs = %v", c.ServiceCIDRs)
	}
	if len(c.Services) != 1 || c.Services[0].Ports[0].TargetPort != 8080 || !c.Pools[0].Masquerade {
		t.Errorf("services/pools = %+v %+v", c.Services, c.Pools)
	}
	// It round-trips.
	b, err := datastore.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	again, err := datastore.Parse(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if len(again.Nodes) != 2 || again.Nodes[0].VTEPMAC.String() != n.VTEPMAC.String() {
		t.Errorf("round trip: %+v", again.Nodes)
	}
}

func TestParseRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"host bits":                      "nodes: [{name: a, podCIDRs: [10.244.1.1/24]}]",
		"unknown field":                  "nodes: [{name: a, podCIDR: 10.244.1.0/24}]",
		"duplicate":                      "nodes: [{name: a}, {name: a}]",
		"no name":                        "nodes: [{underlayIPv4: 1.2.3.4}]",
		"bad mac":                        "nodes: [{name: a, vtepMAC: '01:00:5e:00:00:01'}]",
		"bad key":                        "nodes: [{name: a, wireguardPublicKey: nope}]",
		"bad IPv6 key":                   "nodes: [{name: a, wireguardPublicKeyV6: nope}]",
		"pod no ips":                     "nodes: [{name: a}]\npods: [{name: p, node: a}]",
		"v6 as v4":                       "nodes: [{name: a, underlayIPv4: 'fd00::1'}]",
		"floating IP of another address": "nodes: [{name: a}]\npods: [{name: p, node: a, ips: [10.0.0.1], floatingIPs: [{floating: 192.0.2.1, internal: 10.0.0.2}]}]",
		"floating IP of another family":  "nodes: [{name: a}]\npods: [{name: p, node: a, ips: [10.0.0.1], floatingIPs: [{floating: '2001:db8::1', internal: 10.0.0.1}]}]",
		"floating IP without floating":   "nodes: [{name: a}]\npods: [{name: p, node: a, ips: [10.0.0.1], floatingIPs: [{internal: 10.0.0.1}]}]",
		"service CIDR host bits":         "nodes: [{name: a}]\nserviceCIDRs: [10.96.0.1/12]",
	} {
		if _, err := datastore.Parse([]byte(doc)); !errors.Is(err, datastore.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

func TestNames(t *testing.T) {
	a := datastore.PodInterface("default", "a-very-long-pod-name-indeed-0123456789")
	if len(a) > 15 || !strings.HasPrefix(a, datastore.PodInterfacePrefix) || a != datastore.PodInterface("default", "a-very-long-pod-name-indeed-0123456789") {
		t.Errorf("PodInterface = %q", a)
	}
	m := datastore.DefaultVTEPMAC("node1", 4)
	if len(m) != 6 || m[0]&1 != 0 || m[0]&2 == 0 || m.String() == datastore.DefaultVTEPMAC("node2", 4).String() {
		t.Errorf("DefaultVTEPMAC = %v", m)
	}
	if got := datastore.TunnelAddr(netip.MustParsePrefix("10.244.3.0/24")); got != netip.MustParseAddr("10.244.3.0") {
		t.Errorf("TunnelAddr = %v", got)
	}
}

// TestFileWatch: the first update is the file's content, an atomic
// replacement is delivered, a bad edit is ignored and the last good state
// kept, and Watch returns nil when its context ends.
func TestFileWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(path, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &datastore.File{Path: path, PollInterval: 200 * time.Millisecond}
	updates := make(chan datastore.Cluster, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Watch(ctx, func(c datastore.Cluster) { updates <- c }) }()
	next := func() datastore.Cluster {
		t.Helper()
		select {
		case c := <-updates:
			return c
		case err := <-done:
			t.Fatalf("Watch returned %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("no update")
		}
		return datastore.Cluster{}
	}
	if c := next(); len(c.Nodes) != 2 {
		t.Fatalf("first update: %+v", c)
	}
	// A bad edit: no update; then a good one.
	if err := os.WriteFile(path, []byte("nodes: [{name: a, podCIDRs: [bad]}]"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _ := datastore.Parse([]byte(sample))
	c.Nodes = c.Nodes[:1]
	if err := datastore.WriteFile(path, c); err != nil {
		t.Fatal(err)
	}
	if got := next(); len(got.Nodes) != 1 || got.Nodes[0].Name != "node1" {
		t.Fatalf("after the edit: %+v", got.Nodes)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Watch: %v", err)
	}
}

func TestFileWatchMissingFile(t *testing.T) {
	f := &datastore.File{Path: filepath.Join(t.TempDir(), "none.yaml")}
	if err := f.Watch(context.Background(), func(datastore.Cluster) { t.Error("update without a file") }); err == nil {
		t.Fatal("Watch of a missing file succeeded")
	}
}

// TestParseServiceTraffic: a service's traffic settings and its endpoints'
// conditions and zone hints are read from the file and round-trip.
// A service port's name is a DNS label, as Kubernetes admits it: longer
// than a container port's name may be, or all digits.
func TestParseServicePortNames(t *testing.T) {
	doc := "services:\n- {name: s, clusterIPs: [10.96.0.1], ports: [{name: metrics-and-health, port: 80}, {name: \"8080\", port: 8080}, {name: web, port: 81, protocol: UDP}]}\n"
	c, err := datastore.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range c.Services[0].Ports {
		names = append(names, p.Name)
	}
	if want := []string{"metrics-and-health", "8080", "web"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("port names %q, want %q", names, want)
	}
}

func TestParseServiceTraffic(t *testing.T) {
	doc := `
nodes: [{name: node1, zone: zone-a}]
services:
- namespace: demo
  name: lb
  type: LoadBalancer
  clusterIPs: [10.96.0.10]
  loadBalancerIPs: [192.0.2.10]
  externalTrafficPolicy: Local
  internalTrafficPolicy: Local
  healthCheckNodePort: 32000
  sessionAffinity: ClientIP
  sessionAffinityTimeoutSeconds: 600
  loadBalancerSourceRanges: [192.0.2.0/24]
  trafficDistribution: PreferClose
  ports: [{port: 80, nodePort: 30080}]
  endpoints:
  - {ip: 10.244.1.10, node: node1, forZones: [zone-a, zone-b]}
  - {ip: 10.244.1.11, node: node1, notReady: true, terminating: true, serving: true}
  - {ip: 10.244.1.12, node: node1, ports: [{port: 8081}]}
`
	c, err := datastore.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := datastore.Service{Namespace: "demo", Name: "lb", Type: "LoadBalancer",
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("192.0.2.10")},
		ExternalTrafficPolicy: "Local", InternalTrafficPolicy: "Local", HealthCheckNodePort: 32000,
		SessionAffinity: "ClientIP", SessionAffinityTimeoutSeconds: 600,
		LoadBalancerSourceRanges: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
		TrafficDistribution:      datastore.TrafficDistributionPreferClose,
		Ports:                    []datastore.ServicePort{{Port: 80, NodePort: 30080}},
		Endpoints: []datastore.Endpoint{
			{IP: netip.MustParseAddr("10.244.1.10"), Node: "node1", ForZones: []string{"zone-a", "zone-b"}},
			{IP: netip.MustParseAddr("10.244.1.11"), Node: "node1", NotReady: true, Terminating: true, Serving: true},
			{IP: netip.MustParseAddr("10.244.1.12"), Node: "node1", Ports: []datastore.EndpointPort{{Port: 8081}}},
		}}
	if len(c.Services) != 1 || !reflect.DeepEqual(c.Services[0], want) || c.Nodes[0].Zone != "zone-a" {
		t.Fatalf("services = %+v, nodes = %+v", c.Services, c.Nodes)
	}
	if e := c.Services[0].Endpoints; !e[0].Ready() || e[0].ServingTerminating() || e[1].Ready() || !e[1].ServingTerminating() {
		t.Errorf("conditions: %+v", e)
	}
	// The backends' ports: the service port's, or the endpoint's own.
	port := c.Services[0].Ports[0]
	if p, ok := c.Services[0].Endpoints[0].Port(port); !ok || p != 80 {
		t.Errorf("the port of an endpoint without ports: %d, %v; want the service port's target (80)", p, ok)
	}
	if p, ok := c.Services[0].Endpoints[2].Port(port); !ok || p != 8081 {
		t.Errorf("the port of an endpoint with its own: %d, %v; want 8081", p, ok)
	}
	if _, ok := c.Services[0].Endpoints[2].Port(datastore.ServicePort{Name: "other", Port: 81}); ok {
		t.Error("an endpoint with ports serves a service port it does not name")
	}
	b, err := datastore.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	again, err := datastore.Parse(b)
	if err != nil || !reflect.DeepEqual(again, c) {
		t.Errorf("round trip: %v\n%s", err, b)
	}
}

// TestParseRejectsServiceTraffic: settings Kubernetes would refuse, and
// endpoints that do not hold together, are errors that name the service.
func TestParseRejectsServiceTraffic(t *testing.T) {
	const head = "nodes: [{name: a}]\nservices:\n"
	for _, tc := range []struct{ name, services, want string }{
		{"internal policy", `- {name: s, internalTrafficPolicy: Node}`, `internalTrafficPolicy "Node" is neither Cluster nor Local`},
		{"external policy", `- {name: s, externalTrafficPolicy: local}`, `externalTrafficPolicy "local" is neither Cluster nor Local`},
		{"health check port without Local", `- {name: s, type: LoadBalancer, healthCheckNodePort: 32000}`,
			"healthCheckNodePort 32000 needs type LoadBalancer and externalTrafficPolicy Local"},
		{"health check port of a NodePort", `- {name: s, type: NodePort, externalTrafficPolicy: Local, healthCheckNodePort: 32000}`,
			"healthCheckNodePort 32000 needs type LoadBalancer"},
		{"health check port twice", "- {namespace: x, name: s, type: LoadBalancer, externalTrafficPolicy: Local, healthCheckNodePort: 32000}\n" +
			"- {namespace: w, name: s, type: LoadBalancer, externalTrafficPolicy: Local, healthCheckNodePort: 32000}",
			`service "w/s": healthCheckNodePort 32000 is service "x/s"'s already`},
		{"affinity", `- {name: s, sessionAffinity: Cookie}`, `sessionAffinity "Cookie" is neither None nor ClientIP`},
		{"timeout without ClientIP", `- {name: s, sessionAffinityTimeoutSeconds: 10}`, "sessionAffinityTimeoutSeconds needs sessionAffinity ClientIP"},
		{"timeout too long", `- {name: s, sessionAffinity: ClientIP, sessionAffinityTimeoutSeconds: 86401}`, "sessionAffinityTimeoutSeconds 86401 is over 86400"},
		{"source ranges of a NodePort", `- {name: s, type: NodePort, loadBalancerSourceRanges: [10.0.0.0/8]}`, "loadBalancerSourceRanges need type LoadBalancer"},
		{"source range host bits", `- {name: s, type: LoadBalancer, loadBalancerSourceRanges: [10.0.0.1/8]}`,
			"load balancer source range 10.0.0.1/8 is not a network (10.0.0.0/8?)"},
		{"load balancer IP", `- {name: s, type: LoadBalancer, loadBalancerIPs: [0.0.0.0]}`, "load balancer IP 0.0.0.0 is not an address"},
		{"traffic distribution", `- {name: s, trafficDistribution: PreferSameNode}`, `trafficDistribution "PreferSameNode" is none of`},
		{"endpoint without address", `- {name: s, endpoints: [{node: a}]}`, "endpoint 0: IP invalid IP is not an address"},
		{"endpoint twice", `- {name: s, endpoints: [{ip: 10.0.0.1}, {ip: 10.0.0.1, node: a}]}`, "endpoint 10.0.0.1 is listed twice"},
		{"endpoint twice at the same ports", `- {name: s, ports: [{name: a, port: 80}, {name: b, port: 81}], endpoints: [` +
			`{ip: 10.0.0.1, ports: [{name: a, port: 1}, {name: b, port: 2}]}, {ip: 10.0.0.1, ports: [{name: b, port: 2}, {name: a, port: 1}]}]}`,
			"endpoint 10.0.0.1 is listed twice"},
		{"serving, not terminating", `- {name: s, endpoints: [{ip: 10.0.0.1, notReady: true, serving: true}]}`,
			"endpoint 10.0.0.1: serving is for a terminating endpoint"},
		{"empty zone", `- {name: s, endpoints: [{ip: 10.0.0.1, forZones: [""]}]}`, `endpoint 10.0.0.1: zone "" is empty or repeated`},
		{"zone twice", `- {name: s, endpoints: [{ip: 10.0.0.1, forZones: [a, b, a]}]}`, `endpoint 10.0.0.1: zone "a" is empty or repeated`},
		{"endpoint port of no service port", `- {name: s, ports: [{name: http, port: 80}], endpoints: [{ip: 10.0.0.1, ports: [{name: web, port: 8080}]}]}`,
			`endpoint 10.0.0.1: port "web" names no port of the service`},
		{"endpoint port 0", `- {name: s, ports: [{name: http, port: 80}], endpoints: [{ip: 10.0.0.1, ports: [{name: http}]}]}`,
			`endpoint 10.0.0.1: port "http" is 0`},
		{"endpoint port twice", `- {name: s, ports: [{name: http, port: 80}], endpoints: [{ip: 10.0.0.1, ports: [{name: http, port: 1}, {name: http, port: 2}]}]}`,
			`endpoint 10.0.0.1: port "http" is listed twice`},
		{"service twice", "- {namespace: x, name: s, clusterIPs: [10.96.0.1], ports: [{port: 80}]}\n- {namespace: x, name: s, clusterIPs: [10.96.0.2], ports: [{port: 80}]}",
			`service "x/s" is listed twice`},
		{"port twice", `- {name: s, ports: [{name: a, port: 80}, {name: b, port: 80, protocol: TCP}]}`, "port 80/TCP is listed twice"},
		{"two unnamed ports", `- {name: s, ports: [{port: 80}, {port: 80, protocol: UDP}]}`,
			"port 1 (80/UDP): another port has no name either"},
		{"port name twice", `- {name: s, ports: [{name: dns, port: 53}, {name: dns, port: 53, protocol: UDP}]}`, `port name "dns" is used twice`},
		{"port 0", `- {name: s, ports: [{name: a}]}`, "port 0: the port is 0"},
		{"protocol", `- {name: s, ports: [{port: 80, protocol: tcp}]}`, `port 0: protocol "tcp" is none of TCP, UDP and SCTP`},
		{"port name", `- {name: s, ports: [{name: "-x", port: 80}]}`, `port 0: "-x" is not a port name`},
		{"unnamed port and a port named its number", `- {name: s, ports: [{port: 80}, {name: "80", port: 81}]}`,
			`port 0 (80, no name): another port is named "80"`},
		{"port name case", `- {name: s, ports: [{name: Web, port: 80}]}`, `port 0: "Web" is not a port name`},
	} {
		_, err := datastore.Parse([]byte(head + tc.services))
		if !errors.Is(err, datastore.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrInvalid saying %q", tc.name, err, tc.want)
		}
	}
}

// TestFileWireGuardKeys: a node's WireGuard keys, one per family, parse and
// round-trip; Publish logs each key the file does not hold, and only those.
func TestFileWireGuardKeys(t *testing.T) {
	var keys [2]wireguard.PublicKey
	for i := range keys {
		k, err := wireguard.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k.Public()
	}
	doc := "nodes:\n- {name: node1, underlayIPv6: 'fd00::1', wireguardPublicKey: " + keys[0].String() + ", wireguardPublicKeyV6: " + keys[1].String() + "}\n"
	c, err := datastore.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Nodes[0]; n.WireGuardPublicKey != keys[0].String() || n.WireGuardPublicKeyV6 != keys[1].String() {
		t.Fatalf("node1 = %+v", n)
	}
	b, err := datastore.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := datastore.Parse(b); err != nil || !reflect.DeepEqual(again, c) {
		t.Fatalf("round trip: %+v, %v\n%s", again, err, b)
	}

	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte("nodes:\n- {name: node1, wireguardPublicKey: "+keys[0].String()+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	f := &datastore.File{Path: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	if err := f.Publish(context.Background(), datastore.NodeInfo{Name: "node1", WireGuardKey: keys[0], WireGuardKeyV6: keys[1]}); err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); !strings.Contains(out, "wireguardPublicKeyV6") || !strings.Contains(out, keys[1].String()) || strings.Contains(out, keys[0].String()) {
		t.Errorf("Publish logged:\n%s\nwant the IPv6 key only (the file has the IPv4 one)", out)
	}
}

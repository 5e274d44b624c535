//go:build linux

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/internal/testkit/bpftest"
)

// TestKernelHealthCheck runs the agent with --bpf-proxy in a fresh
// namespace and asks, from inside it, the health check node port of a
// LoadBalancer service with externalTrafficPolicy Local on the node's
// underlay address: 200 with the local endpoint, 503 once it is not ready,
// nothing once the service has no health check port.
func TestKernelHealthCheck(t *testing.T) {
	ns := newNode(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.yaml")
	const port = 32000
	svc := datastore.Service{Namespace: "demo", Name: "lb", Type: "LoadBalancer", ExternalTrafficPolicy: "Local",
		HealthCheckNodePort: port, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Ports:     []datastore.ServicePort{{Port: 80, NodePort: 30080, TargetPort: 8080}},
		Endpoints: []datastore.Endpoint{{IP: netip.MustParseAddr("10.244.1.10"), Node: "node1"}}}
	write := func(s datastore.Service) {
		t.Helper()
		c := datastore.Cluster{
			Nodes: []datastore.Node{{Name: "node1", UnderlayIPv4: netip.MustParseAddr("198.18.0.1"),
				PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}}},
			Services: []datastore.Service{s},
		}
		c.Normalize()
		if err := datastore.WriteFile(file, c); err != nil {
			t.Fatal(err)
		}
	}
	write(svc)
	cfg := Config{NodeName: "node1", NetNS: ns.Path(), Listen: "-", StateDir: dir, Overlay: OverlayDirect,
		WireGuardInterface: fmt.Sprintf("wgh%d", os.Getpid()%100000), BPFProxy: true, BPFPinDir: filepath.Join(bpftest.Dir(t), "node1"),
		HostInterfaces: []string{"eth0"}, Datastore: &datastore.File{Path: file, PollInterval: 50 * time.Millisecond}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	// The client dials from inside the namespace.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			derr := ns.Do(func() error {
				var d net.Dialer
				c, err = d.DialContext(ctx, network, addr)
				return nil
			})
			if derr != nil {
				return nil, derr
			}
			return c, err
		}}}
	// answer is the health check's status and local endpoints, or 0 and
	// -1 when nothing answers.
	answer := func() (int, int) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://198.18.0.1:%d/", port), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, -1
		}
		defer resp.Body.Close()
		var b healthCheckBody
		if err := json.NewDecoder(resp.Body).Decode(&b); err != nil || b.Service.Namespace != "demo" || b.Service.Name != "lb" {
			t.Fatalf("body: %+v, %v", b, err)
		}
		return resp.StatusCode, b.LocalEndpoints
	}
	until := func(what string, code, n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // a safety net, not a measure
		for {
			select {
			case err := <-done:
				done <- err
				t.Fatalf("the agent stopped: %v", err)
			default:
			}
			gotCode, gotN := answer()
			if gotCode == code && gotN == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the health check answers %d with %d local endpoints", what, gotCode, gotN)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	until("a ready local endpoint", http.StatusOK, 1)
	svc.Endpoints[0].NotReady = true
	write(svc)
	until("no ready local endpoint", http.StatusServiceUnavailable, 0)
	svc.HealthCheckNodePort = 0
	write(svc)
	until("no health check port", 0, -1)
}

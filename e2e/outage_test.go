package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	k8sds "github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
)

func (e *env) stepOutage(t *testing.T) {
	e.waitPods(t)
	ctx := context.Background()
	if err := e.dataplaneWorks(); err != nil {
		t.Fatalf("before the outage: %v", err)
	}
	e.cp.api.stop(syscall.SIGKILL, 5*time.Second)
	t.Log("kube-apiserver killed (SIGKILL)")
	outage := time.Now()
	samples := 0
	for time.Since(outage) < 8*time.Second {
		if err := e.dataplaneWorks(); err != nil {
			t.Errorf("during the outage (after %v): %v", time.Since(outage).Round(time.Millisecond), err)
		}
		for _, n := range e.nodes {
			if n.agent.exited() {
				t.Fatalf("agent %s exited during the outage (see %s)", n.name, n.agent.log)
			}
		}
		samples++
		time.Sleep(300 * time.Millisecond)
	}
	// The agents stay ready (their dataplane works) and say that their
	// datastore is disconnected, and since when.
	for _, n := range e.nodes {
		if err := agentReady(n); err != nil {
			t.Errorf("%s during the outage: %v", n.name, err)
		}
		connected, since, err := agentDatastore(n)
		switch {
		case err != nil:
			t.Errorf("%s during the outage: %v", n.name, err)
		case connected:
			t.Errorf("%s during the outage: its status says the datastore is connected", n.name)
		default:
			t.Logf("%s during the outage: /readyz 200, datastore disconnected for %v (the outage began %v ago)", n.name,
				time.Since(since).Round(time.Millisecond), time.Since(outage).Round(time.Millisecond))
		}
		if v, err := agentMetric(n, "nodeplane_agent_datastore_connected"); err != nil || v != "0" {
			t.Errorf("%s during the outage: nodeplane_agent_datastore_connected = %q, %v; want 0", n.name, v, err)
		}
	}
	t.Logf("%d samples over %v of outage: ping across nodes and the service kept working", samples, time.Since(outage).Round(time.Millisecond))
	st := time.Now()
	if err := e.cp.startAPIServer(); err != nil {
		t.Fatal(err)
	}
	e.timing("kube-apiserver restart → /readyz", time.Since(st))
	e.timing("apiserver outage (down time)", time.Since(outage))
	// The agents see changes again: the policy goes (node2 lets pod-1b in),
	// a new service appears (node1's proxy translates it). The agents
	// catch up as soon as they find the server back (they ask it about
	// once a second while it is down), not after client-go's backoff.
	st = time.Now()
	if err := e.cs.NetworkingV1().NetworkPolicies(podNamespace).Delete(ctx, "iso", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	ip := e.createService(t, "echo2", "pod-2a")
	var policyGone, serviceThere time.Duration
	if err := waitFor(30*time.Second, func() error {
		var errs []error
		if policyGone == 0 {
			if _, err := whoami(e.pod("pod-1b").ns, netip.AddrPortFrom(e.pod("pod-2b").ip, backendPort), 300*time.Millisecond); err != nil {
				errs = append(errs, fmt.Errorf("policy deletion not applied by node2: %w", err))
			} else {
				policyGone = time.Since(st)
			}
		}
		if serviceThere == 0 {
			got, err := whoami(e.pod("pod-1b").ns, netip.AddrPortFrom(ip, 80), 300*time.Millisecond)
			if err != nil || got != "pod-2a" {
				errs = append(errs, fmt.Errorf("new service %v not applied by node1: %q, %v", ip, got, err))
			} else {
				serviceThere = time.Since(st)
			}
		}
		return errors.Join(errs...)
	}); err != nil {
		t.Fatal(err)
	}
	e.timing("apiserver back → node2 applied the policy's deletion", policyGone)
	e.timing("apiserver back → node1 applied a new service (catch-up)", serviceThere)
	for _, n := range e.nodes {
		if err := waitFor(30*time.Second, func() error { return agentReady(n) }); err != nil {
			t.Error(err)
		}
		if err := waitFor(30*time.Second, func() error {
			if connected, _, err := agentDatastore(n); err != nil || !connected {
				return fmt.Errorf("%s after the outage: datastore connected %v, %v", n.name, connected, err)
			}
			if v, err := agentMetric(n, "nodeplane_agent_datastore_connected"); err != nil || v != "1" {
				return fmt.Errorf("%s after the outage: nodeplane_agent_datastore_connected = %q, %v", n.name, v, err)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	}
}

// agentDatastore returns what n's agent says of its datastore's link to
// the API server (GET /status).
func agentDatastore(n *node) (connected bool, since time.Time, err error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + n.listen + "/status")
	if err != nil {
		return false, time.Time{}, err
	}
	defer resp.Body.Close()
	var st struct {
		Datastore *struct {
			Connected bool      `json:"connected"`
			Since     time.Time `json:"since"`
		} `json:"datastore"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return false, time.Time{}, fmt.Errorf("%s /status: %w", n.name, err)
	}
	if st.Datastore == nil {
		return false, time.Time{}, fmt.Errorf("%s /status has no datastore link", n.name)
	}
	return st.Datastore.Connected, st.Datastore.Since, nil
}

// agentMetric returns the value of the unlabelled metric name that n's
// agent serves.
func agentMetric(n *node, name string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + n.listen + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s serves no %s", n.name, name)
}

func (e *env) stepReregister(t *testing.T) {
	e.waitPods(t)
	ctx := context.Background()
	n2 := e.node("node2")
	if err := e.cs.CoreV1().Nodes().Delete(ctx, n2.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(10*time.Second, func() error {
		_, err := e.cs.CoreV1().Nodes().Get(ctx, n2.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("node2 still there: %v", err)
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // let the agents see the deletion
	st := time.Now()
	if err := e.registerNode(ctx, n2); err != nil {
		t.Fatal(err)
	}
	var mac string
	if err := waitFor(30*time.Second, func() (err error) { mac, err = e.annotation(n2.name); return err }); err != nil {
		t.Fatal(err)
	}
	e.timing("node2 re-created → annotation back", time.Since(st))
	t.Logf("node2 re-annotated: %s=%s", k8sds.AnnotationVTEPMAC, mac)
	if err := waitFor(30*time.Second, func() error { return ping(e.pod("pod-1a").ns, e.pod("pod-2a").ip) }); err != nil {
		t.Fatalf("after re-registration: %v", err)
	}
	e.timing("node2 re-created → ping across nodes again", time.Since(st))
	if ip6 := e.pod("pod-2a").ip6; ip6.IsValid() {
		if err := waitFor(30*time.Second, func() error { return ping(e.pod("pod-1a").ns, ip6) }); err != nil {
			t.Fatalf("after re-registration, IPv6: %v", err)
		}
		e.timing("node2 re-created → ping across nodes again (IPv6)", time.Since(st))
	}
	// node2's NodePort answers on the addresses of its Node again.
	if _, ok := e.services["echo-np"]; ok {
		targets := []netip.AddrPort{netip.AddrPortFrom(n2.underlay, nodePort), netip.AddrPortFrom(n2.underlay6, nodePort)}
		took, err := firstAnswers(e.ext, targets, st, 30*time.Second)
		if err != nil {
			t.Fatalf("after re-registration: %v", err)
		}
		for _, to := range targets {
			e.timing(fmt.Sprintf("node2 re-created → NodePort answers at %v", to), took[to])
		}
	}
}

func (e *env) stepSigterm(t *testing.T) {
	e.waitPods(t)
	for _, n := range e.nodes {
		took := n.agent.stop(syscall.SIGTERM, 10*time.Second)
		e.timing(n.name+" agent SIGTERM → exit", took)
		if took > 2*time.Second {
			t.Errorf("%s's agent took %v to exit after SIGTERM (want < 2 s)", n.name, took)
		}
		if st := n.agent.cmd.ProcessState; st != nil {
			t.Logf("%s's agent: %v", n.name, st)
		}
	}
	// The dataplane stays: pods still reach each other across nodes.
	if err := e.dataplaneWorks(); err != nil {
		t.Errorf("with both agents stopped: %v", err)
	}
}

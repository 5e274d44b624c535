package kubernetes_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
)

// listKinds are the lists the stand-in serves, by path.
var listKinds = map[string]struct{ apiVersion, kind string }{
	"/api/v1/nodes":      {"v1", "NodeList"},
	"/api/v1/pods":       {"v1", "PodList"},
	"/api/v1/services":   {"v1", "ServiceList"},
	"/api/v1/namespaces": {"v1", "NamespaceList"},
	"/apis/discovery.k8s.io/v1/endpointslices":   {"discovery.k8s.io/v1", "EndpointSliceList"},
	"/apis/networking.k8s.io/v1/networkpolicies": {"networking.k8s.io/v1", "NetworkPolicyList"},
}

// standIn is a stand-in for kube-apiserver over HTTP: it serves the lists
// Watch reads (from items), watches that stay open and send nothing until
// it is killed, and /readyz. It can be killed (its connections closed,
// its port refusing) and started again on the same address.
type standIn struct {
	t    *testing.T
	addr string
	// readyz counts the probes answered.
	readyz atomic.Int32

	mu    sync.Mutex
	items map[string][]any
	srv   *httptest.Server
	// killed is closed when the server is killed: its watches end.
	killed chan struct{}
}

func newStandIn(t *testing.T) *standIn {
	s := &standIn{t: t, items: map[string][]any{}}
	s.start()
	t.Cleanup(s.kill)
	return s
}

// add adds an item to the list at path.
func (s *standIn) add(path string, item any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items[path] = append(s.items[path], item)
}

// start serves on s.addr (a new address the first time).
func (s *standIn) start() {
	addr := s.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		s.t.Fatal(err)
	}
	s.addr = l.Addr().String()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	srv.Listener = l
	s.mu.Lock()
	s.srv, s.killed = srv, make(chan struct{})
	s.mu.Unlock()
	srv.Start()
}

// kill ends every connection at once and stops listening, as a server
// killed with SIGKILL does.
func (s *standIn) kill() {
	s.mu.Lock()
	srv, killed := s.srv, s.killed
	s.srv = nil
	s.mu.Unlock()
	if srv == nil {
		return
	}
	close(killed)
	srv.CloseClientConnections()
	srv.Close()
}

func (s *standIn) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	killed := s.killed
	s.mu.Unlock()
	if r.URL.Path == "/readyz" {
		s.readyz.Add(1)
		_, _ = w.Write([]byte("ok"))
		return
	}
	k, ok := listKinds[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("watch") == "true" {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-killed:
		}
		return
	}
	s.mu.Lock()
	items := append([]any{}, s.items[r.URL.Path]...)
	s.mu.Unlock()
	if items == nil {
		items = []any{}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": k.apiVersion, "kind": k.kind,
		"metadata": map[string]any{"resourceVersion": "1"}, "items": items})
}

// TestWatchRealClientCatchesUpAfterOutage: with client-go's own client, a
// server killed after the first read (watches cut, connections refused)
// is reported, probed on /readyz, and once it is back the cluster it then
// holds is delivered by new informers, not after client-go's backoff.
func TestWatchRealClientCatchesUpAfterOutage(t *testing.T) {
	s := newStandIn(t)
	for _, n := range []*corev1.Node{k8sNode("node1", "198.18.0.1", "10.244.1.0/24", nil), k8sNode("node2", "198.18.0.2", "10.244.2.0/24", nil)} {
		s.add("/api/v1/nodes", n)
	}
	client, err := k8s.NewForConfig(&rest.Config{Host: "http://" + s.addr})
	if err != nil {
		t.Fatal(err)
	}
	log, logs := newLogger()
	d, err := kubernetes.New(kubernetes.Options{Client: client, NodeName: "node1", Logger: log,
		ProbeInterval: 20 * time.Millisecond, Debounce: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, d)
	if c := w.next(t); len(c.Nodes) != 2 || len(c.Services) != 0 {
		t.Fatalf("first update: %+v", c)
	}
	s.kill()
	disconnected(t, d)
	if d.Restarts() != 0 {
		t.Errorf("%d restarts while the server is down", d.Restarts())
	}
	s.add("/api/v1/services", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "late"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}})
	s.start()
	back := time.Now()
	for c := w.next(t); !hasService(c, "default/late"); c = w.next(t) {
	}
	t.Logf("the server back → the new service delivered: %v", time.Since(back).Round(time.Millisecond))
	if n := d.Restarts(); n != 1 {
		t.Errorf("%d restarts, want 1", n)
	}
	if ok, _ := d.Connected(); !ok {
		t.Error("not connected after the outage")
	}
	if s.readyz.Load() == 0 && len(logs.lines("answers again", "informer")) == 0 {
		t.Errorf("neither a probe nor an informer saw the server back:\n%s", logs)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", logs)
	}
}

package agent

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

// reportingDatastore is a datastore that reports its link to a server.
type reportingDatastore struct {
	datastore.Datastore
	mu        sync.Mutex
	connected bool
	since     time.Time
}

func (r *reportingDatastore) Connected() (bool, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.connected, r.since
}

func (r *reportingDatastore) set(connected bool, since time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.connected, r.since = connected, since
}

// testAgent returns an agent whose loop is ready, with ds, and its local
// endpoint.
func testAgent(t *testing.T, ds datastore.Datastore) (*Agent, http.Handler) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.datastore.set(connectionReporter(ds)) // as run does
	a := &Agent{cfg: Config{Datastore: ds, Registry: reg}, metrics: m, health: dataplane.Health{Live: true, Ready: true}}
	return a, a.handler()
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

// TestDatastoreDisconnected: while the datastore has lost its server the
// agent stays ready (the body says why), /status and the table say since
// when, and nodeplane_agent_datastore_connected is 0; a CNI-installing
// wrapper does not hide the report.
func TestDatastoreDisconnected(t *testing.T) {
	since := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ds := &reportingDatastore{connected: true, since: since}
	a, h := testAgent(t, &cniInstaller{Datastore: ds})

	if code, body := get(t, h, "/readyz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("connected: /readyz = %d %q", code, body)
	}
	if _, body := get(t, h, "/metrics"); !strings.Contains(body, "\nnodeplane_agent_datastore_connected 1\n") {
		t.Errorf("connected: metrics lack the gauge at 1:\n%s", body)
	}

	ds.set(false, since)
	code, body := get(t, h, "/readyz")
	if code != http.StatusOK || !strings.Contains(body, "datastore is disconnected (since 2026-12-01T12:00:00Z)") {
		t.Errorf("disconnected: /readyz = %d %q, want 200 saying so", code, body)
	}
	if _, body := get(t, h, "/metrics"); !strings.Contains(body, "\nnodeplane_agent_datastore_connected 0\n") {
		t.Errorf("disconnected: metrics lack the gauge at 0:\n%s", body)
	}
	st := a.datastoreStatus()
	if st == nil || st.Connected || !st.Since.Equal(since) {
		t.Fatalf("datastoreStatus() = %+v", st)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, Status{Node: "node1", StartedAt: since, Datastore: st}, since.Add(12*time.Second)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "DISCONNECTED for 12s (since 2026-12-01T12:00:00Z)") {
		t.Errorf("table lacks the datastore's state:\n%s", b.String())
	}
}

// TestDatastoreWithoutReport: a datastore that does not report its link
// (a file) has no gauge and no status line.
func TestDatastoreWithoutReport(t *testing.T) {
	a, h := testAgent(t, &datastore.File{Path: "/nonexistent"})
	if a.datastoreStatus() != nil {
		t.Error("a status for a file datastore")
	}
	if _, body := get(t, h, "/metrics"); strings.Contains(body, "nodeplane_agent_datastore_connected") {
		t.Errorf("a gauge for a file datastore:\n%s", body)
	}
	var b bytes.Buffer
	now := time.Now()
	if err := WriteTable(&b, Status{Node: "node1", StartedAt: now}, now); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "datastore") {
		t.Errorf("a datastore line without a report:\n%s", b.String())
	}
}

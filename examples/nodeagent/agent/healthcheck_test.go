package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
)

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freePort returns a TCP port free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) uint16 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

// check is one health check's answer.
type check struct {
	code   int
	body   healthCheckBody
	weight string
	kind   string
}

// ask sends a health check to 127.0.0.1:port at path.
func ask(t *testing.T, port uint16, path string) (check, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a safety net, not a measure
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), nil)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return check{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	c := check{code: resp.StatusCode, weight: resp.Header.Get("X-Load-Balancing-Endpoint-Weight"), kind: resp.Header.Get("Content-Type")}
	require.NoError(t, json.Unmarshal(b, &c.body), "body %q", b)
	return c, nil
}

// mustAsk is ask that fails the test when no answer comes.
func mustAsk(t *testing.T, port uint16) check {
	t.Helper()
	c, err := ask(t, port, "/")
	require.NoError(t, err)
	return c
}

// refused reports whether nothing listens on 127.0.0.1:port.
func refused(port uint16) bool {
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err == nil {
		c.Close()
		return false
	}
	return true
}

// waitFor waits until cond holds; it fails the test if it never does.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 3000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

func body(namespace, name string, n int) healthCheckBody {
	var b healthCheckBody
	b.Service.Namespace, b.Service.Name, b.LocalEndpoints = namespace, name, n
	return b
}

func statusOf(h *HealthChecks, service string) HealthCheckStatus {
	for _, s := range h.Status() {
		if s.Service == service {
			return s
		}
	}
	return HealthCheckStatus{}
}

// TestHealthChecks: over real HTTP on loopback, each service's port answers
// 200 with its local endpoints and 503 without; counts change in place; a
// port in use or wanted twice is the error of that service alone, logged
// once and tried again until it is free; a service gone closes its port; a
// change of addresses moves the listeners; the end of Run closes them all.
func TestHealthChecks(t *testing.T) {
	var logs syncBuffer
	var blockedTries atomic.Int32
	web, idle, blocked := freePort(t), freePort(t), freePort(t)
	busy, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", blocked))
	require.NoError(t, err)
	defer busy.Close()
	clk := clock.NewFake(time.Unix(0, 0))
	h := NewHealthChecks(HealthCheckOptions{RetryInterval: time.Second, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Listen: func(ctx context.Context, address string) (net.Listener, error) {
			if strings.HasSuffix(address, fmt.Sprintf(":%d", blocked)) {
				blockedTries.Add(1)
			}
			var lc net.ListenConfig
			return lc.Listen(ctx, "tcp", address)
		}})
	loopback := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	services := []HealthCheckService{
		{Namespace: "demo", Name: "web", Port: web, LocalEndpoints: 2},
		{Namespace: "demo", Name: "idle", Port: idle},
		{Namespace: "demo", Name: "blocked", Port: blocked, LocalEndpoints: 1},
		{Namespace: "demo", Name: "twin", Port: web, LocalEndpoints: 1},
	}
	// Before Run, nothing listens.
	h.Update(loopback, services)
	assert.True(t, refused(web))
	assert.Equal(t, []string{"not running"}, statusOf(h, "demo/web").Errors)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	stop := sync.OnceValue(func() error { cancel(); return <-done })
	defer stop()
	waitFor(t, "web listens", func() bool { return len(statusOf(h, "demo/web").Listening) == 1 })
	assert.Error(t, h.Run(ctx), "a second Run")

	c := mustAsk(t, web)
	assert.Equal(t, check{code: http.StatusOK, body: body("demo", "web", 2), weight: "2", kind: "application/json"}, c)
	c, err = ask(t, web, "/healthz")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, c.code, "any path")
	assert.Equal(t, check{code: http.StatusServiceUnavailable, body: body("demo", "idle", 0), weight: "0", kind: "application/json"}, mustAsk(t, idle))

	// The port in use: that service's error, tried again at each retry,
	// logged once; the port another service has: the second one's error.
	require.NoError(t, clk.BlockUntil(ctx, 1), "the retry ticker")
	for tries := blockedTries.Load(); tries < 3; tries = blockedTries.Load() {
		clk.Advance(time.Second)
		waitFor(t, "a retry", func() bool { return blockedTries.Load() > tries })
	}
	st := statusOf(h, "demo/blocked")
	assert.Empty(t, st.Listening)
	require.Len(t, st.Errors, 1)
	assert.Contains(t, st.Errors[0], fmt.Sprintf("listen on 127.0.0.1:%d", blocked))
	assert.Equal(t, 1, strings.Count(logs.String(), "health check server cannot listen"), logs.String())
	assert.Contains(t, logs.String(), "service=demo/blocked")
	assert.Equal(t, HealthCheckStatus{Service: "demo/twin", Port: web, LocalEndpoints: 1,
		Errors: []string{fmt.Sprintf("health check port %d is service demo/web's already", web)}}, statusOf(h, "demo/twin"))
	assert.Equal(t, HealthCheckStatus{Service: "demo/web", Port: web, LocalEndpoints: 2,
		Listening: []string{fmt.Sprintf("127.0.0.1:%d", web)}}, statusOf(h, "demo/web"))

	// Counts change in place.
	services[0].LocalEndpoints, services[1].LocalEndpoints = 0, 3
	h.Update(loopback, services)
	assert.Equal(t, http.StatusServiceUnavailable, mustAsk(t, web).code)
	assert.Equal(t, check{code: http.StatusOK, body: body("demo", "idle", 3), weight: "3", kind: "application/json"}, mustAsk(t, idle))

	// The port is freed: the next retry takes it.
	require.NoError(t, busy.Close())
	clk.Advance(time.Second)
	waitFor(t, "blocked listens", func() bool { return len(statusOf(h, "demo/blocked").Listening) == 1 })
	assert.Equal(t, body("demo", "blocked", 1), mustAsk(t, blocked).body)
	assert.Contains(t, logs.String(), "health check server listening")

	// A service gone: its port closes before Update returns. No
	// addresses: every address, loopback included.
	h.Update(nil, []HealthCheckService{services[0], services[2]})
	assert.True(t, refused(idle))
	assert.Equal(t, []string{fmt.Sprintf(":%d", web)}, statusOf(h, "demo/web").Listening)
	assert.Equal(t, body("demo", "web", 0), mustAsk(t, web).body)

	// The end of Run closes every port; an Update then opens none.
	require.NoError(t, stop())
	assert.True(t, refused(web))
	assert.True(t, refused(blocked))
	h.Update(loopback, services)
	assert.True(t, refused(web))
}

// doer runs work in place, counting the calls, or fails it with err.
type doer struct {
	calls int
	err   error
}

func (d *doer) Do(fn func() error) error {
	d.calls++
	if d.err != nil {
		return d.err
	}
	return fn()
}

// listenInside opens its listener through the namespace's Do.
func TestListenInside(t *testing.T) {
	d := &doer{}
	l, err := listenInside(d)(context.Background(), "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, l.Close())
	assert.Equal(t, 1, d.calls)

	d.err = errors.New("no thread in the namespace")
	_, err = listenInside(d)(context.Background(), "127.0.0.1:0")
	assert.ErrorIs(t, err, d.err)
}

// The status table shows the zone and each health check server, where it
// listens and where it cannot.
func TestWriteTableHealthChecks(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := Status{Node: "node1", Overlay: "vxlan", StartedAt: now, Services: 2, ServicesNote: "bpf proxy", Zone: "zone-a",
		HealthChecks: []HealthCheckStatus{
			{Service: "demo/web", Port: 32000, LocalEndpoints: 2, Listening: []string{"198.18.0.1:32000"}},
			{Service: "demo/db", Port: 32001, Errors: []string{"listen on 198.18.0.1:32001: address already in use"}},
		}}
	var b bytes.Buffer
	require.NoError(t, WriteTable(&b, s, now))
	for _, want := range []string{
		"zone          zone-a (topology aware routing)",
		"health check  demo/web port 32000, local endpoints 2, on 198.18.0.1:32000",
		"health check  demo/db port 32001, local endpoints 0, not listening: listen on 198.18.0.1:32001: address already in use",
	} {
		assert.Contains(t, b.String(), want)
	}
}

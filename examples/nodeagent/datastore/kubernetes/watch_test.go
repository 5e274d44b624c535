package kubernetes_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8swatch "k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
)

// bound is how long a test waits for what must happen; it fails only
// when that never happens.
const bound = 30 * time.Second

// watchRun is a Watch running in the background.
type watchRun struct {
	cancel   context.CancelFunc
	updates  chan datastore.Cluster
	finished chan struct{}
	err      error
}

// startWatch runs d.Watch until the test ends.
func startWatch(t *testing.T, d *kubernetes.Datastore) *watchRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &watchRun{cancel: cancel, updates: make(chan datastore.Cluster, 100), finished: make(chan struct{})}
	go func() {
		defer close(r.finished)
		r.err = d.Watch(ctx, func(c datastore.Cluster) {
			select {
			case r.updates <- c:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.finished:
		case <-time.After(bound):
			t.Error("Watch did not return after its context ended")
		}
	})
	return r
}

// wait waits for Watch to return and returns its error.
func (r *watchRun) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.finished:
		return r.err
	case <-time.After(bound):
		t.Fatal("Watch did not return")
	}
	return nil
}

// running reports whether Watch has not returned yet.
func (r *watchRun) running() bool {
	select {
	case <-r.finished:
		return false
	default:
		return true
	}
}

// next waits for the next update.
func (r *watchRun) next(t *testing.T) datastore.Cluster {
	t.Helper()
	select {
	case c := <-r.updates:
		return c
	case <-r.finished:
		t.Fatalf("Watch returned: %v", r.err)
	case <-time.After(bound):
		t.Fatal("no update")
	}
	return datastore.Cluster{}
}

// eventually waits until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func forbidden(resource string) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("RBAC: access denied"))
}

// TestWatchForbidden: when listing one of the resources Watch needs is
// forbidden (403), Watch returns an error wrapping ErrForbidden that names
// it, and delivers nothing.
func TestWatchForbidden(t *testing.T) {
	for _, resource := range benchResources {
		t.Run(resource, func(t *testing.T) {
			client := fake.NewClientset(objects(t)...)
			client.PrependReactor("list", resource, func(k8stesting.Action) (bool, k8sruntime.Object, error) {
				return true, nil, forbidden(resource)
			})
			log, logs := newLogger()
			d, err := kubernetes.New(kubernetes.Options{Client: client, NodeName: "node1", Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			w := startWatch(t, d)
			err = w.wait(t)
			if !errors.Is(err, kubernetes.ErrForbidden) || !strings.Contains(err.Error(), "may not list and watch "+resource+" ") {
				t.Errorf("Watch = %v, want ErrForbidden naming %s", err, resource)
			}
			if len(w.updates) != 0 {
				t.Errorf("%d updates", len(w.updates))
			}
			if len(logs.lines("level=ERROR", "resource="+resource)) == 0 {
				t.Errorf("not logged:\n%s", logs)
			}
		})
	}
}

// TestWatchUnreachable: while the server cannot be reached, Watch logs and
// retries; when the cluster is not read within SyncTimeout it returns an
// error wrapping ErrUnreachable with the last error.
func TestWatchUnreachable(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "*", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, errors.New("dial tcp 192.0.2.1:6443: connect: connection refused")
	})
	fc := clock.NewFake(time.Unix(0, 0))
	log, logs := newLogger()
	d, err := kubernetes.New(kubernetes.Options{Client: client, NodeName: "node1", Logger: log, Clock: fc, SyncTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, d)
	eventually(t, "a failure logged", func() bool {
		return len(logs.lines("level=WARN", "listing or watching failed; retrying", "connection refused")) > 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := fc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if !w.running() {
		t.Fatalf("Watch returned before its timeout: %v", w.err)
	}
	fc.Advance(time.Minute)
	err = w.wait(t)
	if !errors.Is(err, kubernetes.ErrUnreachable) || !strings.Contains(err.Error(), "connection refused") ||
		!strings.Contains(err.Error(), "within 1m0s") {
		t.Errorf("Watch = %v, want ErrUnreachable with the last error", err)
	}
}

// TestWatchRealClientServerDown: with client-go's own client against a
// port nobody listens on, the informers' failures reach the error handler
// (they list, then watch: a streaming watch-list would retry inside
// client-go, unseen, and wait out its backoff when stopped), Watch returns
// as soon as it is cancelled, and the timeout's error holds the last
// failure.
func TestWatchRealClientServerDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	client, err := k8s.NewForConfig(&rest.Config{Host: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	for _, stop := range []string{"cancel", "timeout"} {
		t.Run(stop, func(t *testing.T) {
			fc := clock.NewFake(time.Unix(0, 0))
			log, logs := newLogger()
			d, err := kubernetes.New(kubernetes.Options{Client: client, NodeName: "node1", Logger: log, Clock: fc})
			if err != nil {
				t.Fatal(err)
			}
			w := startWatch(t, d)
			eventually(t, "a failed list logged", func() bool {
				return len(logs.lines("level=WARN", "failed to list", "connection refused")) > 0
			})
			if stop == "cancel" {
				w.cancel()
				if err := w.wait(t); !errors.Is(err, context.Canceled) {
					t.Errorf("Watch = %v, want the context's end", err)
				}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			if err := fc.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			fc.Advance(kubernetes.DefaultSyncTimeout)
			if err := w.wait(t); !errors.Is(err, kubernetes.ErrUnreachable) || !strings.Contains(err.Error(), "connection refused") {
				t.Errorf("Watch = %v, want ErrUnreachable with the refused connection", err)
			}
		})
	}
}

// hang makes client's lists block, as a frozen server's do, until the
// test ends (the fake clientset does not pass them a context), and returns
// a channel that receives when one has started.
func hang(t *testing.T, client *fake.Clientset) <-chan struct{} {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	entered := make(chan struct{}, 1)
	client.PrependReactor("list", "*", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return true, nil, errors.New("released")
	})
	return entered
}

// TestWatchHungServer: a server that never answers ends the first read at
// SyncTimeout, with ErrUnreachable; a Watch cancelled meanwhile returns at
// once, without waiting for the requests in flight.
func TestWatchHungServer(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		client := fake.NewClientset(objects(t)...)
		entered := hang(t, client)
		fc := clock.NewFake(time.Unix(0, 0))
		d, err := kubernetes.New(kubernetes.Options{Client: client, NodeName: "node1", Clock: fc})
		if err != nil {
			t.Fatal(err)
		}
		w := startWatch(t, d)
		<-entered
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		if err := fc.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		fc.Advance(kubernetes.DefaultSyncTimeout)
		err = w.wait(t)
		if !errors.Is(err, kubernetes.ErrUnreachable) || !strings.Contains(err.Error(), "nodes") || !strings.Contains(err.Error(), "no answer") {
			t.Errorf("Watch = %v, want ErrUnreachable naming what was not read", err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		client := fake.NewClientset(objects(t)...)
		entered := hang(t, client)
		d, err := kubernetes.New(kubernetes.Options{Client: client, NodeName: "node1"})
		if err != nil {
			t.Fatal(err)
		}
		w := startWatch(t, d)
		<-entered
		w.cancel()
		if err := w.wait(t); !errors.Is(err, context.Canceled) {
			t.Errorf("Watch = %v, want the context's end", err)
		}
	})
}

// TestWatchRetriesUntilRead: failures before the first read are logged
// and retried; the cluster is delivered once the server answers.
func TestWatchRetriesUntilRead(t *testing.T) {
	client := fake.NewClientset(objects(t)...)
	var mu sync.Mutex
	failures := 2
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if failures == 0 {
			return false, nil, nil
		}
		failures--
		return true, nil, apierrors.NewServiceUnavailable("the server is starting")
	})
	log, logs := newLogger()
	d, err := kubernetes.New(kubernetes.Options{Client: client, NodeName: "node1", Logger: log, Debounce: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, d)
	if c := w.next(t); len(c.Nodes) != 2 || len(c.Pods) != 2 {
		t.Errorf("first update: %d nodes, %d pods", len(c.Nodes), len(c.Pods))
	}
	if n := len(logs.lines("level=WARN", "resource=pods", "starting")); n != 2 {
		t.Errorf("%d failures logged, want 2:\n%s", n, logs)
	}
}

// TestWatchErrorsAfterFirstRead: after the first read a failing watch (here
// forbidden, as when the agent's RBAC is taken away) is logged and
// retried; Watch goes on and delivers again once it is allowed back.
func TestWatchErrorsAfterFirstRead(t *testing.T) {
	client := fake.NewClientset(objects(t)...)
	var (
		mu     sync.Mutex
		first  *k8swatch.FakeWatcher
		forbid bool
	)
	client.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, k8swatch.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case first == nil:
			first = k8swatch.NewFake()
			return true, first, nil
		case forbid:
			return true, nil, forbidden("nodes")
		}
		return false, nil, nil
	})
	log, logs := newLogger()
	d, err := kubernetes.New(kubernetes.Options{Client: client, NodeName: "node1", Logger: log, Debounce: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, d)
	if c := w.next(t); len(c.Nodes) != 2 {
		t.Fatalf("first update: %d nodes", len(c.Nodes))
	}
	// The watch ends; watching again is forbidden. (The first update comes
	// once the lists are read: the watch may start a little after it.)
	eventually(t, "the nodes watched", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return first != nil
	})
	mu.Lock()
	forbid = true
	first.Stop()
	mu.Unlock()
	eventually(t, "the forbidden watch logged", func() bool {
		return len(logs.lines("level=WARN", "listing or watching failed; retrying", "resource=nodes", "forbidden")) > 0
	})
	if !w.running() {
		t.Fatalf("Watch returned: %v", w.err)
	}
	// Allowed again: changes flow.
	mu.Lock()
	forbid = false
	mu.Unlock()
	if _, err := client.CoreV1().Nodes().Create(context.Background(), k8sNode("node3", "198.18.0.3", "10.244.3.0/24", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for c := w.next(t); len(c.Nodes) != 3; c = w.next(t) {
	}
}

// TestWatchReturnsOnCancel: a running Watch returns nil as soon as its
// context ends, its informers stopped.
func TestWatchReturnsOnCancel(t *testing.T) {
	d, err := kubernetes.New(kubernetes.Options{Client: fake.NewClientset(objects(t)...), NodeName: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, d)
	w.next(t)
	w.cancel()
	if err := w.wait(t); err != nil {
		t.Errorf("Watch = %v, want nil", err)
	}
}

// TestPublishFailures: a forbidden publish is an error wrapping
// ErrForbidden; one against a server that does not answer gives up after
// PublishTimeout, and one whose context ends returns at once.
func TestPublishFailures(t *testing.T) {
	mac := datastore.DefaultVTEPMAC("node1", 4)
	publish := func(t *testing.T, d *kubernetes.Datastore, ctx context.Context) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- d.Publish(ctx, datastore.NodeInfo{Name: "node1", VTEPMAC: mac}) }()
		select {
		case err := <-done:
			return err
		case <-time.After(bound):
			t.Fatal("Publish did not return")
		}
		return nil
	}
	t.Run("forbidden", func(t *testing.T) {
		client := fake.NewClientset(objects(t)...)
		client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
			return true, nil, forbidden("nodes")
		})
		d, err := kubernetes.New(kubernetes.Options{Client: client, NodeName: "node1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := publish(t, d, context.Background()); !errors.Is(err, kubernetes.ErrForbidden) {
			t.Errorf("Publish = %v, want ErrForbidden", err)
		}
	})
	hung := func(t *testing.T) *fake.Clientset {
		client := fake.NewClientset(objects(t)...)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
			<-release
			return true, nil, errors.New("released")
		})
		return client
	}
	t.Run("timeout", func(t *testing.T) {
		d, err := kubernetes.New(kubernetes.Options{Client: hung(t), NodeName: "node1", PublishTimeout: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := publish(t, d, context.Background()); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "node1") {
			t.Errorf("Publish = %v, want the timeout", err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		d, err := kubernetes.New(kubernetes.Options{Client: hung(t), NodeName: "node1"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := publish(t, d, ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Publish = %v, want the context's end", err)
		}
	})
}

// TestRouteKlog: klog's output, client-go's process-wide logger, goes to
// the logger RouteKlog is given.
func TestRouteKlog(t *testing.T) {
	log, logs := newLogger()
	kubernetes.RouteKlog(log)
	t.Cleanup(func() { kubernetes.RouteKlog(nil) })
	klog.InfoS("from client-go", "resource", "nodes")
	klog.ErrorS(errors.New("boom"), "failed", "resource", "pods")
	klog.Flush()
	if len(logs.lines("level=INFO", "from client-go", "resource=nodes")) != 1 || len(logs.lines("level=ERROR", "failed", "boom")) != 1 {
		t.Errorf("klog's lines not routed:\n%s", logs)
	}
}

// TestNewRefusesNegativeDurations: a negative duration is an error.
func TestNewRefusesNegativeDurations(t *testing.T) {
	for _, o := range []kubernetes.Options{{SyncTimeout: -1}, {PublishTimeout: -1}, {Debounce: -1}} {
		o.Client, o.NodeName = fake.NewClientset(), "node1"
		if _, err := kubernetes.New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}

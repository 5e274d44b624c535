package kubernetes_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8swatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
)

// refused is the error of a request to a server that is not there, as
// client-go's transport returns it.
func refused(path string) error {
	return &url.Error{Op: "Get", URL: "https://192.0.2.1:6443" + path,
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
}

// flakyServer makes a fake clientset behave as an API server that can be
// killed (its watches end, every list, watch and probe is refused) and
// come back.
type flakyServer struct {
	client *fake.Clientset
	down   atomic.Bool
	// backAtProbe brings the server back at the next probe, so that the
	// probe, not a reflector's own retry, sees it first.
	backAtProbe atomic.Bool
	// hangProbes makes the probes block until the test ends, ignoring
	// their context.
	hangProbes atomic.Bool
	release    chan struct{}
	probes     chan struct{}
	probeCount atomic.Int32

	mu       sync.Mutex
	watchers []k8swatch.Interface
}

func newFlakyServer(t *testing.T, objs ...k8sruntime.Object) *flakyServer {
	s := &flakyServer{client: fake.NewClientset(objs...), release: make(chan struct{}), probes: make(chan struct{}, 100)}
	t.Cleanup(func() { close(s.release) })
	s.client.PrependReactor("list", "*", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if s.down.Load() {
			return true, nil, refused("/" + a.GetResource().Resource)
		}
		return false, nil, nil
	})
	s.client.PrependWatchReactor("*", func(a k8stesting.Action) (bool, k8swatch.Interface, error) {
		if s.down.Load() {
			return true, nil, refused("/" + a.GetResource().Resource)
		}
		var opts metav1.ListOptions
		if w, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		w, err := s.client.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		s.mu.Lock()
		s.watchers = append(s.watchers, w)
		s.mu.Unlock()
		return true, w, nil
	})
	s.client.PrependReactor("get", "version", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		s.probeCount.Add(1)
		defer func() { s.probes <- struct{}{} }()
		if s.hangProbes.Load() {
			<-s.release
		}
		if s.backAtProbe.Load() {
			s.down.Store(false)
		}
		if s.down.Load() {
			return true, nil, refused("/version")
		}
		return true, nil, nil
	})
	return s
}

// datastore returns a Datastore of node1 on s's client, with o's other
// options, and the fake clock it runs on.
func (s *flakyServer) datastore(t *testing.T, o kubernetes.Options) (*kubernetes.Datastore, *clock.Fake) {
	t.Helper()
	fc := clock.NewFake(time.Unix(1000, 0))
	o.Client, o.NodeName, o.Clock = s.client, "node1", fc
	d, err := kubernetes.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return d, fc
}

// addLate creates the service default/late, which the informers of
// before an outage cannot see.
func (s *flakyServer) addLate(t *testing.T) {
	t.Helper()
	late := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "late"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	if _, err := s.client.CoreV1().Services("default").Create(context.Background(), late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// backAtNextProbe brings the server back at the next probe, which it then
// lets happen (fc advanced by the probe interval) and waits for.
func (s *flakyServer) backAtNextProbe(t *testing.T, fc *clock.Fake, interval time.Duration) {
	t.Helper()
	s.backAtProbe.Store(true)
	armed(t, fc, interval)
	fc.Advance(interval)
	s.probed(t)
}

// kill stops the server: its watches end, what follows is refused.
func (s *flakyServer) kill() {
	s.down.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.watchers {
		w.Stop()
	}
	s.watchers = nil
}

// probed waits for the next probe.
func (s *flakyServer) probed(t *testing.T) {
	t.Helper()
	select {
	case <-s.probes:
	case <-time.After(bound):
		t.Fatal("no probe")
	}
}

// armed waits until a timer of fc is due within d: the prober's, when the
// debounce is long.
func armed(t *testing.T, fc *clock.Fake, d time.Duration) {
	t.Helper()
	eventually(t, "a timer due within "+d.String(), func() bool {
		next, ok := fc.NextDeadline()
		return ok && !next.After(fc.Now().Add(d))
	})
}

// disconnected waits until d reports the server lost, and returns since
// when.
func disconnected(t *testing.T, d *kubernetes.Datastore) time.Time {
	t.Helper()
	var since time.Time
	eventually(t, "the datastore disconnected", func() bool {
		var ok bool
		ok, since = d.Connected()
		return !ok
	})
	return since
}

// advanceUntil advances fc by step, while nothing comes, until w delivers
// a cluster for which ok holds.
func advanceUntil(t *testing.T, w *watchRun, fc *clock.Fake, step time.Duration, ok func(datastore.Cluster) bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		select {
		case c := <-w.updates:
			if ok(c) {
				return
			}
		case <-time.After(5 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("never delivered")
			}
			fc.Advance(step)
		}
	}
}

func hasService(c datastore.Cluster, key string) bool {
	for _, s := range c.Services {
		if s.Key() == key {
			return true
		}
	}
	return false
}

// TestWatchCatchesUpAfterOutage: when the server goes away after the first
// read, the datastore reports it disconnected and probes it once per
// ProbeInterval (no more); when a probe finds it back, new informers read
// the cluster and it is delivered at once (a debounce of an hour shows
// that no ordinary change notification did it), and their watches carry
// the changes after it.
func TestWatchCatchesUpAfterOutage(t *testing.T) {
	s := newFlakyServer(t, objects(t)...)
	log, logs := newLogger()
	const interval = time.Second
	d, fc := s.datastore(t, kubernetes.Options{Logger: log, ProbeInterval: interval, Debounce: time.Hour})
	if ok, _ := d.Connected(); ok {
		t.Error("connected before Watch")
	}
	w := startWatch(t, d)
	if c := w.next(t); len(c.Nodes) != 2 || hasService(c, "default/late") {
		t.Fatalf("first update: %+v", c)
	}
	if ok, since := d.Connected(); !ok || !since.Equal(fc.Now()) {
		t.Errorf("after the first read: Connected() = %v, %v", ok, since)
	}

	s.kill()
	if since := disconnected(t, d); !since.Equal(fc.Now()) {
		t.Errorf("disconnected since %v, want %v", since, fc.Now())
	}
	if len(logs.lines("level=WARN", "does not answer", "connection refused")) == 0 {
		t.Errorf("the outage not logged:\n%s", logs)
	}
	// One probe per interval, the first within one.
	for i := 1; i <= 4; i++ {
		armed(t, fc, interval)
		fc.Advance(interval)
		s.probed(t)
		if n := s.probeCount.Load(); n != int32(i) {
			t.Fatalf("%d probes after %d intervals", n, i)
		}
	}
	if ok, _ := d.Connected(); ok {
		t.Error("connected while the server is down")
	}
	if d.Restarts() != 0 {
		t.Errorf("%d restarts while the server is down", d.Restarts())
	}

	// A service the old informers cannot see; the server is back at the
	// next probe.
	s.addLate(t)
	s.backAtNextProbe(t, fc, interval)
	c := w.next(t)
	if !hasService(c, "default/late") || len(c.Nodes) != 2 || len(c.Pods) != 2 {
		t.Errorf("update after the outage: %d nodes, %d pods, services %+v", len(c.Nodes), len(c.Pods), c.Services)
	}
	if n := d.Restarts(); n != 1 {
		t.Errorf("%d restarts, want 1", n)
	}
	if ok, since := d.Connected(); !ok || !since.Equal(fc.Now()) {
		t.Errorf("after the outage: Connected() = %v, %v; want true since %v", ok, since, fc.Now())
	}
	if n := s.probeCount.Load(); n != 5 {
		t.Errorf("%d probes, want 5", n)
	}
	if len(logs.lines("level=INFO", "answers again", "by=probe")) != 1 || len(logs.lines("level=INFO", "caught up")) != 1 {
		t.Errorf("the recovery not logged:\n%s", logs)
	}

	// The new informers watch: a change goes through the debounce.
	if _, err := s.client.CoreV1().Nodes().Create(context.Background(), k8sNode("node3", "198.18.0.3", "10.244.3.0/24", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// (A late notification of the new informers' listing may have armed
	// the debounce before the change: advance until it is delivered.)
	advanceUntil(t, w, fc, time.Hour, func(c datastore.Cluster) bool { return len(c.Nodes) == 3 })
	if n := s.probeCount.Load(); n != 5 {
		t.Errorf("%d probes while connected, want none after the outage", n-5)
	}
}

// TestWatchOutageWithoutProbes: a negative ProbeInterval turns the probes
// and the restarts off; the outage is still reported.
func TestWatchOutageWithoutProbes(t *testing.T) {
	s := newFlakyServer(t, objects(t)...)
	d, fc := s.datastore(t, kubernetes.Options{ProbeInterval: -1})
	w := startWatch(t, d)
	w.next(t)
	s.kill()
	disconnected(t, d)
	for range 3 {
		fc.Advance(time.Minute)
	}
	time.Sleep(50 * time.Millisecond)
	if n := s.probeCount.Load(); n != 0 || d.Restarts() != 0 {
		t.Errorf("%d probes, %d restarts with the probes off", n, d.Restarts())
	}
}

// TestWatchReturnsOnCancelDuringOutage: a Watch cancelled while the server
// is down, even with a probe in flight that does not heed its context,
// returns at once, and reports the datastore disconnected.
func TestWatchReturnsOnCancelDuringOutage(t *testing.T) {
	s := newFlakyServer(t, objects(t)...)
	d, fc := s.datastore(t, kubernetes.Options{Debounce: time.Hour})
	w := startWatch(t, d)
	w.next(t)
	s.hangProbes.Store(true)
	s.kill()
	disconnected(t, d)
	armed(t, fc, kubernetes.DefaultProbeInterval)
	fc.Advance(kubernetes.DefaultProbeInterval)
	eventually(t, "a probe in flight", func() bool { return s.probeCount.Load() == 1 })
	st := time.Now()
	w.cancel()
	if err := w.wait(t); err != nil {
		t.Errorf("Watch = %v, want nil", err)
	}
	t.Logf("Watch returned %v after its cancel, a probe hanging", time.Since(st).Round(time.Millisecond))
	if ok, _ := d.Connected(); ok {
		t.Error("connected after Watch returned")
	}
}

// TestWatchRestartsSpacedOut: outages that follow each other closely do not
// restart the informers at every probe: the gap between restarts doubles
// from the probe interval (1 s, then 2 s), so a server that answers the
// probes but drops the informers is not listed every interval.
func TestWatchRestartsSpacedOut(t *testing.T) {
	s := newFlakyServer(t, objects(t)...)
	s.backAtProbe.Store(true)
	const interval = time.Second
	d, fc := s.datastore(t, kubernetes.Options{ProbeInterval: interval, Debounce: time.Hour})
	w := startWatch(t, d)
	w.next(t)
	// outage kills the server, adds a service it cannot see, and brings
	// the server back at the first probe, one interval later.
	outage := func(i int) {
		t.Helper()
		s.kill()
		disconnected(t, d)
		ip := fmt.Sprintf("10.96.1.%d", i)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("s%d", i)},
			Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip},
				Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80}}}}
		if _, err := s.client.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		armed(t, fc, interval)
		fc.Advance(interval)
		s.probed(t)
	}
	// The first restart comes at once; the second one interval after it,
	// which the probe's interval already is.
	for i := 1; i <= 2; i++ {
		outage(i)
		for c := w.next(t); !hasService(c, fmt.Sprintf("default/s%d", i)); c = w.next(t) {
		}
		if n := d.Restarts(); n != i {
			t.Fatalf("outage %d: %d restarts", i, n)
		}
	}
	// The third waits for a gap of 2 s: 1 s more.
	outage(3)
	armed(t, fc, time.Second)
	if n := d.Restarts(); n != 2 {
		t.Fatalf("outage 3: %d restarts before the gap", n)
	}
	fc.Advance(time.Second)
	for c := w.next(t); !hasService(c, "default/s3"); c = w.next(t) {
	}
	if n := d.Restarts(); n != 3 {
		t.Errorf("outage 3: %d restarts after the gap", n)
	}
}

// TestWatchGoesOnWithoutAForbiddenResourceAfterOutage: the agent's
// permission to list endpoint slices is lost while the server is down.
// The informers started after the outage cannot read them, which held
// back every resource for good (a new service never delivered). After
// rereadTimeout the datastore goes on with what it read, keeps the last
// state of the endpoint slices (the services keep their endpoints), and
// says so in Stale; once the permission is back it catches up.
func TestWatchGoesOnWithoutAForbiddenResourceAfterOutage(t *testing.T) {
	s := newFlakyServer(t, objects(t)...)
	var deny atomic.Bool
	s.client.PrependReactor("list", "endpointslices", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if deny.Load() && !s.down.Load() {
			return true, nil, forbidden("endpointslices")
		}
		return false, nil, nil
	})
	log, logs := newLogger()
	const interval = time.Second
	d, fc := s.datastore(t, kubernetes.Options{Logger: log, ProbeInterval: interval, Debounce: time.Millisecond})
	w := startWatch(t, d)
	endpoints := func(c datastore.Cluster) int {
		for _, svc := range c.Services {
			if svc.Key() == "default/web" {
				return len(svc.Endpoints)
			}
		}
		return -1
	}
	if c := w.next(t); endpoints(c) != 2 {
		t.Fatalf("first update: web's endpoints %d", endpoints(c))
	}
	s.kill()
	disconnected(t, d)
	deny.Store(true)
	s.addLate(t)
	s.backAtNextProbe(t, fc, interval)
	eventually(t, "the informers started again", func() bool { return d.Restarts() == 1 })
	// The new set cannot read the endpoint slices: nothing is delivered
	// until the reread timeout, then the rest is.
	advanceUntil(t, w, fc, time.Second, func(c datastore.Cluster) bool { return hasService(c, "default/late") })
	if got := d.Stale(); len(got) != 1 || got[0] != "endpointslices" {
		t.Errorf("Stale() = %v, want [endpointslices]", got)
	}
	if len(logs.lines("level=WARN", "not every resource read again", "endpointslices")) == 0 {
		t.Errorf("the stale resource not logged:\n%s", logs)
	}
	// The services keep their endpoints meanwhile (the last state of the
	// slices), and other changes keep coming.
	if err := s.client.CoreV1().Services("default").Delete(context.Background(), "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	advanceUntil(t, w, fc, time.Millisecond, func(c datastore.Cluster) bool {
		if hasService(c, "default/late") {
			return false
		}
		if endpoints(c) != 2 {
			t.Errorf("web's endpoints while the slices are stale: %d", endpoints(c))
		}
		return true
	})
	// The permission comes back: the slices are read again.
	deny.Store(false)
	eventually(t, "caught up", func() bool { return len(d.Stale()) == 0 })
}

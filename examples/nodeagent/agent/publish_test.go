package agent

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/wireguard"
)

// bound is how long a test waits for what must happen; it fails only when
// that never happens.
const bound = 30 * time.Second

// publishDatastore is a datastore whose Watch delivers one cluster and
// whose Publish fails, hangs until its context ends, or succeeds, as the
// test says, and reports every call.
type publishDatastore struct {
	cluster datastore.Cluster
	calls   chan datastore.NodeInfo

	mu sync.Mutex
	// fail fails the next fail calls.
	fail int
	// hang makes the calls block until their context ends.
	hang bool
	errs []error
}

func newPublishDatastore(c datastore.Cluster) *publishDatastore {
	return &publishDatastore{cluster: c, calls: make(chan datastore.NodeInfo, 100)}
}

// Watch implements datastore.Datastore.
func (d *publishDatastore) Watch(ctx context.Context, update func(datastore.Cluster)) error {
	update(d.cluster)
	<-ctx.Done()
	return nil
}

// Publish implements datastore.Datastore.
func (d *publishDatastore) Publish(ctx context.Context, info datastore.NodeInfo) error {
	d.mu.Lock()
	hang, fail := d.hang, d.fail > 0
	if fail {
		d.fail--
	}
	d.mu.Unlock()
	d.calls <- info
	var err error
	switch {
	case hang:
		<-ctx.Done()
		err = ctx.Err()
	case fail:
		err = errors.New("the server is down")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs = append(d.errs, err)
	return err
}

func (d *publishDatastore) set(fail int, hang bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fail, d.hang = fail, hang
}

// call waits for the next Publish call.
func (d *publishDatastore) call(t *testing.T) datastore.NodeInfo {
	t.Helper()
	select {
	case info := <-d.calls:
		return info
	case <-time.After(bound):
		t.Fatal("no publish")
	}
	return datastore.NodeInfo{}
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

// runPublisher runs p until the test ends; the returned function stops it
// and waits for it.
func runPublisher(t *testing.T, p *publisher) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.run(ctx)
	}()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(bound):
			t.Error("the publisher did not stop")
		}
	}
	t.Cleanup(stop)
	return stop
}

// observed hands p cluster c and waits until p has taken it.
func observed(t *testing.T, p *publisher, c datastore.Cluster) {
	t.Helper()
	p.observe(c)
	eventually(t, "the cluster taken", func() bool { return len(p.nodes) == 0 })
}

// withMAC returns c with node1's published VTEP MAC.
func withMAC(c datastore.Cluster, mac datastore.MAC) datastore.Cluster {
	c.Nodes = slices.Clone(c.Nodes)
	c.Nodes[0].VTEPMAC = mac
	return c
}

// TestPublisherRetries: a failed publication is tried again after a
// backoff that doubles, on the injected clock, and the failures are
// recorded.
func TestPublisherRetries(t *testing.T) {
	c := testCluster(2)
	ds := newPublishDatastore(c)
	ds.set(2, false)
	var mu sync.Mutex
	var failures []error
	p := newPublisher(ds, "node1", true, slog.New(slog.DiscardHandler), func(err error) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, err)
	})
	start := time.Unix(0, 0)
	fc := clock.NewFake(start)
	p.clock = fc
	runPublisher(t, p)
	p.observe(c)
	mac := datastore.DefaultVTEPMAC("node1", 4)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	for i, wait := range []time.Duration{time.Second, 2 * time.Second} {
		if info := ds.call(t); info.VTEPMAC.String() != mac.String() {
			t.Fatalf("publish %d: %+v", i, info)
		}
		// The retry waits on the clock, the backoff doubled each time.
		if err := fc.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		next, _ := fc.NextDeadline()
		if got := next.Sub(fc.Now()); got != wait {
			t.Fatalf("retry %d in %v, want %v", i, got, wait)
		}
		fc.Advance(wait)
	}
	if info := ds.call(t); info.VTEPMAC.String() != mac.String() || info.Name != "node1" {
		t.Fatalf("third publish: %+v", info)
	}
	eventually(t, "the success recorded", func() bool {
		ds.mu.Lock()
		defer ds.mu.Unlock()
		return len(ds.errs) == 3 && ds.errs[2] == nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(failures) != 2 {
		t.Errorf("failures recorded: %v", failures)
	}
}

// TestPublisherRepublishes: what the datastore shows on this node decides:
// nothing is published while it shows the node's details, and they are
// published again when they are gone (annotations removed, the Node
// deleted and created again); a new WireGuard key is published.
func TestPublisherRepublishes(t *testing.T) {
	c := testCluster(2)
	ds := newPublishDatastore(c)
	p := newPublisher(ds, "node1", true, slog.New(slog.DiscardHandler), func(error) {})
	runPublisher(t, p)
	mac := datastore.MAC(datastore.DefaultVTEPMAC("node1", 4))
	published := withMAC(c, mac)
	gone := c
	gone.Nodes = c.Nodes[1:]

	observed(t, p, c)
	if info := ds.call(t); info.VTEPMAC.String() != mac.String() || !info.WireGuardKey.IsZero() {
		t.Fatalf("first publish: %+v", info)
	}
	observed(t, p, published) // the datastore shows it: nothing to do
	observed(t, p, published)
	observed(t, p, gone) // the Node deleted: nothing to publish on
	observed(t, p, c)    // and created again, without annotations
	if info := ds.call(t); info.VTEPMAC.String() != mac.String() {
		t.Fatalf("publish on the new Node: %+v", info)
	}
	observed(t, p, published)
	// A key: published alone, the MAC being there.
	key, err := wireguard.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	p.key(ipfamily.IPv4, key.Public())
	if info := ds.call(t); info.WireGuardKey != key.Public() || !info.WireGuardKeyV6.IsZero() || len(info.VTEPMAC) != 0 {
		t.Fatalf("key publish: %+v", info)
	}
	published.Nodes[0].WireGuardPublicKey = key.Public().String()
	observed(t, p, published)
	// The IPv6 device's key: published alone, the IPv4 one being there.
	key6, err := wireguard.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	p.key(ipfamily.IPv6, key6.Public())
	if info := ds.call(t); info.WireGuardKeyV6 != key6.Public() || !info.WireGuardKey.IsZero() || len(info.VTEPMAC) != 0 {
		t.Fatalf("IPv6 key publish: %+v", info)
	}
	published.Nodes[0].WireGuardPublicKeyV6 = key6.Public().String()
	observed(t, p, published) // both keys shown: nothing to do
	// Nothing else was published in between.
	if n := len(ds.calls); n != 0 {
		t.Errorf("%d more publications", n)
	}
}

// TestPublisherKeysPerFamily: the keys of the two families reported
// before the node is listed are both published, in one call, neither
// replacing the other; a node that shows another IPv6 key gets this one.
func TestPublisherKeysPerFamily(t *testing.T) {
	c := testCluster(2)
	ds := newPublishDatastore(c)
	p := newPublisher(ds, "node1", false, slog.New(slog.DiscardHandler), func(error) {})
	var keys [3]wireguard.PublicKey
	for i := range keys {
		k, err := wireguard.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k.Public()
	}
	p.key(ipfamily.IPv4, keys[0])
	p.key(ipfamily.IPv6, keys[1])
	runPublisher(t, p)
	eventually(t, "the keys taken", func() bool { return len(p.keys) == 0 && len(p.keysV6) == 0 })
	observed(t, p, c)
	if info := ds.call(t); info.Name != "node1" || info.WireGuardKey != keys[0] || info.WireGuardKeyV6 != keys[1] || len(info.VTEPMAC) != 0 {
		t.Fatalf("publish: %+v", info)
	}
	stale := c
	stale.Nodes = slices.Clone(c.Nodes)
	stale.Nodes[0].WireGuardPublicKey, stale.Nodes[0].WireGuardPublicKeyV6 = keys[0].String(), keys[2].String()
	observed(t, p, stale)
	if info := ds.call(t); !info.WireGuardKey.IsZero() || info.WireGuardKeyV6 != keys[1] {
		t.Fatalf("publish over another IPv6 key: %+v", info)
	}
	if n := len(ds.calls); n != 0 {
		t.Errorf("%d more publications", n)
	}
}

// TestPublisherTimeout: a publication the datastore does not answer gives
// up after the timeout and is tried again; a stopping agent does not wait
// for one in flight.
func TestPublisherTimeout(t *testing.T) {
	c := testCluster(1)
	ds := newPublishDatastore(c)
	ds.set(0, true)
	errc := make(chan error, 10)
	p := newPublisher(ds, "node1", true, slog.New(slog.DiscardHandler), func(err error) { errc <- err })
	fc := clock.NewFake(time.Unix(0, 0))
	p.clock, p.timeout = fc, 10*time.Millisecond
	runPublisher(t, p)
	p.observe(c)
	ds.call(t)
	select {
	case err := <-errc:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("failure %v, want the timeout", err)
		}
	case <-time.After(bound):
		t.Fatal("the hung publication never gave up")
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := fc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	ds.set(0, false)
	fc.Advance(time.Second)
	ds.call(t)

	// With the default timeout, a hung call in flight does not hold back
	// the publisher's stop.
	ds = newPublishDatastore(c)
	ds.set(0, true)
	p = newPublisher(ds, "node1", true, slog.New(slog.DiscardHandler), func(error) {})
	stop := runPublisher(t, p)
	p.observe(c)
	ds.call(t)
	stop()
}

// TestAgentStopsPromptly: an agent whose datastore hangs on Publish, with
// its HTTP endpoint serving, returns from run as soon as its context ends
// (the bounded wait fails only when it never does), and leaves the
// dataplane as it was.
func TestAgentStopsPromptly(t *testing.T) {
	c := testCluster(2)
	c.Nodes[0].UnderlayIPv4 = netip.MustParseAddr("198.18.0.1")
	node := newFakeNode(t, c.Nodes[0])
	node.pod(c.Pods[0])
	ds := newPublishDatastore(c)
	ds.set(0, true)
	dir := t.TempDir()
	cfg := Config{NodeName: "node1", Kernel: node.k, Listen: "127.0.0.1:0", StateDir: dir, Netfilter: NetfilterIPTablesLegacy,
		BPFPinDir: dir + "/bpf", Datastore: ds}
	r := startAgent(t, cfg)
	r.await(t, func() bool { return true })
	ds.call(t) // a publication hangs
	before := picture(t, node.k, c, "node1")
	if !slices.ContainsFunc(before, func(l string) bool { return strings.Contains(l, vxlanDevice(ipfamily.IPv4)) }) {
		t.Fatalf("no VXLAN device in\n\t%s", strings.Join(before, "\n\t"))
	}
	r.cancel()
	select {
	case err := <-r.errc:
		r.errc = nil
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(bound):
		t.Fatal("the agent did not stop")
	}
	if after := picture(t, node.k, c, "node1"); !slices.Equal(after, before) {
		t.Errorf("the dataplane changed at stop:\n\t%s\nwas\n\t%s", strings.Join(after, "\n\t"), strings.Join(before, "\n\t"))
	}
}

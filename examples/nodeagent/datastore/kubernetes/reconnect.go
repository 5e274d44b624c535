package kubernetes

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"

	"github.com/nodeplane/nodeplane/clock"
)

// Catching up after an outage of the API server.
//
// client-go's reflectors retry a server that went away with a backoff that
// doubles from 800 ms to 30 s and that an informer factory does not let
// anyone change: a change made once the server is back reached the agent
// 10 to 27 s later in the end-to-end test. So, after its first read of the
// cluster, Watch follows its informers' requests (observedClient); when one
// finds the server down (no answer, 502, 503) it reports the datastore
// disconnected and asks the server every Options.ProbeInterval whether it
// is back (GET /readyz: one small request per interval, whatever the
// informers do meanwhile). When it answers (or an informer gets an answer
// first), Watch starts a new set of informers, which list at once, if the
// current set has an informer whose last request found the server down,
// and delivers the cluster from the new set once every one of its
// informers has read its resource; until then the agent keeps the last
// cluster delivered, never a half-read one. The old set is stopped at
// once: its caches are frozen anyway, and its memory goes while the new
// set lists.
//
// Why a new set rather than holding the reflectors' requests until the
// server answers: a reflector that resumes its watch at its last resource
// version may find, from a restarted server whose watch cache starts
// anew, that version gone (410), and then lists again only after a further
// backoff; a reflector whose list failed waits out its backoff too. A new
// set lists at once, whatever state client-go's reflectors are in. The
// cost is one list of each resource per agent and outage, what a
// reflector whose version expired does anyway. The first probe of
// an outage comes after a random part of the interval, so that the agents
// of a cluster do not all list in the same instant when the server comes
// back; and restarts that follow each other within restartReset are spaced
// by a gap that doubles from the interval up to maxRestartGap, so that a
// server that answers the probe but fails the informers is not listed
// every interval.

// DefaultProbeInterval is how often Watch asks the API server whether it
// is back while it does not answer.
const DefaultProbeInterval = time.Second

const (
	// minProbeTimeout bounds one probe when the interval is shorter.
	minProbeTimeout = time.Second
	// maxRestartGap bounds the gap between restarts of the informers
	// (client-go's own backoff cap).
	maxRestartGap = 30 * time.Second
	// restartReset is how long after a restart the gap starts again from
	// nothing.
	restartReset = 2 * time.Minute
	// rereadTimeout bounds (with Options.SyncTimeout) how long an informer
	// set started after an outage may take to read everything before the
	// agent goes on with what it read (a resource it may no longer list
	// would hold back the others for good).
	rereadTimeout = 15 * time.Second
)

// connection is what the Datastore knows of its link to the API server:
// whether the server answers, since when, and the signals that wake the
// prober (lost) and Watch's loop (back).
type connection struct {
	clock clock.Clock
	log   *slog.Logger
	// down receives when the server is lost, back when it answers again;
	// each holds one signal.
	down, back chan struct{}

	mu sync.Mutex
	// live is set after Watch's first read, while it runs: only then do
	// requests change the state.
	live      bool
	connected bool
	since     time.Time
	// restarts counts the informer sets started after an outage.
	restarts int
	// stale are the resources not read again since an outage (their
	// last state stands), sorted.
	stale []string
}

// setStale records the resources not read again since an outage.
func (c *connection) setStale(resources []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stale = slices.Sorted(slices.Values(resources))
}

// Stale returns the resources not read again since an outage.
func (c *connection) Stale() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.stale)
}

func newConnection(c clock.Clock, log *slog.Logger) *connection {
	return &connection{clock: c, log: log, down: make(chan struct{}, 1), back: make(chan struct{}, 1)}
}

// Connected reports whether the server answers and since when.
func (c *connection) Connected() (bool, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected, c.since
}

// set changes the state (live, connected) and drops the pending signals.
func (c *connection) set(live, connected bool) {
	c.mu.Lock()
	c.live, c.connected, c.since = live, connected, c.clock.Now()
	c.mu.Unlock()
	for _, ch := range []chan struct{}{c.down, c.back} {
		select {
		case <-ch:
		default:
		}
	}
}

// lost records that a request found the server down (err).
func (c *connection) lost(err error) {
	c.mu.Lock()
	if !c.live || !c.connected {
		c.mu.Unlock()
		return
	}
	c.connected, c.since = false, c.clock.Now()
	c.mu.Unlock()
	c.log.Warn("kubernetes datastore: the API server does not answer; the agent keeps the cluster it has and asks the server whether it is back", "err", err)
	signal(c.down)
}

// answered records that the server answered a request of by, sent at
// sent. An answer to a request sent before the server was found lost
// says nothing of it now (it may come in after the loss, from a server
// that is gone since): it is no sign of the server being back.
func (c *connection) answered(by string, sent time.Time) {
	c.mu.Lock()
	if !c.live || c.connected || sent.Before(c.since) {
		c.mu.Unlock()
		return
	}
	now := c.clock.Now()
	down := now.Sub(c.since)
	c.connected, c.since = true, now
	c.mu.Unlock()
	c.log.Info("kubernetes datastore: the API server answers again", "by", by, "after", down.Round(time.Millisecond))
	signal(c.back)
}

// restarted counts a restart of the informers and returns the count.
func (c *connection) restarted() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.restarts++
	return c.restarts
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Connected implements datastore.ConnectionReporter: whether the informers
// of the running Watch reach the API server, and since when. It is false
// before Watch's first read of the cluster and after Watch returns.
func (d *Datastore) Connected() (bool, time.Time) { return d.conn.Connected() }

// Stale implements datastore.StaleReporter: the resources the running
// Watch has not read again since an outage (a permission lost while the
// server was down, say), whose last state stands while the others are
// followed; none when it follows them all.
func (d *Datastore) Stale() []string { return d.conn.Stale() }

// probeWhileDown asks the server whether it is back, every
// Options.ProbeInterval while the connection is lost, until it answers or
// an informer gets an answer first; it returns when ctx ends.
func (d *Datastore) probeWhileDown(ctx context.Context) {
	interval := d.opts.ProbeInterval
	t := d.clock.NewTimer(interval)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.conn.down:
		}
		// A random part of the interval first: see the comment above.
		t.Reset(interval/2 + rand.N(interval/2+1))
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
			if ok, _ := d.conn.Connected(); ok {
				break
			}
			sent := d.clock.Now()
			err := d.probe(ctx)
			if ctx.Err() != nil {
				return
			}
			if probeAnswered(err) {
				d.conn.answered("probe", sent)
				break
			}
			d.log.Debug("kubernetes datastore: the API server is not back yet", "err", err, "next in", interval)
			t.Reset(interval)
		}
	}
}

// probe asks the server once whether it is ready: GET /readyz (the
// discovery client's; the version with a client that has no REST client,
// the fake's). It gives up after the interval (at least minProbeTimeout),
// or when ctx ends, without waiting for a client that does not heed it.
func (d *Datastore) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, max(d.opts.ProbeInterval, minProbeTimeout))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		disc := d.opts.Client.Discovery()
		if rc := disc.RESTClient(); !isNil(rc) {
			done <- rc.Get().AbsPath("/readyz").MaxRetries(0).Do(ctx).Error()
			return
		}
		_, err := discovery.ToServerVersionInterfaceWithContext(disc).ServerVersionWithContext(ctx)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// probeAnswered reports whether a probe's outcome says the server is
// back: ready, or answering without letting this agent ask (401, 403) or
// without /readyz (404).
func probeAnswered(err error) bool {
	if err == nil {
		return true
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	switch st.Status().Code {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return true
	}
	return false
}

// isNil reports whether v is nil or a nil pointer in an interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

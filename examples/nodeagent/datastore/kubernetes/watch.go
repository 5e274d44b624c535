package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
)

// watchErrors follows the informers of one Watch: their list and watch
// errors, which are logged, and until the first complete read, which of
// them fail it (a forbidden resource) and what the timeout's error says.
type watchErrors struct {
	log *slog.Logger
	// fail ends the first read with its cause.
	fail context.CancelCauseFunc

	mu sync.Mutex
	// synced is set once every informer has read its resource.
	synced bool
	// last is the last error before the first read, for the timeout's
	// error.
	last error
	// watched are the informers, by resource.
	watched []watchedInformer
}

// watchedInformer is an informer and the resource it reads.
type watchedInformer struct {
	resource string
	inf      cache.SharedIndexInformer
}

// newWatchErrors returns the watchErrors of a Watch's first read, which
// fail ends; nil fail: of informers started after it (nothing fails them).
func newWatchErrors(log *slog.Logger, fail context.CancelCauseFunc) *watchErrors {
	return &watchErrors{log: log, fail: fail, synced: fail == nil}
}

// watch adds handler to inf, which reads resource, and takes its list and
// watch errors. inf must not have started.
func (w *watchErrors) watch(resource string, inf cache.SharedIndexInformer, handler cache.ResourceEventHandler) error {
	if _, err := inf.AddEventHandler(handler); err != nil {
		return fmt.Errorf("kubernetes datastore: %s: %w", resource, err)
	}
	if err := inf.SetWatchErrorHandlerWithContext(w.handler(resource)); err != nil {
		return fmt.Errorf("kubernetes datastore: %s: %w", resource, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watched = append(w.watched, watchedInformer{resource: resource, inf: inf})
	return nil
}

// handler returns the error handler of resource's informer, which retries
// (with backoff) after it returns. Before the first read a forbidden
// resource fails the Watch; every other error is logged: at Debug what
// happens in normal operation (a watch that expired or closed), at Warn
// the rest (the server unreachable, refusing, or forbidding after the
// first read: the caches keep their last state meanwhile).
func (w *watchErrors) handler(resource string) cache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, _ *cache.Reflector, err error) {
		if ctx.Err() != nil || errors.Is(err, io.EOF) {
			return // stopping, or a watch the server closed normally
		}
		w.mu.Lock()
		synced := w.synced
		if !synced {
			w.last = fmt.Errorf("%s: %w", resource, err)
		}
		w.mu.Unlock()
		switch {
		case apierrors.IsForbidden(err) && !synced:
			w.log.Error("kubernetes datastore: listing or watching is forbidden", "resource", resource, "err", err)
			w.fail(fmt.Errorf("%w: the agent may not list and watch %s (RBAC: it needs get, list and watch on them): %v", ErrForbidden, resource, err))
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || errors.Is(err, io.ErrUnexpectedEOF):
			w.log.Debug("kubernetes datastore: watch closed; listing again", "resource", resource, "err", err)
		default:
			w.log.Warn("kubernetes datastore: listing or watching failed; retrying", "resource", resource, "err", err)
		}
	}
}

// note records err of what (a failed discovery) for the timeout's error.
func (w *watchErrors) note(what string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.synced {
		w.last = fmt.Errorf("%s: %w", what, err)
	}
}

// waitForSync waits until every informer has read its resource, and
// returns nil, or until start ends, and returns its cause.
func (w *watchErrors) waitForSync(start context.Context) error {
	w.mu.Lock()
	watched := slices.Clone(w.watched)
	w.mu.Unlock()
	for _, r := range watched {
		select {
		case <-r.inf.HasSyncedChecker().Done():
		case <-start.Done():
			return context.Cause(start)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.synced = true
	return nil
}

// unreachable returns the error of a first read not done within timeout,
// wrapping ErrUnreachable: the resources not read, and the last error.
func (w *watchErrors) unreachable(timeout time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var pending []string
	for _, r := range w.watched {
		if !r.inf.HasSynced() {
			pending = append(pending, r.resource)
		}
	}
	what := "the admin network policies' discovery"
	if len(pending) > 0 {
		what = strings.Join(pending, ", ")
	}
	last := "none: no answer"
	if w.last != nil {
		last = w.last.Error()
	}
	return fmt.Errorf("%w: the cluster was not read within %v (not read: %s; last error: %s)", ErrUnreachable, timeout, what, last)
}

package dataplane

import (
	"cmp"
	"slices"
	"time"

	"github.com/nodeplane/nodeplane/clock"
)

// Ledger keeps the objects of a driver whose writes failed, by key: each
// object's *ObjectError (with its Attempts and RetryAt), its backoff
// (Retry, on the Ledger's Backoff) and whether the current Apply tried it.
// It is the one failure bookkeeping of the drivers: an Apply calls Begin,
// skips the objects that are Waiting, records each refusal with Fail and
// each success (or withdrawal) with Forget, and ends with Err and
// RetryAfter.
//
// A Ledger is not safe for concurrent use: a driver calls it under its own
// lock, as it does the rest of its Apply. The zero value is not usable;
// create one with NewLedger.
type Ledger[K comparable] struct {
	backoff Backoff
	clk     clock.Clock
	objs    map[K]*ledgerEntry
	now     time.Time
	pass    uint64
	seq     uint64
}

// ledgerEntry is one failing object.
type ledgerEntry struct {
	err   *ObjectError
	retry Retry
	// pass is the Apply (Begin count) that last tried the object; seq
	// orders the objects by their first failure.
	pass, seq uint64
	// held is set for an object recorded with Hold: it has no backoff.
	held bool
}

// NewLedger returns an empty Ledger whose objects back off by b (its zero
// fields take DefaultBackoffInitial and DefaultBackoffMax) on clk's time
// (nil means clock.Real()). It does no I/O.
func NewLedger[K comparable](b Backoff, clk clock.Clock) *Ledger[K] {
	return &Ledger[K]{backoff: b, clk: clock.OrReal(clk), objs: map[K]*ledgerEntry{}}
}

// Begin starts an Apply: it reads the clock once (every later call of the
// Apply uses that instant, which Begin returns) and counts the Apply, so
// that Err tells the objects it tried from those that wait. A Plan, which
// decides as an Apply would, begins too, to see which objects wait; it
// records nothing else, and the next Apply begins again.
func (l *Ledger[K]) Begin() time.Time {
	l.now = l.clk.Now()
	l.pass++
	return l.now
}

// Now is the instant the current Apply began (see Begin).
func (l *Ledger[K]) Now() time.Time { return l.now }

// Waiting reports whether the object k failed and its next attempt is not
// due yet: the Apply must leave it as it is. It stays counted as failing.
func (l *Ledger[K]) Waiting(k K) bool {
	e := l.objs[k]
	return e != nil && e.retry.Waiting(l.now)
}

// Fail records one more failed attempt of the object k, whose error is e,
// in the current Apply: e.Attempts counts the attempts in a row and
// e.RetryAt is when the object is due again (e.Err, or e.Reason when Err
// is nil, is the Retry's error). It returns e.
func (l *Ledger[K]) Fail(k K, e *ObjectError) *ObjectError {
	x := l.entry(k)
	cause := e.Err
	if cause == nil {
		cause = e.Reason
	}
	x.retry = x.retry.Failed(l.backoff, l.now, cause)
	x.err, x.pass, x.held = e, l.pass, false
	e.Attempts, e.RetryAt = x.retry.Failures, x.retry.Due
	return e
}

// Hold records that the object k could not be written in the current
// Apply for a reason that only a change elsewhere clears (a foreign object
// holds its place, what it depends on is not written yet): it counts as
// failed, is never Waiting (the next Apply looks at it again) and has no
// retry (e.RetryAt is zero and RetryAfter leaves it out). It returns e.
func (l *Ledger[K]) Hold(k K, e *ObjectError) *ObjectError {
	x := l.entry(k)
	x.retry = Retry{Failures: x.retry.Failures + 1, Err: e}
	x.err, x.pass, x.held = e, l.pass, true
	e.Attempts, e.RetryAt = x.retry.Failures, time.Time{}
	return e
}

// entry returns k's entry, new when k was not failing.
func (l *Ledger[K]) entry(k K) *ledgerEntry {
	x := l.objs[k]
	if x == nil {
		l.seq++
		x = &ledgerEntry{seq: l.seq}
		l.objs[k] = x
	}
	return x
}

// Forget drops the object k: it was written, withdrawn or declared anew,
// so its next attempt is not held back.
func (l *Ledger[K]) Forget(k K) { delete(l.objs, k) }

// Retain drops every object for which keep returns false (the objects no
// longer desired, say).
func (l *Ledger[K]) Retain(keep func(K) bool) {
	for k := range l.objs {
		if !keep(k) {
			delete(l.objs, k)
		}
	}
}

// Get returns the last error of the object k, if it is failing.
func (l *Ledger[K]) Get(k K) (*ObjectError, bool) {
	if e := l.objs[k]; e != nil {
		return e.err, true
	}
	return nil, false
}

// Held reports whether the object k is failing by a Hold (its last
// record was Hold, not Fail): a driver that recomputes which declarations
// cannot be written forgets the held objects that no longer are.
func (l *Ledger[K]) Held(k K) bool {
	e := l.objs[k]
	return e != nil && e.held
}

// Len is how many objects are failing.
func (l *Ledger[K]) Len() int { return len(l.objs) }

// Due reports whether some object's next attempt is due at now.
func (l *Ledger[K]) Due(now time.Time) bool {
	for _, e := range l.objs {
		if !e.retry.Waiting(now) {
			return true
		}
	}
	return false
}

// RetryAfter is how long after the current Apply's start the earliest
// failing object is due, or 0 when none is due later: the ApplyResult's
// RetryAfter. An object already due when the Apply began was tried (or is
// held back by something else than its backoff, as a Hold is) and does not
// count, so that a driver never asks to be called again at once.
func (l *Ledger[K]) RetryAfter() time.Duration {
	var after time.Duration
	for _, e := range l.objs {
		if d := e.retry.Due.Sub(l.now); !e.held && d > 0 && (after == 0 || d < after) {
			after = d
		}
	}
	return after
}

// Errors returns the errors of the failing objects in the order they
// first failed.
func (l *Ledger[K]) Errors() []*ObjectError {
	es := make([]*ledgerEntry, 0, len(l.objs))
	for _, e := range l.objs {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *ledgerEntry) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]*ObjectError, len(es))
	for i, e := range es {
		out[i] = e.err
	}
	return out
}

// Err returns nil when no object is failing, else a *PartialError: the
// objects tried in the current Apply (since Begin) count as Failed, the
// others as Waiting, Errs holds every object's *ObjectError in the order
// they first failed, and Driver is theirs when they all name the same.
func (l *Ledger[K]) Err() error {
	if len(l.objs) == 0 {
		return nil
	}
	objs := l.Errors()
	pe := &PartialError{Driver: objs[0].Driver, Errs: make([]error, len(objs))}
	for i, o := range objs {
		pe.Errs[i] = o
		if o.Driver != pe.Driver {
			pe.Driver = ""
		}
	}
	for _, e := range l.objs {
		if e.pass == l.pass {
			pe.Failed++
		} else {
			pe.Waiting++
		}
	}
	return pe
}

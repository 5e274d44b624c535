// Package objfail keeps the objects that a driver's Apply could not write:
// by object name, what is held back of each, the error that says why, its
// retry on a backoff (a dataplane.Retry), and the Apply that last tried
// it. It builds the dataplane.PartialError that counts the objects tried
// by the current Apply as failed and the others as waiting.
package objfail

import (
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
)

// Failure is one object an Apply could not write.
type Failure[H, E any] struct {
	// Hold is what the driver holds back of the object until its retry.
	Hold H
	// Err says why the object was not written.
	Err E
	// Retry is the object's backoff; Retry.Due is when it is tried again.
	Retry dataplane.Retry
	// Apply is the count of the Apply that last tried the object.
	Apply uint64
}

// Set holds the failures by object name.
type Set[H, E any] map[string]*Failure[H, E]

// Fail records one more failure of the object named, for reason, at now
// by the Apply counted apply: its hold is h and its retry comes after b's
// delay for the failures in a row. The caller sets Err.
func (s Set[H, E]) Fail(name string, h H, apply uint64, b dataplane.Backoff, now time.Time, reason error) *Failure[H, E] {
	f := s[name]
	if f == nil {
		f = &Failure[H, E]{}
		s[name] = f
	}
	f.Hold, f.Apply = h, apply
	f.Retry = f.Retry.Failed(b, now, reason)
	return f
}

// Due reports whether some object's retry is due at now.
func (s Set[H, E]) Due(now time.Time) bool {
	for _, f := range s {
		if !now.Before(f.Retry.Due) {
			return true
		}
	}
	return false
}

// Errors returns the errors of the failed objects and of broken (objects
// whose declaration cannot be written), unsorted, and how many of the
// failed objects the Apply counted apply did not try (waiting for their
// retry). An object both failed and broken is listed once, as broken.
func (s Set[H, E]) Errors(broken map[string]E, apply uint64) (errl []E, waiting int) {
	errl = make([]E, 0, len(s)+len(broken))
	for name, f := range s {
		if _, ok := broken[name]; ok {
			continue
		}
		errl = append(errl, f.Err)
		if f.Apply != apply {
			waiting++
		}
	}
	for _, e := range broken {
		errl = append(errl, e)
	}
	return errl, waiting
}

// Failing returns how many objects are failing: those of s and those of
// broken, an object in both counted once (as Errors lists them). It is the
// Failing of a driver's dataplane.DriverStats.
func (s Set[H, E]) Failing(broken map[string]E) int {
	n := len(s)
	for name := range broken {
		if _, ok := s[name]; !ok {
			n++
		}
	}
	return n
}

// Partial returns the dataplane.PartialError of objs, waiting of which
// were not tried: the others count as failed.
func Partial[E error](objs []E, waiting int) *dataplane.PartialError {
	errl := make([]error, len(objs))
	for i, o := range objs {
		errl[i] = o
	}
	return &dataplane.PartialError{Failed: len(objs) - waiting, Waiting: waiting, Errs: errl}
}

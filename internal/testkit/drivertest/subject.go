package drivertest

import (
	"errors"
	"fmt"
	"regexp"
	"testing"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
)

// Subject describes a driver to the suite: how to make an instance, what
// to declare, and how to read and disturb the kernel slice it owns. D is
// the driver's type; V is a variant, one instance identity the suite tests
// on its own (an IP family, say, or a family and a backend), named by its
// String in the subtests.
//
// Every function that takes a kernel.Kernel but New gets the namespace's
// administrator view: its calls are neither counted nor failed. A
// function given a testing.TB fails it on a problem of its own (a command
// that did not run), never returns one.
type Subject[D dataplane.Driver, V fmt.Stringer] struct {
	// Variants are the instances to test; every check runs once per
	// variant, in fresh namespaces. Required.
	Variants []V
	// Binaries are the programs the driver and the functions below run
	// (iptables-nft-restore, ipset…); the kernel environment requires
	// them.
	Binaries []string
	// Setup, if set, prepares a fresh namespace before anything else (the
	// interfaces and addresses the declarations need). It runs on every
	// namespace the suite opens, the reference ones included.
	Setup func(t testing.TB, k kernel.Kernel, v V)
	// New returns a new instance of the variant on k, with the variant's
	// identity (prefixes, protocol, priorities…): two instances of one
	// variant own the same objects. It must give the driver k and clk, and
	// do no I/O. Required.
	New func(k kernel.Kernel, clk clock.Clock, v V) (D, error)
	// Declare declares the representative desired state of the variant:
	// dozens of objects, of every kind the driver writes. Required.
	Declare func(d D, v V) error
	// Withdraw declares that nothing is desired. Required.
	Withdraw func(d D, v V) error
	// Check fails t unless the kernel holds exactly the objects of ours
	// that Declare declares: none missing, none different, none more.
	// Required.
	Check func(t testing.TB, k kernel.Kernel, v V)
	// Dump renders every object of the kernel slice the driver works in,
	// ours and everyone else's, one line per object with every attribute
	// the kernel reports, in the kernel's order (or sorted, where the
	// kernel's order means nothing). The suite compares it with the Dump of
	// a reference namespace where the driver never ran, so it must not
	// show what differs between two fresh namespaces (random MAC
	// addresses, the link-local addresses made from them). Required.
	Dump func(t testing.TB, k kernel.Kernel, v V) []string
	// Foreign adds objects that are not ours but look like them (the same
	// prefixes in other tables, a comment holding our hash, a set named
	// with our prefix in another case…), at the stage given. The suite
	// replays every stage on the reference namespace, where the driver
	// never ran, so what it adds must not depend on our objects being
	// there. Required.
	Foreign func(t testing.TB, k kernel.Kernel, v V, at Stage)
	// Delete deletes one or a few of our objects behind the driver's back,
	// as an administrator would; Foreign(InPlace) follows at once.
	// Required.
	Delete func(t testing.TB, k kernel.Kernel, v V)
	// BadInputs are declarations the driver must refuse, each with an
	// error and without any change to the desired state. Required.
	BadInputs []BadInput[D, V]
	// Known lists failures of the driver that were found and reported but
	// not fixed yet. Each excuses one assertion, and only for the lines it
	// names; the assertion still runs, its failure is logged, and once it
	// holds again the check fails until the entry is removed.
	Known []Known
}

// Known is a known failure of a driver: one assertion of the suite that
// the driver does not pass yet, for a reason reported to its owners.
type Known struct {
	// Assertion names it as the failure message starts: the check, a
	// colon and the assertion, such as "Removal: after a new instance
	// that declares nothing, nothing of ours is left".
	Assertion string
	// Lines must match every line the failure is about (a Dump line left
	// over or missing, a write made, an error): a failure about any other
	// line is reported as usual. Required.
	Lines *regexp.Regexp
	// Why says what the driver does wrong, and where it is tracked.
	Why string
}

// BadInput is one declaration a driver must refuse.
type BadInput[D any, V any] struct {
	// Name says what is wrong with it, for failure messages.
	Name string
	// Declare makes the declaration and returns the driver's error.
	Declare func(d D, v V) error
}

// Stage says when Subject.Foreign adds its objects.
type Stage int

const (
	// BeforeApply is on the fresh namespace, before the driver's first
	// Apply: objects it must adopt as foreign at start.
	BeforeApply Stage = iota + 1
	// AfterApply is once our objects are programmed, beside them: objects
	// another agent adds later.
	AfterApply
	// InPlace is right after Subject.Delete removed some of ours: a
	// foreign change in the same place, which a repair must not undo.
	InPlace
)

// String returns the stage's name.
func (s Stage) String() string {
	switch s {
	case BeforeApply:
		return "before-apply"
	case AfterApply:
		return "after-apply"
	case InPlace:
		return "in-place"
	}
	return fmt.Sprintf("Stage(%d)", int(s))
}

// validate reports what the Subject lacks.
func (s *Subject[D, V]) validate() error {
	var errs []error
	need := func(ok bool, field string) {
		if !ok {
			errs = append(errs, fmt.Errorf("drivertest: Subject.%s is required", field))
		}
	}
	need(len(s.Variants) > 0, "Variants")
	need(s.New != nil, "New")
	need(s.Declare != nil, "Declare")
	need(s.Withdraw != nil, "Withdraw")
	need(s.Check != nil, "Check")
	need(s.Dump != nil, "Dump")
	need(s.Foreign != nil, "Foreign")
	need(s.Delete != nil, "Delete")
	need(len(s.BadInputs) > 0, "BadInputs")
	for i, b := range s.BadInputs {
		need(b.Declare != nil, fmt.Sprintf("BadInputs[%d].Declare", i))
	}
	for i, k := range s.Known {
		need(k.Assertion != "" && k.Lines != nil && k.Why != "", fmt.Sprintf("Known[%d]: Assertion, Lines and Why", i))
	}
	return errors.Join(errs...)
}

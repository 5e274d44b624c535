// Package drivertest is the definition of done of a nodeplane driver,
// written once: a conformance suite that every driver runs against the
// fake namespace (kernelfake) and against the real kernel, in fresh
// network namespaces.
//
// # What it checks
//
// Run takes a Subject, a short description of one driver: how to make an
// instance of each variant (an IP family, a backend…), the representative
// state to declare and how to withdraw it, how to read the kernel slice the
// driver works in (Dump) and to tell that it holds exactly the declared
// state (Check), foreign objects that look like the driver's (Foreign), how
// to delete some of the driver's objects behind its back (Delete), and
// declarations it must refuse (BadInputs). For every variant it runs, each
// check in fresh namespaces:
//
//   - Converge, Idempotent: the declared state is reached, then an Apply,
//     and an Apply after QueueResync, write nothing;
//   - RestartAdopts: a new instance on the programmed kernel writes nothing;
//   - ForeignSurvive, Removal: foreign objects stay byte for byte and in
//     their order through applies, resyncs, restarts and the removal of
//     ours, which leaves the namespace as it would be had the driver never
//     run (compared with a reference namespace that received the same
//     foreign objects);
//   - ExternalDeletionRepaired: a resync puts back what was deleted behind
//     the driver's back, and leaves a foreign change in the same place;
//   - FailureConverges: with writes failing, applying as the loop does
//     converges, and the loop contract holds (object failures wrap
//     dataplane.ErrPartial with a positive RetryAfter; whole failures come
//     only from failed writes);
//   - BadInputRejected: bad declarations fail and write nothing;
//
// and in every check: no panic, no goroutine of the driver's package left,
// and, for a driver that is a dataplane.StatsReporter, DriverStats that
// agree with what it did after every Apply and ApplyDeletions (Writes grew
// when a write succeeded and stayed when none was made, Failing counts the
// objects of the PartialError, none after a success) and once it converged
// (nothing failing, Desired equal to InKernel); for a driver that is a
// dataplane.Planner, a Plan before and after every pass that writes
// nothing, a pass whose Plan was empty that writes nothing, one whose Plan
// listed writes that writes when it succeeds, and an empty Plan after a
// pass that succeeded.
// A driver's known, reported failure can be excused precisely with
// Subject.Known until it is fixed.
//
// # How it is used
//
// A driver package adds one test file with its Subject and two tests:
//
//	func TestConformance(t *testing.T)       { drivertest.Run(t, drivertest.Fake, subject) }
//	func TestKernelConformance(t *testing.T) { drivertest.Run(t, drivertest.Kernel, subject) }
//
// The driver is handed a Recorder in front of the namespace: it counts and
// logs the writes that reach the kernel (netlink writes and runs of
// binaries that write) and fails the next ones on request, so the same
// checks hold on the fake and on the kernel. It is usable on its own, in a
// driver's own tests. Routes, Rules, PermanentNeighbors (with FormatRoute
// and FormatRule), Exec, SameLines and WaitFor keep a Subject short: they
// render kernel objects one line each, with every attribute, run what an
// administrator would, and wait for what the kernel does asynchronously.
//
// # What it never touches
//
// Only namespaces it creates: kernelfake namespaces, and kernel namespaces
// made by internal/testkit/kerneltest (removed when the check ends, also when it
// fails). It never changes the host namespace, starts no goroutine of its
// own, and measures no wall-clock time: drivers get a fake clock that the
// suite moves.
package drivertest

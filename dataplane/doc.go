// Package dataplane holds the Manager and Driver contracts and the Loop that
// drives them: it batches typed messages for the managers, then applies the
// drivers in a fixed phase order, and owns the policy around that — in-sync
// gating, coalescing, throttling, retry with backoff, periodic resync,
// health and in-sync reporting, a standby mode for instances that are not
// the leader, and metrics.
//
// # Contracts
//
// A Manager turns intent into desired state. OnUpdate(msg) records one
// message and sets dirty flags, with no I/O; CompleteDeferredWork turns the
// dirty intent into desired state on its drivers. Messages are plain typed
// structs defined by the package that consumes them; a manager ignores types
// it does not know.
//
// A Driver owns one slice of kernel state. Apply writes the difference
// between desired and actual state (cheap when nothing changed) and may ask,
// through ApplyResult.RetryAfter, to be applied again after a delay;
// QueueResync makes the next Apply re-read the kernel. Phase says when it
// runs within a pass. A driver whose removals must wait until nothing refers
// to them (ip sets) also implements DeletionApplier: Apply runs in its own
// phase and ApplyDeletions in PhaseIPSetsDelete. It is registered once.
//
// # An apply pass
//
// A pass calls CompleteDeferredWork on every manager in registration order,
// then applies the drivers in four steps, each waiting for the one before:
// PhaseIPSetsUpdate; PhaseTunnelL2; PhaseTables alongside PhaseRoutes; then
// PhaseIPSetsDelete with every ApplyDeletions. Drivers of one step run in
// parallel goroutines. A failure does not stop the pass: the other drivers,
// in this step and later ones, still run, so one broken driver harms as
// little as possible (a kernel refuses to delete an ip set that is still
// referenced, so running deletions after a failed table is safe).
//
// # The loop
//
// Run takes messages from a bounded queue (Send waits while it is full,
// TrySend fails) in batches of up to Options.MaxBatch and gives each message
// to every manager in order. Nothing is applied — no CompleteDeferredWork,
// no Apply — until both in-sync markers have been taken from the queue:
// DatastoreInSync (the consumer's first snapshot is complete) and
// InterfacesInSync (the interface monitor has listed the kernel). Managers
// receive the markers as messages too, in order. Messages that arrive before
// then still reach the managers, so their state is complete at the first
// pass.
//
// Once dirty, the loop waits Options.Coalesce for more messages before it
// applies, so a burst costs one pass rather than one per batch. Passes are
// throttled by a token bucket (Options.Throttle). The shortest RetryAfter of
// a pass schedules another pass. Every driver gets QueueResync and a pass
// every Options.ResyncInterval (jittered; per driver with
// WithResyncInterval) to repair drift.
//
// Interface state reaches managers and drivers through the loop: the agent
// wires its interface monitor to Loop.OnLink and Loop.OnAddrs once (the
// Loop is an InterfaceObserver), and the loop hands every link and address
// update, as kernel types, to each manager and driver that implements
// InterfaceObserver (detected at registration), from its own goroutine and
// in order with the messages; a pass follows as after a message.
//
//	mon, _ := ifacemonitor.New(ifacemonitor.Options{Kernel: ns,
//		OnLinkState: func(u ifacemonitor.LinkUpdate) { loop.OnLink(u.Link(), u.State) },
//		OnAddrs:     loop.OnAddrs,
//		OnInSync:    loop.InterfacesInSync})
//
// A driver that learns of other work outside the loop asks for a pass with
// Loop.Wake; a driver that implements Wakeable is handed that function when
// it is registered.
//
// # Failures
//
// One bad object never holds back the rest. A driver that could not write
// some objects (a route the kernel refuses, a rule it rejects) writes
// everything else and returns an error wrapping ErrPartial (a
// *PartialError): it keeps those objects pending and retries them on its own
// backoff through RetryAfter. The loop reports them (Health.LastError,
// FailingObjects, ObjectFailures) and carries on as after a success. The
// drivers keep that bookkeeping in a Ledger (object key → *ObjectError,
// attempts, next retry on a Backoff and the injected clock), whose Err is
// the PartialError and whose RetryAfter is the ApplyResult's.
//
// A driver that implements StatsReporter gives its DriverStats (desired,
// in the kernel, failing, writes) after each Apply: the loop puts them in
// Health.Drivers and DriverApply.Stats.
//
// # Plan and state
//
// A driver that implements Planner says what its next Apply would write,
// without writing: Plan(ctx) returns a Plan, the driver's Writes (an Op —
// WriteAdd, WriteReplace, WriteDelete — on an object of a Kind, in the
// driver's canonical text), in the order Apply would make them. The driver
// decides them with the code its Apply decides with, so an Apply right
// after makes exactly those writes, and an Apply whose Plan is empty
// writes nothing. A driver that implements Stater says what it owns in the
// kernel, what drifted from what it wants (Drift) and what fails (its
// Ledger's errors): State(ctx) returns a State. Loop.Plan and Loop.State
// collect both from every driver that has them, in phase order, at any
// time — a dry run of what an inactive loop would write once active, or a
// status of a running one. A Plan's text reads like a diff:
//
//	routetable-ipv4-254: 2 writes
//	+ route 10.244.1.7/32 dev cali1 proto 78
//	- route 10.244.9.0/24 dev cali9 proto 78
//
// A driver that fails as a whole (it cannot read the kernel, its binary is
// missing) or panics is backed off on its own: the loop queues a full resync
// on it and skips it in later passes until an exponential backoff
// (Options.Backoff, reset by its next success) is over, while every other
// driver and every new message are served at full speed. A failed manager is
// called again at the next pass (and resynced first when it implements
// Resyncer); the loop comes back for it after the same backoff.
//
// Health is reported through Options.OnHealth and Loop.Health; OnInSync is
// called once, after the first successful pass (no manager or driver
// failed; objects that failed on their own do not count). A panic in a manager,
// a driver or a callback becomes a *PanicError (wrapping ErrPanic) in the
// health report; the loop carries on. Run returns when its context ends,
// after the pass in progress, if any, has returned.
//
// # Standby
//
// An agent that runs several instances and elects a leader keeps the
// others inactive (Options.Inactive, Loop.SetActive(false)). An inactive
// loop takes messages and gives them to its managers as usual and, past the
// in-sync gate, runs standby passes: CompleteDeferredWork of every manager
// except those that write to the kernel themselves (the Resyncers), so the
// drivers hold the complete desired state. It applies no driver and calls no
// Resyncer, so it writes nothing. SetActive(true) turns it active without a
// restart: it queues a resync on every driver and Resyncer (another instance
// may have changed the kernel meanwhile) and runs an apply pass at once.
// SetActive(false) takes effect after the pass in progress; Health.Active
// says which mode the loop is in.
//
// # Metrics
//
// Options.Metrics receives the loop's measurements through the small
// Metrics interface, which an agent backs with Prometheus or anything else
// (the package imports no metrics library): every driver Apply and
// ApplyDeletions with its duration and outcome (succeeded, partial with the
// objects that failed, failed), every manager's CompleteDeferredWork, every
// pass, the input queue's depth, and every resync the loop asks for and why
// (periodic, after a failure, on activation). It is called from the loop's
// goroutine only.
//
// # Concurrency
//
// Managers are called only from the loop's goroutine, never during a
// driver's Apply. A driver's own methods are never called concurrently, but
// different drivers run at the same time, so drivers must not share
// unsynchronised state with each other.
//
// # What it never touches
//
// The package does no I/O of its own and touches no kernel state: all of
// that is in the drivers. It starts goroutines only inside Run (one per
// extra driver of a step, joined before the step ends), and uses time only
// through the injected clock.Clock.
package dataplane

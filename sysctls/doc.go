// Package sysctls is the driver of the kernel's static
// configuration: the sysctls a node must hold for pod networking to work
// and be safe — IPv4 and IPv6 forwarding, a reverse-path filter that does
// not drop asymmetric traffic, unprivileged BPF off (Defaults) — kept
// idempotently, with a report of what it changed and what it could not.
//
// # What it owns
//
// The values of the sysctls in Options.Settings, nothing else. A setting
// holds a Value and may Accept others: a check reads each sysctl, leaves an
// acceptable value alone (it never rewrites a right value, nor one an
// administrator chose among the acceptable), writes Value over any other,
// and reads it back. A check that finds everything right writes nothing.
//
// Keys under net are per network namespace and go through Options.Kernel
// (a kernel.Namespace). Any other key is machine-wide — the kernel does not
// namespace it — and goes through Options.Host: ProcSys writes the
// machine's own /proc/sys, ReadOnly(ProcSys{}) only reads and reports, and
// nil leaves such keys alone (reported as ErrNoHostAccess). An agent that
// runs in its own network namespace, or a test, must think before it gives
// a writable Host: kernel.unprivileged_bpf_disabled changes the whole
// machine, and its value 1 cannot be undone before a reboot.
//
// # How it is used
//
//	m, _ := sysctls.New(sysctls.Options{
//		Kernel:   ns,                 // kernel.Open or kernel.OpenCurrent
//		Host:     sysctls.ProcSys{},  // or sysctls.ReadOnly(sysctls.ProcSys{}), or nil
//		Settings: sysctls.Defaults(), // or the agent's own list
//		OnReport: func(r sysctls.Report) { log.Print(r) },
//	})
//	_ = loop.AddDriver(m)
//
// The Driver is a dataplane.Driver: its Apply checks every setting at the
// first call and after QueueResync (the loop's periodic resync, which
// repairs values changed behind the agent's back, and its resync after a
// failure), and otherwise only the settings declared since (SetGroup) and
// those whose retry is due; with nothing due it does no I/O. An inactive
// loop never applies it, so a standby agent writes nothing. Without a
// loop, Check checks at once. Managers hand it their own settings with
// SetGroup (the per-interface sysctls of an endpoint's interface, say),
// ask for a group to be checked again with RecheckGroup (its interface
// was re-created with the kernel's defaults), read a setting's failure
// back with Failure, and learn the outcome of every check through Watch.
//
// Each check makes a Report: per setting, the value found, the value left,
// and whether it was kept, changed or failed (Result.Err wraps
// ErrNotApplied and the cause: ErrNoHostAccess, ErrReadOnly,
// kernel.ErrNotFound for a key this kernel lacks, kernel.ErrInvalid for a
// refused value). OnReport receives the reports that changed or failed
// something. A failed Required setting (forwarding, in Defaults) fails the
// Apply as a whole, so the loop's health shows the Driver failed and the
// loop retries it with backoff; any other failed setting is a
// *dataplane.ObjectError in the Apply's *dataplane.PartialError, kept in a
// dataplane.Ledger and retried on its own backoff. Stats gives the
// dataplane.DriverStats. Plan reads the settings the next Apply would
// check and lists the ones it would write; State reads every setting and
// reports its value, the drift and the failing settings
// (dataplane.Planner and dataplane.Stater).
//
// # What it never touches
//
// Any sysctl not in its settings, and any value already acceptable. It
// never creates a sysctl (a missing key is a failure). It starts no
// goroutine.
package sysctls

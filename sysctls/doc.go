// Package sysctls is the node manager for the kernel's static
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
//	_ = loop.AddManager(m)
//
// The Manager takes no message. It writes to the kernel itself, in
// CompleteDeferredWork, and is a dataplane.Resyncer: the loop calls it at
// every pass, and it checks when a check is due — at the first call, after
// QueueResync (the loop resyncs it after a failure and when it becomes
// active) and once Options.RecheckInterval has passed, which repairs values
// changed behind the agent's back. An inactive loop never calls it, so a
// standby agent writes nothing. Without a loop, Check checks at once.
//
// Each check makes a Report: per setting, the value found, the value left,
// and whether it was kept, changed or failed (Result.Err wraps
// ErrNotApplied and the cause: ErrNoHostAccess, ErrReadOnly,
// kernel.ErrNotFound for a key this kernel lacks, kernel.ErrInvalid for a
// refused value). OnReport receives the reports that changed or failed
// something. A failed Required setting (forwarding, in Defaults) also fails
// CompleteDeferredWork, so the loop's health shows it and the loop retries
// with backoff; other failures are reported and tried again at the next
// recheck.
//
// # What it never touches
//
// Any sysctl not in its settings, and any value already acceptable. It
// never creates a sysctl (a missing key is a failure). It starts no
// goroutine.
package sysctls

package dataplane

// DriverStats is the one shape of a driver's counts: what it wants, what
// it holds in the kernel, what fails, and how many writes it made. Every
// driver of the library reports it through StatsReporter; the loop puts
// it in Health.Drivers and DriverApply.Stats.
type DriverStats struct {
	// Desired is how many objects the driver wants in the kernel.
	Desired int
	// InKernel is how many objects of the driver the kernel holds, as the
	// driver last read or wrote them.
	InKernel int
	// Failing is how many objects failed and wait for their retry (the
	// Ledger's Len).
	Failing int
	// Writes counts the kernel writes (creations, changes and deletions
	// of objects) the driver made since it was created.
	Writes uint64
}

// StatsReporter is implemented by drivers that report their DriverStats.
// The loop calls Stats after each Apply of the driver, from the goroutine
// that ran it; it must be cheap and do no I/O.
type StatsReporter interface {
	// Stats returns the driver's counts now.
	Stats() DriverStats
}

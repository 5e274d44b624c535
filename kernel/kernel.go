package kernel

// DumpAttempts is how many times a dump that the kernel reports as
// interrupted by a concurrent change is run before the call gives up with
// an error wrapping ErrDumpInterrupted.
const DumpAttempts = 5

// *Namespace is a Kernel on every OS (elsewhere than on Linux, every
// method fails with ErrNotSupported).
var _ Kernel = (*Namespace)(nil)

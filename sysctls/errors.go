package sysctls

import "errors"

// Sentinel errors. An error's text names the package once; errors.Is
// matches every sentinel it speaks of, and the kernel package's sentinels
// where a read or write failed there (kernel.ErrNotFound for a key this
// kernel lacks, kernel.ErrInvalid for a value it refuses).
var (
	// ErrInvalidOptions reports an Options value that New refuses,
	// including a Setting with a malformed key.
	ErrInvalidOptions = errors.New("sysctls: invalid options")
	// ErrNoHostAccess reports a setting outside net.* (a machine-wide
	// key such as kernel.unprivileged_bpf_disabled) while Options.Host is
	// nil: it was neither read nor written.
	ErrNoHostAccess = errors.New("sysctls: no access to machine-wide sysctls")
	// ErrReadOnly reports a write refused by a ReadOnly wrapper.
	ErrReadOnly = errors.New("sysctls: read-only: not written")
	// ErrNotApplied reports a setting that could not be brought to an
	// acceptable value: it could not be read, the write failed, or the
	// value read back after it is still not acceptable. Result.Err
	// wraps it with the cause.
	ErrNotApplied = errors.New("sysctls: setting not applied")
)

package ipsets

import "errors"

// Sentinel errors. Every error the package returns starts with "ipsets: "
// once and wraps one of them or one of package netfilter's set sentinels
// (netfilter.ErrInvalidMember and the like, shared by every backend of
// netfilter.Sets), so callers can test with errors.Is; it matches every
// sentinel its text speaks of.
var (
	// ErrInvalidOptions reports an Options value out of range.
	ErrInvalidOptions = errors.New("ipsets: invalid options")
	// ErrRestore reports a failed `ipset restore`. A
	// *command.RestoreError in the error's tree keeps the input, the
	// failing line and what ipset said.
	ErrRestore = errors.New("ipsets: ipset restore failed")
	// ErrCommand reports another failed ipset command (list, save,
	// destroy).
	ErrCommand = errors.New("ipsets: ipset command failed")
	// ErrParse reports ipset output the package could not read.
	ErrParse = errors.New("ipsets: cannot parse ipset output")
)

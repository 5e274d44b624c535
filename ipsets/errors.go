package ipsets

import "errors"

// Sentinel errors. Every error the package returns starts with "ipsets: "
// once and wraps one of them, so callers can test with errors.Is; it
// matches every sentinel its text speaks of.
var (
	// ErrInvalidOptions reports an Options value out of range.
	ErrInvalidOptions = errors.New("ipsets: invalid options")
	// ErrInvalidName reports a set name with characters the package does
	// not allow, or an empty name.
	ErrInvalidName = errors.New("ipsets: invalid set name")
	// ErrNameTooLong reports a set name that is longer than MaxNameLength
	// bytes once prefixed.
	ErrNameTooLong = errors.New("ipsets: set name too long")
	// ErrUnknownType reports a SetType the package does not support.
	ErrUnknownType = errors.New("ipsets: unknown set type")
	// ErrWrongFamily reports a set or member of the other address family.
	ErrWrongFamily = errors.New("ipsets: wrong address family")
	// ErrInvalidMember reports a member that is malformed or does not fit
	// its set's type.
	ErrInvalidMember = errors.New("ipsets: invalid member")
	// ErrInvalidMetadata reports a SetMetadata with an invalid size or
	// range.
	ErrInvalidMetadata = errors.New("ipsets: invalid set metadata")
	// ErrTooManyMembers reports a set that would hold more members than its
	// MaxSize.
	ErrTooManyMembers = errors.New("ipsets: too many members")
	// ErrUnknownSet reports a set name that is not in the desired state.
	ErrUnknownSet = errors.New("ipsets: unknown set")
	// ErrSetInUse reports a set that a kernel component (an iptables rule)
	// refers to while it must be destroyed: because it is no longer
	// desired, or because its type must change (the kernel can swap only
	// sets of the same type and family). The set stays as it is until the
	// reference goes.
	ErrSetInUse = errors.New("ipsets: set in use")
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

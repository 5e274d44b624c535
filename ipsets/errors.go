package ipsets

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error the package returns wraps one of them, so
// callers can test with errors.Is.
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
	// ErrRestore reports a failed `ipset restore`. A *RestoreError is in
	// the error's tree.
	ErrRestore = errors.New("ipsets: ipset restore failed")
	// ErrCommand reports another failed ipset command (list, save,
	// destroy).
	ErrCommand = errors.New("ipsets: ipset command failed")
	// ErrParse reports ipset output the package could not read.
	ErrParse = errors.New("ipsets: cannot parse ipset output")
)

// RestoreError is a failed `ipset restore`: which input line failed, the
// input around it, and what the command printed. It wraps ErrRestore and
// the runner's error.
type RestoreError struct {
	// Line is the 1-based input line ipset reported ("Error in line N"),
	// or 0 when it named none.
	Line int
	// Input is an excerpt of the input: a few lines around Line, or the
	// first lines when Line is 0. Each line is prefixed with its number.
	Input string
	// Stdout and Stderr are what the command printed.
	Stdout, Stderr string
	// Err is the runner's error.
	Err error
}

// Error names the failing line and repeats ipset's message.
func (e *RestoreError) Error() string {
	var b strings.Builder
	b.WriteString(ErrRestore.Error())
	if msg := strings.TrimSpace(e.Stderr); msg != "" {
		b.WriteString(": ")
		b.WriteString(msg)
	} else if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Input != "" {
		fmt.Fprintf(&b, "; input:\n%s", e.Input)
	}
	return b.String()
}

// Unwrap returns ErrRestore and the runner's error.
func (e *RestoreError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrRestore}
	}
	return []error{ErrRestore, e.Err}
}

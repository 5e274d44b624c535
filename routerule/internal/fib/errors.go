package fib

import "errors"

// The errors of FromRequest. Their texts carry no package prefix: the
// package is internal, and the errors of its callers name them.
var (
	// ErrFamilyMismatch is returned by FromRequest when the source and the
	// destination are of different families; the netlink library refuses
	// such a rule before sending it.
	ErrFamilyMismatch = errors.New("source and destination ip are not the same IP family")
	// ErrPrefixLength is returned by FromRequest for a source or
	// destination prefix longer than its family's addresses; the kernel
	// refuses such a rule with EINVAL.
	ErrPrefixLength = errors.New("prefix longer than the address")
)

package ipfamily

import "errors"

// Errors returned by Check, CheckPrefix and CheckNet.
var (
	// ErrInvalidFamily: the Family is neither IPv4 nor IPv6.
	ErrInvalidFamily = errors.New("ipfamily: invalid IP family")
	// ErrInvalidAddress: the address or prefix is the zero value or
	// otherwise invalid.
	ErrInvalidAddress = errors.New("ipfamily: invalid address")
	// ErrWrongFamily: the address is of the other family.
	ErrWrongFamily = errors.New("ipfamily: address of the wrong family")
	// ErrHostBits: a network prefix has bits set after its length.
	ErrHostBits = errors.New("ipfamily: prefix has host bits set")
)

package netfilter

import (
	"errors"
	"fmt"

	"github.com/nodeplane/nodeplane/internal/errs"
)

// Sentinel errors. Every error of the package starts with "netfilter: "
// once, then says what is wrong; errors.Is matches every sentinel the text
// speaks of (a rule whose prefix is of the other IP family matches both
// ErrInvalidRule and ErrWrongFamily). A backend that quotes one of these
// errors under its own prefix keeps them matchable.
var (
	// ErrInvalidRule is matched by every error about a malformed rule.
	ErrInvalidRule = errors.New("netfilter: invalid rule")
	// ErrWrongFamily: the rule mentions an address or feature of the
	// other IP family, or a set or member is of the other family than its
	// backend or set.
	ErrWrongFamily = errors.New("netfilter: wrong IP family")
	// ErrInvalidChainName: empty, too long (MaxChainNameLength), with
	// characters a backend does not take, or the name of a built-in chain
	// or target.
	ErrInvalidChainName = errors.New("netfilter: invalid chain name")
	// ErrInvalidHashPrefix: a hash prefix too long or with characters a
	// rule comment cannot hold (ValidateHashPrefix).
	ErrInvalidHashPrefix = errors.New("netfilter: invalid hash prefix")
	// ErrInvalidSetName: a set name with characters other than ASCII
	// letters, digits and "_.:-", or an empty one (ValidateSetName).
	ErrInvalidSetName = errors.New("netfilter: invalid set name")
	// ErrSetNameTooLong: a set name longer than MaxNameLength bytes once
	// prefixed.
	ErrSetNameTooLong = errors.New("netfilter: set name too long")
	// ErrUnknownSetType: a SetType that is not one of the supported ones,
	// or one the backend cannot hold.
	ErrUnknownSetType = errors.New("netfilter: unknown set type")
	// ErrUnknownJumpPlacement: a JumpPlacement that is not one of the
	// constants (JumpPlacement.Validate).
	ErrUnknownJumpPlacement = errors.New("netfilter: unknown jump placement")
	// ErrInvalidMember: a set member that is malformed or does not fit its
	// set's type.
	ErrInvalidMember = errors.New("netfilter: invalid member")
	// ErrInvalidSetMetadata: a SetMetadata with an invalid size or range.
	ErrInvalidSetMetadata = errors.New("netfilter: invalid set metadata")
	// ErrTooManyMembers: a set that would hold more members than its
	// MaxSize.
	ErrTooManyMembers = errors.New("netfilter: too many members")
	// ErrUnknownSet: a set name that is not a desired set of the backend.
	ErrUnknownSet = errors.New("netfilter: unknown set")
	// ErrSetInUse: a set that a rule refers to while it must be destroyed
	// (no longer desired, or its type must change); it stays as it is
	// until the reference goes.
	ErrSetInUse = errors.New("netfilter: set in use")
	// ErrUnsupported is matched by the error of a backend that cannot
	// render a criterion or action of a valid rule.
	ErrUnsupported = errors.New("netfilter: not supported by this backend")
)

// errRulef returns an error matching ErrInvalidRule.
func errRulef(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRule, fmt.Sprintf(format, a...))
}

// errFamilyf returns an error matching ErrInvalidRule and ErrWrongFamily.
func errFamilyf(format string, a ...any) error {
	return errs.Also(errRulef(format, a...), ErrWrongFamily)
}

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
	// other IP family.
	ErrWrongFamily = errors.New("netfilter: rule does not fit the table's IP family")
	// ErrInvalidChainName: empty, too long (MaxChainNameLength), with
	// characters a backend does not take, or the name of a built-in chain
	// or target.
	ErrInvalidChainName = errors.New("netfilter: invalid chain name")
	// ErrInvalidHashPrefix: a hash prefix too long or with characters a
	// rule comment cannot hold (ValidateHashPrefix).
	ErrInvalidHashPrefix = errors.New("netfilter: invalid hash prefix")
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

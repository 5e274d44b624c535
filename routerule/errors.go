package routerule

import "errors"

// Sentinel errors. Every error about bad input wraps ErrInvalidRule or
// ErrInvalidOptions. When only some rules failed, Apply's error wraps
// dataplane.ErrPartial: a *dataplane.PartialError whose objects are
// *dataplane.ObjectError (Kind "rule", Op "add" or "delete") wrapping
// ErrRuleFailed and the kernel's error (a *kernel.OpError with its errno),
// or ErrAmbiguous. An error's text names
// the package once: an error that wraps two sentinels (ErrNotOwned inside
// ErrInvalidRule, say) prints "routerule: " once and matches both.
var (
	// ErrInvalidOptions reports an Options value that New refuses.
	ErrInvalidOptions = errors.New("routerule: invalid options")
	// ErrInvalidRule reports a rule that is malformed, of the wrong family,
	// outside the owned set or in conflict with another. Nothing is
	// changed.
	ErrInvalidRule = errors.New("routerule: invalid rule")
	// ErrNotOwned reports a rule whose priority (or lookup table) is not
	// owned by the Rules instance: it could never be recognised as ours in
	// the kernel. It comes wrapped together with ErrInvalidRule.
	ErrNotOwned = errors.New("routerule: rule not owned")
	// ErrConflict reports two rules that the kernel cannot hold at once:
	// they differ only in Invert or in the goto target. It comes wrapped
	// together with ErrInvalidRule.
	ErrConflict = errors.New("routerule: conflicting rules")
	// ErrRuleFailed classifies a rule the kernel refused to add or delete.
	// It is tried again on its own backoff.
	ErrRuleFailed = errors.New("routerule: rule write failed")
	// ErrAmbiguous classifies a rule that cannot be written because the
	// kernel's wildcard matching would hit another rule of ours: a delete
	// that would remove an earlier rule instead, an add the kernel would
	// refuse as a duplicate. It is tried again on its own backoff.
	ErrAmbiguous = errors.New("routerule: write ambiguous under the kernel's rule matching")
)

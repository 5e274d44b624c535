package iptables

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/dataplane"
)

// Sentinel errors. Every error of the package starts with "iptables: "
// once, then says what is wrong; errors.Is matches every sentinel the text
// speaks of. A rule the Table refuses matches the sentinels of package
// netfilter: netfilter.ErrInvalidRule, and netfilter.ErrWrongFamily or
// netfilter.ErrInvalidChainName where that is the cause; a chain name the
// Table refuses matches netfilter.ErrInvalidChainName.
var (
	// ErrInvalidOptions reports an Options field out of range.
	ErrInvalidOptions = errors.New("iptables: invalid options")
	// ErrNotOwned reports a chain given to SetChains or RemoveChains whose
	// name lacks the Table's ChainPrefix.
	ErrNotOwned = errors.New("iptables: chain does not carry the table's prefix")
	// ErrNotBuiltin reports a hook given to InsertRules or AppendRules
	// that is not a built-in chain of the Table's table.
	ErrNotBuiltin = errors.New("iptables: not a built-in chain of this table")
	// ErrDuplicateChain reports a chain named twice in one SetChains
	// call.
	ErrDuplicateChain = errors.New("iptables: chain given twice")
	// ErrUnknownChain reports a programmed rule that jumps to a chain with
	// the Table's prefix that is not declared. Apply does not write the
	// object holding that rule while it stands.
	ErrUnknownChain = errors.New("iptables: jump to an undeclared owned chain")
	// ErrChainLoop reports owned chains whose jumps form a loop, which the
	// kernel refuses. Apply does not write the chain whose jump closes the
	// loop while it stands.
	ErrChainLoop = errors.New("iptables: owned chains jump in a loop")
	// ErrRefused reports an object whose change the kernel (or the restore
	// binary) refused, or would refuse: it jumps to a foreign chain or
	// matches an ip set that the kernel does not have. Apply wrote
	// everything else and tries it again on its own backoff.
	ErrRefused = errors.New("iptables: change refused by the kernel")
	// ErrChainInUse reports an owned chain that is no longer wanted but
	// that a foreign rule still jumps to: it is flushed and kept, and
	// deleted by the first Apply that reads nothing jumping to it.
	ErrChainInUse = errors.New("iptables: unwanted chain still referenced by a foreign rule")
	// ErrSave reports a failure to read the kernel's tables.
	ErrSave = errors.New("iptables: reading the table failed")
	// ErrRestore reports a failed restore transaction; a
	// *command.RestoreError in the error's tree keeps the input, the
	// failing line and the binary's output.
	ErrRestore = errors.New("iptables: restore failed")
	// ErrIncompatible reports a table that iptables-nft-save cannot show
	// because it holds native nftables rules.
	ErrIncompatible = errors.New("iptables: table is incompatible with iptables-nft (native nftables rules)")
	// ErrNoBackend reports that DetectBackend found neither backend's
	// binaries.
	ErrNoBackend = errors.New("iptables: no iptables backend found")
)

// failedLineRE matches the ways iptables-restore names the failing line:
// "line 3 failed", "Error occurred at line: 3", "line 3: CHAIN_DEL failed".
var failedLineRE = regexp.MustCompile(`(?:line (\d+) failed|Error occurred at line: (\d+)|line (\d+): )`)

// newRestoreError returns the error of a failed restore of input by argv:
// ErrRestore and the *command.RestoreError that keeps the input, the
// failing line and the binary's output.
func newRestoreError(argv []string, input, stdout []byte, err error) error {
	return restoreError(command.NewRestoreError(argv, input, stdout, err, failedLineRE))
}

// restoreError wraps re in ErrRestore.
func restoreError(re *command.RestoreError) error {
	return fmt.Errorf("%w: %w", ErrRestore, re)
}

// objectError returns the error of an object a Table did not write: an
// owned chain (its content, or its deletion), or our rules in a built-in
// chain (named by the built-in chain), both of Kind "chain". The kernel
// keeps its current version of the object meanwhile; an owned chain
// refused before it ever existed is created empty, so that the jumps to it
// stay valid. reason is ErrRefused, ErrChainInUse, ErrUnknownChain or
// ErrChainLoop; err, when not nil, is the error of a refused line
// (ErrRestore and a *command.RestoreError without its Input: detail
// quotes the line). The Table's ledger sets Attempts and RetryAt: zero
// when only a new declaration can change the outcome (ErrUnknownChain,
// ErrChainLoop).
func objectError(chain string, reason error, detail string, err error) *dataplane.ObjectError {
	return &dataplane.ObjectError{Driver: "iptables", Kind: kindChain, Name: chain, Reason: reason, Detail: detail, Err: err}
}

// kindChain is the kind of a Table's objects in its errors and plans.
const kindChain dataplane.ObjectKind = "chain"

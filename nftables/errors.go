package nftables

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Sentinel errors. Every error of the package starts with "nftables: "
// once, then says what is wrong; errors.Is matches every sentinel the text
// speaks of. A rule the Table refuses also matches the sentinels of
// package netfilter (netfilter.ErrInvalidRule, and ErrWrongFamily,
// ErrInvalidChainName or ErrUnsupported where that is the cause).
var (
	// ErrInvalidOptions reports an Options field out of range.
	ErrInvalidOptions = errors.New("nftables: invalid options")
	// ErrNotOwned reports a chain name given to SetChains or RemoveChains,
	// or as the target of a rule's or a verdict-map element's jump or goto,
	// that lacks Options.ChainPrefix, or that is the name of one of the
	// Table's base chains.
	ErrNotOwned = errors.New("nftables: chain name not the table's to give")
	// ErrNoSuchHook reports a hook given to InsertRules, AppendRules or
	// SetPolicy that the Table's role does not offer.
	ErrNoSuchHook = errors.New("nftables: hook not offered by the table's role")
	// ErrDuplicate reports a chain or set named twice in one call.
	ErrDuplicate = errors.New("nftables: name given twice")
	// ErrInvalidSet reports a set declaration that is not well formed.
	ErrInvalidSet = errors.New("nftables: invalid set")
	// ErrInvalidElement reports an element that does not fit its set.
	ErrInvalidElement = errors.New("nftables: invalid element")
	// ErrUnknownSet reports a rule or element change that names a set
	// the Table does not declare, or a set of the wrong kind (a verdict
	// map in a set criterion, a set in a verdict-map action).
	ErrUnknownSet = errors.New("nftables: unknown set")
	// ErrSetInUse reports RemoveSets of a set that declared rules still
	// use.
	ErrSetInUse = errors.New("nftables: set still used by declared rules")
	// ErrUnknownChain reports a programmed rule or verdict-map element
	// that jumps to a chain the Table does not declare. Apply does not
	// write the object holding it (a *dataplane.ObjectError with this
	// Reason) while it stands.
	ErrUnknownChain = errors.New("nftables: jump to an undeclared chain")
	// ErrChainLoop reports chains whose jumps (through rules and verdict
	// maps) form a loop, which the kernel refuses. Apply does not write the
	// chain whose jump closes the loop while it stands.
	ErrChainLoop = errors.New("nftables: chains jump in a loop")
	// ErrRefused reports an object whose change the kernel refused: Apply
	// wrote everything else and tries it again on its own backoff.
	ErrRefused = errors.New("nftables: change refused by the kernel")
	// ErrForeignTable reports a table of Options.Name that holds rules and
	// not one carrying Options.HashPrefix: another program's table of that
	// name (kube-proxy's, a firewall's). Apply, Plan and RemoveTable write
	// nothing to it; give the Table another name. It also matches ErrRead.
	ErrForeignTable = errors.New("nftables: the table of that name is someone else's")
	// ErrRead reports a failure to read the table from the kernel.
	ErrRead = errors.New("nftables: reading the table failed")
	// ErrWrite reports a transaction that failed as a whole (the socket,
	// or a refusal the kernel did not attribute to one object).
	ErrWrite = errors.New("nftables: transaction failed")
)

// quoted returns an error of package netfilter under the package's own
// prefix, matching everything it matches.
func quoted(err error) error {
	return errs.Also(errors.New("nftables: "+strings.TrimPrefix(err.Error(), "netfilter: ")), err)
}

// errRulef returns an error of the package matching
// netfilter.ErrInvalidRule.
func errRulef(format string, a ...any) error {
	return errs.Also(fmt.Errorf("nftables: invalid rule: "+format, a...), netfilter.ErrInvalidRule)
}

// errUnsupportedf returns an error matching netfilter.ErrUnsupported (and
// ErrInvalidRule: the rule cannot be declared).
func errUnsupportedf(format string, a ...any) error {
	return errs.Also(fmt.Errorf("nftables: "+format, a...), netfilter.ErrUnsupported, netfilter.ErrInvalidRule)
}

// The kinds of the objects of a Table that an Apply writes, and holds
// back, one by one: the Kind of their *dataplane.ObjectError (Driver
// "nftables"), and of the Writes of a Plan.
const (
	// KindChain is a chain's content (its rules), its creation or its
	// deletion; the base chains of the hooks are chains too.
	KindChain dataplane.ObjectKind = "chain"
	// KindSet is a set's or verdict map's creation or deletion.
	KindSet dataplane.ObjectKind = "set"
	// KindElement is one element of a set or verdict map.
	KindElement dataplane.ObjectKind = "element"
)

// driverName is the Driver of the Table's *dataplane.ObjectError.
const driverName = "nftables"

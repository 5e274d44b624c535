package nftables

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/objfail"
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
	// write the object holding it (see ObjectError) while it stands.
	ErrUnknownChain = errors.New("nftables: jump to an undeclared chain")
	// ErrChainLoop reports chains whose jumps (through rules and verdict
	// maps) form a loop, which the kernel refuses. Apply does not write the
	// chain whose jump closes the loop while it stands.
	ErrChainLoop = errors.New("nftables: chains jump in a loop")
	// ErrRefused reports an object whose change the kernel refused: Apply
	// wrote everything else and tries it again on its own backoff.
	ErrRefused = errors.New("nftables: change refused by the kernel")
	// ErrRead reports a failure to read the table from the kernel.
	ErrRead = errors.New("nftables: reading the table failed")
	// ErrWrite reports a transaction that failed as a whole (the socket,
	// or a refusal the kernel did not attribute to one object).
	ErrWrite = errors.New("nftables: transaction failed")
)

// bare returns a sentinel's text without the package prefix.
func bare(sentinel error) string { return strings.TrimPrefix(sentinel.Error(), "nftables: ") }

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

// ObjectKind says what an ObjectError is about.
type ObjectKind string

// The objects of a Table that an Apply writes, and holds back, one by one.
const (
	// KindChain is a chain's content (its rules), its creation or its
	// deletion; the base chains of the hooks are chains too.
	KindChain ObjectKind = "chain"
	// KindSet is a set's or verdict map's creation or deletion.
	KindSet ObjectKind = "set"
	// KindElement is one element of a set or verdict map.
	KindElement ObjectKind = "element"
)

// ObjectError is one object of a Table that an Apply did not write: a
// chain, a set or an element. The kernel keeps its current version of the
// object meanwhile; a chain refused before it ever existed is created
// empty, so that the jumps to it stay valid.
type ObjectError struct {
	// Kind and Name name the object: a chain's or set's name, or
	// "set element" for an element (such as "svc 10.0.0.1 . tcp . 80").
	Kind ObjectKind
	Name string
	// Reason is the sentinel: ErrRefused, ErrUnknownChain or ErrChainLoop.
	Reason error
	// Detail says what happened, without the package prefix.
	Detail string
	// Err is the kernel's error (an errno) for a refused object, or nil.
	Err error
	// RetryAt is when Apply tries the object again (the loop is asked to
	// call it then through ApplyResult.RetryAfter); zero when only a new
	// declaration can change the outcome (ErrUnknownChain, ErrChainLoop).
	// A new declaration of the object also retries it at once.
	RetryAt time.Time
}

// Error says which object failed and why, with the package prefix once.
func (e *ObjectError) Error() string { return "nftables: " + e.text() }

func (e *ObjectError) text() string {
	return fmt.Sprintf("%s %s: %s: %s", e.Kind, e.Name, bare(e.Reason), e.Detail)
}

// Unwrap returns the reason and the underlying error.
func (e *ObjectError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Reason}
	}
	return []error{e.Reason, e.Err}
}

// PartialError is the error of an Apply that wrote everything it could
// while some objects were not written. It wraps a *dataplane.PartialError
// (so errors.Is(err, dataplane.ErrPartial) holds and a dataplane.Loop
// treats the failure as the objects', not the Table's) and, through it,
// every *ObjectError.
type PartialError struct {
	// Objects are the objects not written, sorted by kind and name.
	Objects []*ObjectError
	partial *dataplane.PartialError
}

// maxPartialText bounds the objects an Error text lists.
const maxPartialText = 10

// newPartialError returns nil for no objects; waiting of them were not
// tried because their retry is not due.
func newPartialError(objs []*ObjectError, waiting int) error {
	if len(objs) == 0 {
		return nil
	}
	return &PartialError{Objects: objs, partial: objfail.Partial(objs, waiting)}
}

// Error counts the objects and says for the first few why they were not
// written.
func (e *PartialError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nftables: %d object(s) not written", len(e.Objects))
	for i, o := range e.Objects {
		if i == maxPartialText {
			fmt.Fprintf(&b, "; and %d more", len(e.Objects)-i)
			break
		}
		b.WriteString("; ")
		b.WriteString(o.text())
	}
	return b.String()
}

// Unwrap returns the dataplane.PartialError that holds the objects' errors.
func (e *PartialError) Unwrap() error { return e.partial }

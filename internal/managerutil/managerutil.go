// Package managerutil holds what the node managers (endpoints, masquerade,
// hostips, floatingips, serviceloop, sysctls) share in their own code: the
// checks of their Options, made in order and reported as one error wrapping
// the package's sentinel (Check); the quoting of another package's error
// under a sentinel, so that its text names the package once (Quote,
// Detail); the invalid messages a manager holds until its next
// CompleteDeferredWork reports them (Rejected); the defaults of Logger and
// Name; and the map helpers of their state (SetList, SortedValues). Where
// a manager puts the jumps to its chains is the rule model's
// (netfilter.JumpPlacement, netfilter.DeclareJumps).
//
// It owns nothing and does no I/O. What the managers' tests share is in
// internal/testkit/managertest.
package managerutil

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// IsNil reports whether v is nil or a nil pointer in an interface.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// Detail returns err's text without the "package: " prefix it starts with,
// for quoting it under another package's prefix.
func Detail(err error) string {
	s := err.Error()
	if i := strings.Index(s, ": "); i > 0 && !strings.ContainsAny(s[:i], " \t") {
		return s[i+2:]
	}
	return s
}

// Invalid returns an error wrapping sentinel whose text is the sentinel's,
// ": " and the formatted problem.
func Invalid(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}

// Quote returns an error whose text is sentinel's, then each of context,
// then cause's text without its package prefix (Detail), joined by ": ";
// errors.Is matches both sentinel and cause's own sentinels.
func Quote(sentinel, cause error, context ...string) error {
	parts := append(context[:len(context):len(context)], Detail(cause))
	return errs.Also(fmt.Errorf("%w: %s", sentinel, strings.Join(parts, ": ")), cause)
}

// Logger returns l, or a Logger that discards everything when l is nil.
func Logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Name returns name, or, when it is empty, base and the family's version:
// "masquerade-v4", "masquerade-v6".
func Name(name, base string, f ipfamily.Family) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("%s-v%d", base, int(f))
}

// SetList sets m[key] to list, or deletes key when list is empty, and
// reports whether m changed: a list equal to the one held changes nothing.
func SetList[K, V comparable](m map[K][]V, key K, list []V) bool {
	old, had := m[key]
	switch {
	case len(list) == 0 && had:
		delete(m, key)
		return true
	case len(list) > 0 && !slices.Equal(old, list):
		m[key] = list
		return true
	}
	return false
}

// SortedValues returns the values of m sorted by cmp, in a slice that is
// not nil even when m is empty.
func SortedValues[K comparable, V any](m map[K]V, cmp func(a, b V) int) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, cmp)
	return out
}

// Rejected holds the errors of the invalid messages a manager received
// since its last CompleteDeferredWork, which reports each of them once.
// The zero value holds none.
type Rejected struct {
	errs []error
}

// Add holds err until the next Report.
func (r *Rejected) Add(err error) { r.errs = append(r.errs, err) }

// Report returns the errors held, followed by more (nil ones left out),
// joined with errors.Join, and forgets those held. It returns nil when
// there is no error at all.
func (r *Rejected) Report(more ...error) error {
	all := append(r.errs, more...)
	r.errs = nil
	return errors.Join(all...)
}

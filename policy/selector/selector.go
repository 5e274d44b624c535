package selector

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// Op is how a Requirement tests a label.
type Op uint8

const (
	// Equals: the label is present with the one value.
	Equals Op = iota + 1
	// NotEquals: the label is absent, or has another value than the one.
	NotEquals
	// In: the label is present with one of the values.
	In
	// NotIn: the label is absent, or has none of the values.
	NotIn
	// Exists: the label is present (no values).
	Exists
	// DoesNotExist: the label is absent (no values).
	DoesNotExist
)

var opNames = [...]string{Equals: "Equals", NotEquals: "NotEquals", In: "In", NotIn: "NotIn",
	Exists: "Exists", DoesNotExist: "DoesNotExist"}

// String returns the operator's name ("Equals", "NotIn" …).
func (o Op) String() string {
	if o >= Equals && o <= DoesNotExist {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// MarshalText returns String.
func (o Op) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText takes the String of an operator.
func (o *Op) UnmarshalText(b []byte) error {
	v, err := textform.Parse(b, Equals, NotEquals, In, NotIn, Exists, DoesNotExist)
	if err == nil {
		*o = v
	}
	return err
}

// Requirement tests one label of an endpoint or a namespace, with
// Kubernetes semantics: NotEquals, NotIn and DoesNotExist hold for a label
// that is absent.
type Requirement struct {
	// Key is the label's key: an optional DNS prefix and "/", then a name
	// (letters, digits, '-', '_', '.'), 1 to 317 bytes in all.
	Key string
	// Op is the test.
	Op Op
	// Values: one for Equals and NotEquals, at least one for In and NotIn,
	// none for Exists and DoesNotExist. A value is 0 to 63 letters,
	// digits, '-', '_' or '.'.
	Values []string
}

// Matches reports whether labels satisfy r.
func (r Requirement) Matches(labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Op {
	case Equals, In:
		return ok && slices.Contains(r.Values, v)
	case NotEquals, NotIn:
		return !ok || !slices.Contains(r.Values, v)
	case Exists:
		return ok
	case DoesNotExist:
		return !ok
	}
	return false
}

// Validate reports what is wrong with r; the error matches
// ErrInvalidSelector.
func (r Requirement) Validate() error {
	if err := r.problem(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSelector, err)
	}
	return nil
}

// problem is Validate's finding, without the sentinel.
func (r Requirement) problem() error {
	if err := validKey(r.Key); err != nil {
		return err
	}
	n := len(r.Values)
	switch r.Op {
	case Equals, NotEquals:
		if n != 1 {
			return fmt.Errorf("%s %s takes one value, not %d", r.Key, r.Op, n)
		}
	case In, NotIn:
		if n == 0 {
			return fmt.Errorf("%s %s takes at least one value", r.Key, r.Op)
		}
	case Exists, DoesNotExist:
		if n != 0 {
			return fmt.Errorf("%s %s takes no value, not %d", r.Key, r.Op, n)
		}
	default:
		return fmt.Errorf("%s: unknown operator %d", r.Key, uint8(r.Op))
	}
	for _, v := range r.Values {
		if err := validValue(v); err != nil {
			return fmt.Errorf("%s: %w", r.Key, err)
		}
	}
	return nil
}

// canonical returns r's text with sorted, deduplicated values; In and
// NotIn with one value read as Equals and NotEquals, which they mean.
func (r Requirement) canonical() string {
	vals := slices.Compact(slices.Sorted(slices.Values(r.Values)))
	op := r.Op
	if len(vals) == 1 && op == In {
		op = Equals
	} else if len(vals) == 1 && op == NotIn {
		op = NotEquals
	}
	switch op {
	case Equals:
		return r.Key + "=" + vals[0]
	case NotEquals:
		return r.Key + "!=" + vals[0]
	case In:
		return r.Key + " in (" + strings.Join(vals, ",") + ")"
	case NotIn:
		return r.Key + " notin (" + strings.Join(vals, ",") + ")"
	case Exists:
		return r.Key
	case DoesNotExist:
		return "!" + r.Key
	}
	return fmt.Sprintf("%s ?%d", r.Key, uint8(op))
}

const (
	maxKeyLength   = 253 + 1 + 63
	maxValueLength = 63
)

func labelChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

func validKey(k string) error {
	if k == "" || len(k) > maxKeyLength {
		return fmt.Errorf("label key %q must be 1 to %d bytes", k, maxKeyLength)
	}
	prefix, name, found := strings.Cut(k, "/")
	if !found {
		name, prefix = prefix, ""
	}
	if found && prefix == "" || name == "" || len(name) > 63 {
		return fmt.Errorf("label key %q needs a name of 1 to 63 bytes after its prefix", k)
	}
	for _, c := range []byte(prefix + name) {
		if !labelChar(c) {
			return fmt.Errorf("label key %q holds %q", k, c)
		}
	}
	return nil
}

func validValue(v string) error {
	if len(v) > maxValueLength {
		return fmt.Errorf("label value %q is longer than %d bytes", v, maxValueLength)
	}
	for _, c := range []byte(v) {
		if !labelChar(c) {
			return fmt.Errorf("label value %q holds %q", v, c)
		}
	}
	return nil
}

// validLabels checks every key and value of a label map.
func validLabels(labels map[string]string) error {
	for k, v := range labels {
		if err := validKey(k); err != nil {
			return err
		}
		if err := validValue(v); err != nil {
			return fmt.Errorf("label %s: %w", k, err)
		}
	}
	return nil
}

// Selector selects endpoints by their labels and by the labels of their
// namespace: every requirement of both lists must hold (AND). An empty
// Endpoint list selects every endpoint; a nil (or empty) Namespace list
// selects every namespace. The policy's own namespace is
// Namespace: []Requirement{{Key: "kubernetes.io/metadata.name", Op: Equals,
// Values: []string{ns}}}, with that label given to SetNamespace.
type Selector struct {
	// Endpoint are the requirements on the endpoint's labels.
	Endpoint []Requirement
	// Namespace are the requirements on its namespace's labels.
	Namespace []Requirement
}

// Matches reports whether an endpoint with labels, in a namespace with
// nsLabels, is selected.
func (s Selector) Matches(labels, nsLabels map[string]string) bool {
	for _, r := range s.Endpoint {
		if !r.Matches(labels) {
			return false
		}
	}
	for _, r := range s.Namespace {
		if !r.Matches(nsLabels) {
			return false
		}
	}
	return true
}

// Validate reports what is wrong with s; the error matches
// ErrInvalidSelector.
func (s Selector) Validate() error {
	if err := s.problem(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSelector, err)
	}
	return nil
}

// problem is Validate's finding, without the sentinel; a caller that puts
// it in an error of its own attaches ErrInvalidSelector with errs.Also.
func (s Selector) problem() error {
	for _, list := range [][]Requirement{s.Endpoint, s.Namespace} {
		for _, r := range list {
			if err := r.problem(); err != nil {
				return err
			}
		}
	}
	return nil
}

// String returns s's canonical form: the endpoint requirements sorted and
// joined by ", " ("all()" when there are none), then, when there are
// namespace requirements, " | namespace: " and those. Two selectors with
// the same String select the same endpoints; set IDs hash it.
func (s Selector) String() string {
	out := joinCanonical(s.Endpoint)
	if out == "" {
		out = "all()"
	}
	if ns := joinCanonical(s.Namespace); ns != "" {
		out += " | namespace: " + ns
	}
	return out
}

func joinCanonical(rs []Requirement) string {
	texts := make([]string, len(rs))
	for i, r := range rs {
		texts[i] = r.canonical()
	}
	slices.Sort(texts)
	return strings.Join(slices.Compact(texts), ", ")
}

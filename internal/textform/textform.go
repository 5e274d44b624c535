// Package textform gives the module's enums, flag sets and errors their
// text form, so that a value reads the same in a log line, a flag and a
// JSON document, and reads back.
//
// An enum's String is its text: MarshalText returns it, and UnmarshalText
// calls Parse with the enum's constants, which takes exactly the String of
// one of them (case-sensitive) and refuses anything else with an error that
// names the type and the valid names. A flag set (values meant to be
// OR-ed) is described once by a Flags, which formats and parses the names
// of its bits joined by a separator. A struct that reports an error (a
// status, a result, an event) marshals to JSON with Error's text in place
// of the error, which encoding/json would write as {}.
package textform

import (
	"fmt"
	"strings"
)

// Parse returns the one of values whose String is text. Otherwise it
// returns an error such as `ipfamily: unknown Family "IPv5"; valid: IPv4,
// IPv6`, naming the package and type of T and the String of each of values.
func Parse[T fmt.Stringer](text []byte, values ...T) (T, error) {
	for _, v := range values {
		if v.String() == string(text) {
			return v, nil
		}
	}
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = v.String()
	}
	var zero T
	return zero, fmt.Errorf("%s %q; valid: %s", unknown(zero), text, strings.Join(names, ", "))
}

// unknown returns "pkg: unknown Type" for v's type.
func unknown(v any) string {
	pkg, typ, _ := strings.Cut(fmt.Sprintf("%T", v), ".")
	return pkg + ": unknown " + typ
}

// Flag is the integer kind of a flag set.
type Flag interface {
	~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Flags is the text form of the flag set T: the names of the bits that are
// set, in bit order, joined by Sep ("links|addrs"), or None when no bit is
// set.
type Flags[T Flag] struct {
	// Names[i] is the name of bit i; bits past the last name have none.
	Names []string
	// Sep joins the names.
	Sep string
	// None is the text of the empty set.
	None string
}

// Format returns v's text. Bits without a name are shown last, in hex
// ("links|0x80"); such a text does not parse.
func (f Flags[T]) Format(v T) string {
	if v == 0 {
		return f.None
	}
	var parts []string
	for i, name := range f.Names {
		if v&(1<<i) != 0 {
			parts = append(parts, name)
		}
	}
	if rest := uint64(v) &^ f.known(); rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", rest))
	}
	return strings.Join(parts, f.Sep)
}

// known is the mask of the bits that have a name.
func (f Flags[T]) known() uint64 {
	if len(f.Names) >= 64 {
		return ^uint64(0)
	}
	return 1<<len(f.Names) - 1
}

// Parse returns the set whose text is text: None, or names joined by Sep,
// in any order. Anything else is an error that names the package and type
// of T and the valid names.
func (f Flags[T]) Parse(text []byte) (T, error) {
	s := string(text)
	if s == f.None {
		return 0, nil
	}
	var v T
	for part := range strings.SplitSeq(s, f.Sep) {
		i := indexOf(f.Names, part)
		if i < 0 {
			return 0, fmt.Errorf("%s %q in %q; valid: %s joined by %q, or %q for none",
				unknown(v), part, s, strings.Join(f.Names, ", "), f.Sep, f.None)
		}
		v |= 1 << i
	}
	return v, nil
}

func indexOf(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

// Error returns err's text for a JSON document: a pointer to err.Error(),
// or nil (null) for a nil error. A struct that reports an error marshals
// it through Error in its MarshalJSON:
//
//	func (s Status) MarshalJSON() ([]byte, error) {
//		type plain Status
//		return json.Marshal(struct {
//			plain
//			Err *string
//		}{plain(s), textform.Error(s.Err)})
//	}
//
// The outer Err hides the embedded one, and plain has none of Status's
// methods, so the struct's other fields marshal as before.
func Error(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

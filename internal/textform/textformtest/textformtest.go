// Package textformtest checks, in a package's tests, the text form that
// package textform gives an enum or a flag set: every constant round-trips
// through MarshalText, UnmarshalText and encoding/json, a wrong text is an
// error that names the type and the valid names and changes nothing, and
// the table the test gives lists every exported constant of the type that
// the package declares, so that a constant added later without a name
// fails the test.
package textformtest

import (
	"encoding"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"math/bits"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// Value is what an enum or a flag set with a text form is.
type Value interface {
	comparable
	fmt.Stringer
	encoding.TextMarshaler
}

// Enum checks the enum T whose exported constants, declared in the Go files
// of dir, are consts (constant name → value): each value's MarshalText is
// its String, and UnmarshalText of it (directly and through encoding/json,
// as a value and as a map key) gives the value back; that text in another
// case, and a name no constant has, are refused with an error naming T and
// every valid name (texts that are decimal numbers excepted: they are not
// names) and leave the receiver as it was.
func Enum[T Value, PT interface {
	*T
	encoding.TextUnmarshaler
}](t *testing.T, dir string, consts map[string]T) {
	t.Helper()
	typ := declared(t, dir, consts)
	texts := map[string]T{}
	for name, v := range consts {
		text := roundTrip[T, PT](t, name, v)
		texts[text] = v
	}
	bad := []string{"\x00no such name", ""}
	for text := range texts {
		for _, other := range []string{strings.ToUpper(text), strings.ToLower(text), strings.ToUpper(text[:min(1, len(text))]) + text[min(1, len(text)):]} {
			if _, ok := texts[other]; !ok {
				bad = append(bad, other)
			}
		}
	}
	for _, text := range bad {
		if _, ok := texts[text]; ok {
			continue // "" is the text of some enums' zero value
		}
		err := refused[T, PT](t, consts, text)
		require.ErrorContains(t, err, typ, "the error names the type")
		for name := range texts {
			if _, numErr := strconv.Atoi(name); numErr != nil {
				require.ErrorContains(t, err, name, "the error names every valid name")
			}
		}
	}
}

// Flags checks the flag set T whose exported constants, declared in the Go
// files of dir, are consts (each one bit): the empty set, each bit, each
// pair of bits and all of them round-trip as in Enum, and a text with a
// part that names no bit is refused with an error naming T and each bit's
// name, leaving the receiver as it was.
func Flags[T interface {
	Value
	textform.Flag
}, PT interface {
	*T
	encoding.TextUnmarshaler
}](t *testing.T, dir string, consts map[string]T) {
	t.Helper()
	typ := declared(t, dir, consts)
	names := slices.Sorted(maps.Keys(consts))
	var all T
	roundTrip[T, PT](t, "none", 0)
	for i, a := range names {
		all |= consts[a]
		require.Equal(t, 1, bits.OnesCount64(uint64(consts[a])), "%s is one bit", a)
		roundTrip[T, PT](t, a, consts[a])
		for _, b := range names[i+1:] {
			roundTrip[T, PT](t, a+"|"+b, consts[a]|consts[b])
		}
	}
	roundTrip[T, PT](t, "all", all)
	allText := all.String()
	for _, text := range []string{"\x00no such name", allText + "\x00", "\x00" + allText, strings.ToUpper(allText), strings.ToLower(allText)} {
		if text == allText {
			continue
		}
		err := refused[T, PT](t, consts, text)
		require.ErrorContains(t, err, typ, "the error names the type")
		for _, name := range names {
			require.ErrorContains(t, err, consts[name].String(), "the error names every bit")
		}
	}
}

// Report checks that v, a struct that reports errors, marshals to JSON as
// encoding/json writes its exported fields, except that each field of type
// error is the error's text, or null when it is nil.
func Report(t *testing.T, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &got), "%s", b)
	rv := reflect.ValueOf(v)
	require.Equal(t, reflect.Struct, rv.Kind(), "a struct")
	want := map[string]json.RawMessage{}
	errorType := reflect.TypeFor[error]()
	for i := range rv.NumField() {
		f := rv.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		field := rv.Field(i).Interface()
		if f.Type == errorType {
			field = nil
			if e := rv.Field(i).Interface(); e != nil {
				field = e.(error).Error()
			}
		}
		w, err := json.Marshal(field)
		require.NoError(t, err, f.Name)
		want[f.Name] = w
	}
	require.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)), "the fields of %T", v)
	for name, w := range want {
		require.JSONEq(t, string(w), string(got[name]), "%T.%s in %s", v, name, b)
	}
}

// roundTrip checks that v (the constant name) goes to text and back,
// directly and through encoding/json, and returns its text.
func roundTrip[T Value, PT interface {
	*T
	encoding.TextUnmarshaler
}](t *testing.T, name string, v T) string {
	t.Helper()
	b, err := v.MarshalText()
	require.NoError(t, err, name)
	text := string(b)
	require.Equal(t, v.String(), text, "%s: MarshalText is String", name)

	var back T
	require.NoError(t, PT(&back).UnmarshalText(b), name)
	require.Equal(t, v, back, "%s: UnmarshalText(%q)", name, text)

	j, err := json.Marshal(v)
	require.NoError(t, err, name)
	require.Equal(t, strconv.Quote(text), string(j), "%s in JSON", name)
	var jback T
	require.NoError(t, json.Unmarshal(j, &jback), name)
	require.Equal(t, v, jback, "%s from JSON", name)

	j, err = json.Marshal(map[T]int{v: 1})
	require.NoError(t, err, name)
	require.Equal(t, "{"+strconv.Quote(text)+":1}", string(j), "%s as a JSON map key", name)
	var mback map[T]int
	require.NoError(t, json.Unmarshal(j, &mback), name)
	require.Equal(t, map[T]int{v: 1}, mback, "%s from a JSON map key", name)
	return text
}

// refused checks that UnmarshalText(text) fails and leaves its receiver as
// it was, and returns the error.
func refused[T Value, PT interface {
	*T
	encoding.TextUnmarshaler
}](t *testing.T, consts map[string]T, text string) error {
	t.Helper()
	for _, v := range consts {
		got := v
		err := PT(&got).UnmarshalText([]byte(text))
		require.Error(t, err, "UnmarshalText(%q)", text)
		require.Equal(t, v, got, "a refused UnmarshalText(%q) changes nothing", text)
		var viaJSON struct{ V T }
		viaJSON.V = v
		require.Error(t, json.Unmarshal([]byte(`{"V":`+strconv.Quote(text)+`}`), &viaJSON), "JSON %q", text)
		return err
	}
	t.Fatal("no constants")
	return nil
}

// declared checks that the keys of consts are the exported constants of T
// declared in the Go files of dir (tests excluded), and returns T's name as
// errors give it ("pkg: unknown Type").
func declared[T any](t *testing.T, dir string, consts map[string]T) string {
	t.Helper()
	rt := reflect.TypeFor[T]()
	found := constantsOf(t, dir, rt.Name())
	require.Equal(t, found, slices.Sorted(maps.Keys(consts)),
		"the test's table lists exactly the exported constants of %s declared in %s", rt, dir)
	return fmt.Sprintf("%s: unknown %s", filepath.Base(rt.PkgPath()), rt.Name())
}

// constantsOf returns the sorted names of the exported constants of the
// type named typ declared in the non-test Go files of dir: those written
// with the type ("X T = …", "X = T(…)"), and those that repeat such a
// specification in a const block (iota).
func constantsOf(t *testing.T, dir, typ string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			ofType := false // the type of the specification in force
			for _, spec := range gen.Specs {
				s := spec.(*ast.ValueSpec)
				switch {
				case s.Type != nil:
					ofType = isIdent(s.Type, typ)
				case len(s.Values) > 0:
					call, ok := s.Values[0].(*ast.CallExpr)
					ofType = ok && isIdent(call.Fun, typ)
				}
				for _, n := range s.Names {
					if ofType && n.IsExported() {
						seen[n.Name] = true
					}
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// Command enumcheck fails when an exported enum of the module has no text
// form, or an exported struct would marshal an error as {}. The test command
// runs it so that every value the module hands out reads as text in a log, a
// flag or a JSON status document.
//
// An enum is an exported named type whose underlying type is an integer or a
// string and that has at least one exported constant of its own type. It must
// have String() string and MarshalText() ([]byte, error) on the value and
// UnmarshalText([]byte) error on the pointer.
//
// A struct with an exported field that holds an error (an error, or a slice,
// array, map or pointer of errors) marshals that error as {} through
// encoding/json, since an error's dynamic type rarely has exported fields
// (and a concrete error type as its fields, not its text). Such an exported
// struct must have a MarshalJSON method on the value, which writes the
// error's text (see internal/textform.Error); a struct that is itself an
// error is exempt, and so are the few whose error field is an input (the
// inputs list).
//
// A struct that embeds a type with MarshalJSON or MarshalText, and has
// other fields, is reported too: the promoted method marshals the embedded
// value alone and the other fields are lost.
//
// The checker type-checks the packages of the module in dir from their
// export data (go list -export), so it sees what a build for this machine
// sees. It reports every non-main package of the main module, internal ones
// too; nested modules (examples/) are not part of it.
//
// Usage: go run ./internal/tools/enumcheck [dir]
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

func main() {
	dir := "."
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	pkgs, err := load(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "enumcheck:", err)
		os.Exit(2)
	}
	problems := check(pkgs)
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "enumcheck: %d types without a text form\n", len(problems))
		os.Exit(1)
	}
}

// listed is what enumcheck reads of one package from go list.
type listed struct {
	ImportPath string
	Name       string
	Export     string
	DepOnly    bool
	Module     *struct{ Main bool }
	Error      *struct{ Err string }
}

// load lists the packages of the module in dir with their dependencies,
// compiled, and returns the main module's non-main packages read from their
// export data.
func load(dir string) ([]*types.Package, error) {
	cmd := exec.Command("go", "list", "-e", "-export", "-deps",
		"-json=ImportPath,Name,Export,DepOnly,Module,Error", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	exports := map[string]string{}
	var ours []string
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("package %s: %s", p.ImportPath, p.Error.Err)
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly && p.Module != nil && p.Module.Main && p.Name != "main" {
			ours = append(ours, p.ImportPath)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	var pkgs []*types.Package
	for _, path := range ours {
		pkg, err := imp.Import(path)
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, pkg)
	}
	return pkgs, nil
}

// check returns one line per enum without its text methods and per struct
// that would marshal an error as {}, sorted.
func check(pkgs []*types.Package) []string {
	var problems []string
	for _, pkg := range pkgs {
		scope := pkg.Scope()
		for _, name := range scope.Names() {
			tn, ok := scope.Lookup(name).(*types.TypeName)
			if !ok || !tn.Exported() || tn.IsAlias() {
				continue
			}
			named, ok := tn.Type().(*types.Named)
			if !ok || named.TypeParams().Len() > 0 {
				continue
			}
			qualified := pkg.Path() + "." + name
			if isEnum(scope, named) {
				if missing := missingTextMethods(named); len(missing) > 0 {
					problems = append(problems, fmt.Sprintf("%s: enum %s lacks %s", pkg.Path(), qualified, strings.Join(missing, ", ")))
				}
			}
			if field := errorField(named); field != "" && !hasMethod(named, "MarshalJSON", nil, []types.Type{byteSlice, errorType}) {
				problems = append(problems, fmt.Sprintf("%s: struct %s marshals its error field %s as {}: it lacks MarshalJSON", pkg.Path(), qualified, field))
			}
			if method, from := promotedMarshaler(named); method != "" {
				problems = append(problems, fmt.Sprintf("%s: struct %s marshals as its embedded %s alone: %s is promoted from it and hides the other fields", pkg.Path(), qualified, from, method))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

var (
	errorType  = types.Universe.Lookup("error").Type()
	errorIface = errorType.Underlying().(*types.Interface)
	byteSlice  = types.NewSlice(types.Typ[types.Byte])
	stringType = types.Typ[types.String]
)

// isEnum says whether named is an integer or string type with an exported
// constant of its own type in scope.
func isEnum(scope *types.Scope, named *types.Named) bool {
	basic, ok := named.Underlying().(*types.Basic)
	if !ok || basic.Info()&(types.IsInteger|types.IsString) == 0 {
		return false
	}
	for _, name := range scope.Names() {
		if c, ok := scope.Lookup(name).(*types.Const); ok && c.Exported() && types.Identical(c.Type(), named) {
			return true
		}
	}
	return false
}

// missingTextMethods names the text methods named lacks: String and
// MarshalText on the value, UnmarshalText on the pointer.
func missingTextMethods(named *types.Named) []string {
	var missing []string
	if !hasMethod(named, "String", nil, []types.Type{stringType}) {
		missing = append(missing, "String() string")
	}
	if !hasMethod(named, "MarshalText", nil, []types.Type{byteSlice, errorType}) {
		missing = append(missing, "MarshalText() ([]byte, error)")
	}
	// On the value, UnmarshalText could not set anything.
	if !hasMethod(types.NewPointer(named), "UnmarshalText", []types.Type{byteSlice}, []types.Type{errorType}) ||
		hasMethod(named, "UnmarshalText", []types.Type{byteSlice}, []types.Type{errorType}) {
		missing = append(missing, "(*T) UnmarshalText([]byte) error")
	}
	return missing
}

// hasMethod says whether t's method set has the method name with exactly
// these parameter and result types.
func hasMethod(t types.Type, name string, params, results []types.Type) bool {
	sel := types.NewMethodSet(t).Lookup(nil, name)
	if sel == nil {
		return false
	}
	sig := sel.Obj().Type().(*types.Signature)
	return sig.Params().Len() == len(params) && sig.Results().Len() == len(results) && !sig.Variadic() &&
		identicalTypes(sig.Params(), params) && identicalTypes(sig.Results(), results)
}

func identicalTypes(tuple *types.Tuple, want []types.Type) bool {
	for i, w := range want {
		if !types.Identical(tuple.At(i).Type(), w) {
			return false
		}
	}
	return true
}

// errorField returns the name of the first exported field of struct type
// named that holds an error, or "" when there is none, or named is itself an
// error or one of the inputs.
func errorField(named *types.Named) string {
	st, ok := named.Underlying().(*types.Struct)
	if !ok || isError(named) || inputs[named.Obj().Pkg().Path()+"."+named.Obj().Name()] != "" {
		return ""
	}
	for i := range st.NumFields() {
		if f := st.Field(i); marshaled(f) && holdsError(f.Type(), map[types.Type]bool{}) {
			return f.Name()
		}
	}
	return ""
}

// inputs are the structs whose error fields are not reports but inputs: a
// sentinel that the errors they make wrap. They are never marshaled.
var inputs = map[string]string{
	"github.com/nodeplane/nodeplane/internal/managerutil.Check": "Sentinel is what the problems it finds wrap",
}

// isError says whether named or a pointer to it is an error.
func isError(named *types.Named) bool {
	return types.Implements(named, errorIface) || types.Implements(types.NewPointer(named), errorIface)
}

// holdsError says whether encoding/json, marshaling a value of type t,
// would reach an error without a text form of its own: an error interface
// (which it writes as {}) or a concrete error type (which it writes as its
// fields). An exported struct type that is not an error is not looked
// into: it is checked on its own.
func holdsError(t types.Type, seen map[types.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	if hasMethod(t, "MarshalJSON", nil, []types.Type{byteSlice, errorType}) ||
		hasMethod(t, "MarshalText", nil, []types.Type{byteSlice, errorType}) {
		return false
	}
	if iface, ok := t.Underlying().(*types.Interface); ok {
		return iface.NumMethods() > 0 && types.Implements(t, errorIface)
	}
	if types.Implements(t, errorIface) {
		return true
	}
	switch u := t.(type) {
	case *types.Named:
		if _, ok := u.Underlying().(*types.Struct); ok && u.Obj().Exported() {
			return isError(u)
		}
		return holdsError(u.Underlying(), seen)
	case *types.Alias:
		return holdsError(types.Unalias(u), seen)
	case *types.Pointer:
		return holdsError(u.Elem(), seen)
	case *types.Slice:
		return holdsError(u.Elem(), seen)
	case *types.Array:
		return holdsError(u.Elem(), seen)
	case *types.Map:
		return holdsError(u.Elem(), seen)
	case *types.Struct:
		for i := range u.NumFields() {
			if f := u.Field(i); marshaled(f) && holdsError(f.Type(), seen) {
				return true
			}
		}
	}
	return false
}

// promotedMarshaler returns the name of a MarshalJSON or MarshalText method
// that struct type named has only through an embedded field, and that
// field's name, when named has other fields that encoding/json would write:
// the promoted method marshals the embedded value alone and drops them.
func promotedMarshaler(named *types.Named) (method, from string) {
	st, ok := named.Underlying().(*types.Struct)
	if !ok {
		return "", ""
	}
	for _, name := range []string{"MarshalJSON", "MarshalText"} {
		sel := types.NewMethodSet(types.NewPointer(named)).Lookup(nil, name)
		if sel == nil || len(sel.Index()) < 2 {
			continue
		}
		embedded := st.Field(sel.Index()[0])
		for i := range st.NumFields() {
			if f := st.Field(i); f != embedded && marshaled(f) {
				return name, embedded.Name()
			}
		}
	}
	return "", ""
}

// marshaled says whether encoding/json looks into field f: an exported field,
// or an embedded struct (or pointer to one) whose fields it promotes.
func marshaled(f *types.Var) bool {
	if f.Exported() {
		return true
	}
	t := f.Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	_, isStruct := t.Underlying().(*types.Struct)
	return f.Embedded() && isStruct
}

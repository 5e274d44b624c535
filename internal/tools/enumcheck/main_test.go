package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckReportsTypesWithoutTextForm(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
	}
	write("go.mod", "module example.com/m\n\ngo 1.26\n")
	write("a/a.go", `package a

import "errors"

// Enums.
type (
	Bare      uint8
	Done      uint8
	WrongRecv uint8
	Str       string
)

const (
	BareA      Bare      = 1
	DoneA      Done      = 1
	WrongRecvA WrongRecv = 1
	StrA       Str       = "a"
)

func (d Done) String() string                   { return "a" }
func (d Done) MarshalText() ([]byte, error)     { return []byte(d.String()), nil }
func (d *Done) UnmarshalText(text []byte) error { return nil }

func (w WrongRecv) String() string                { return "a" }
func (w *WrongRecv) MarshalText() ([]byte, error) { return nil, nil }
func (w WrongRecv) UnmarshalText([]byte) error    { return nil }

// Not enums: no constant, unexported, not an integer or a string.
type (
	Quantity   int
	unexported uint8
	Float      float64
)

const (
	UnexpA unexported = 1
	FloatA Float      = 1
)

// Structs with errors.
type (
	Status struct {
		Name string
		Err  error
	}
	Good     struct{ Err error }
	MyErr    struct{ Reason error }
	Nested   struct{ List []error }
	Deep     struct{ M map[string]*MyErr }
	Inner    struct{ Errs struct{ E error } }
	Embeds   struct {
		Good
		X int
	}
	OnlyEmbeds struct{ Good }
	Opaque     struct{ err error }
	WithEnum   struct{ D Done }
)

func (Good) MarshalJSON() ([]byte, error) { return nil, nil }
func (*MyErr) Error() string              { return "" }

var _ = errors.New
`)
	write("internal/b/b.go", "package b\n\ntype Kind int\n\nconst KindA Kind = 0\n")
	write("cmd/x/main.go", "package main\n\ntype Kind int\n\nconst KindA Kind = 0\n\nfunc main() {}\n")

	pkgs, err := load(dir)
	require.NoError(t, err)
	require.Equal(t, []string{
		"example.com/m/a: enum example.com/m/a.Bare lacks String() string, MarshalText() ([]byte, error), (*T) UnmarshalText([]byte) error",
		"example.com/m/a: enum example.com/m/a.Str lacks String() string, MarshalText() ([]byte, error), (*T) UnmarshalText([]byte) error",
		"example.com/m/a: enum example.com/m/a.WrongRecv lacks MarshalText() ([]byte, error), (*T) UnmarshalText([]byte) error",
		"example.com/m/a: struct example.com/m/a.Deep marshals its error field M as {}: it lacks MarshalJSON",
		"example.com/m/a: struct example.com/m/a.Embeds marshals as its embedded Good alone: MarshalJSON is promoted from it and hides the other fields",
		"example.com/m/a: struct example.com/m/a.Inner marshals its error field Errs as {}: it lacks MarshalJSON",
		"example.com/m/a: struct example.com/m/a.Nested marshals its error field List as {}: it lacks MarshalJSON",
		"example.com/m/a: struct example.com/m/a.Status marshals its error field Err as {}: it lacks MarshalJSON",
		"example.com/m/internal/b: enum example.com/m/internal/b.Kind lacks String() string, MarshalText() ([]byte, error), (*T) UnmarshalText([]byte) error",
	}, check(pkgs))
}

func TestLoadFailsOnBrokenPackage(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n\ngo 1.26\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.go"), []byte("package a\n\nvar x int = \"no\"\n"), 0o644))
	_, err := load(dir)
	require.Error(t, err)
}

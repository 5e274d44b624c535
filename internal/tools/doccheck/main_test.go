package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckReportsUndocumentedNames(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
	}
	write("good/a.go", `// Package good is documented.
package good

// T is documented.
type T struct {
	// A is documented.
	A int
	B int // B has a line comment.
	// C and D are documented together.
	C, D int

	unexported int
}

// F is documented.
func F() {}

// M is documented.
func (T) M() {}

func (t *unexportedT) N() {}

type unexportedT struct{}

// Group doc covers its members.
const (
	X = 1
	Y = 2
)
`)
	write("good/a_test.go", "package good\n\nfunc Undocumented() {}\n")
	write("bad/b.go", `package bad

type T struct {
	A int

	B int
}

func F() {}

var V = 1

type I interface {
	Do()
}
`)
	problems, err := check(dir)
	require.NoError(t, err)
	var got []string
	for _, p := range problems {
		got = append(got, strings.TrimPrefix(p, dir+string(filepath.Separator)))
	}
	require.Equal(t, []string{
		"bad/b.go:11:5: V has no doc comment",
		"bad/b.go:13:6: type I has no doc comment",
		"bad/b.go:14:2: I.Do has no doc comment",
		"bad/b.go:3:6: type T has no doc comment",
		"bad/b.go:4:2: T.A has no doc comment",
		"bad/b.go:6:2: T.B has no doc comment",
		"bad/b.go:9:1: func F has no doc comment",
		"bad: package has no package comment",
	}, got)
}

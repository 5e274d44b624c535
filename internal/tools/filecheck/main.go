// Command filecheck fails on two kinds of file in the repository (every
// module, walked from dir):
//
//   - a production Go file (not a test, not generated) longer than
//     maxLines lines whose top, before the package clause, does not say why
//     in a line comment "// Size: <reason>" (with a blank line between it
//     and the package clause, so it is no package doc);
//   - a test file that declares a TestKernel… function and is not named
//     kernel_test.go or *_kernel_test.go (or *_kernel_linux_test.go, where
//     the name carries the linux constraint), so that kernel tests are
//     found by their file name.
//
// Folders whose name starts with "." and testdata folders are skipped.
//
// Usage: go run ./internal/tools/filecheck [dir]
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// maxLines is the length above which a production file states why it is
// not split.
const maxLines = 700

// kernelTestName is the name a test file with TestKernel… functions has.
var kernelTestName = regexp.MustCompile(`(^|_)kernel(_linux)?_test\.go$`)

func main() {
	dir := "."
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	problems, err := check(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "filecheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "filecheck: %d problems\n", len(problems))
		os.Exit(1)
	}
}

// check returns one line per problem of the Go files under root, sorted.
func check(root string) ([]string, error) {
	var problems []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		var problem string
		if strings.HasSuffix(path, "_test.go") {
			problem, err = checkTest(fset, path, src)
		} else {
			problem, err = checkSize(fset, path, src)
		}
		if err != nil {
			return err
		}
		if problem != "" {
			problems = append(problems, filepath.ToSlash(rel)+": "+problem)
		}
		return nil
	})
	sort.Strings(problems)
	return problems, err
}

// checkSize returns the problem of a production file that is too long and
// says not why, or "".
func checkSize(fset *token.FileSet, path string, src []byte) (string, error) {
	lines := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		lines++
	}
	if lines <= maxLines {
		return "", nil
	}
	f, err := parser.ParseFile(fset, path, src, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		return "", err
	}
	if ast.IsGenerated(f) {
		return "", nil
	}
	for _, g := range f.Comments {
		if g.Pos() >= f.Package {
			break
		}
		for _, c := range g.List {
			if reason, ok := strings.CutPrefix(c.Text, "// Size:"); ok && strings.TrimSpace(reason) != "" {
				if g == f.Doc {
					return "the // Size: line is in the package doc: leave a blank line before the package clause", nil
				}
				return "", nil
			}
		}
	}
	return fmt.Sprintf("%d lines (over %d) and no // Size: reason at its top: split it or say why not", lines, maxLines), nil
}

// checkTest returns the problem of a test file that holds TestKernel…
// functions under another name, or "".
func checkTest(fset *token.FileSet, path string, src []byte) (string, error) {
	if kernelTestName.MatchString(filepath.Base(path)) {
		return "", nil
	}
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return "", err
	}
	for _, decl := range f.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "TestKernel") {
			return fmt.Sprintf("holds %s: a file of kernel tests is named *_kernel_test.go", fn.Name.Name), nil
		}
	}
	return "", nil
}

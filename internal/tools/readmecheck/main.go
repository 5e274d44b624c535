// Command readmecheck keeps the Go snippets of the repository's markdown
// files compiling: every ```go block must come right after a marker line
//
//	<!-- example: path/to/file_test.go ExampleName -->
//
// (the path relative to the markdown file), and its text must be the body
// of that Example function, one tab of indentation removed. The Example is
// compiled by `go test`, so a snippet that no longer builds fails the test
// command, and one that drifts from its Example fails here. With -fix the
// blocks are rewritten from their Examples instead.
//
// Usage: go run ./internal/tools/readmecheck [-fix] file.md…
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

func main() {
	fix := flag.Bool("fix", false, "rewrite each block from its Example")
	flag.Parse()
	failed := 0
	for _, md := range flag.Args() {
		problems, err := checkFile(md, *fix)
		if err != nil {
			fmt.Fprintln(os.Stderr, "readmecheck:", err)
			os.Exit(2)
		}
		for _, p := range problems {
			fmt.Println(p)
		}
		failed += len(problems)
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "readmecheck: %d snippet problems (go run ./internal/tools/readmecheck -fix rewrites drifted blocks)\n", failed)
		os.Exit(1)
	}
}

var marker = regexp.MustCompile(`^<!-- example: (\S+\.go) (Example\w*) -->$`)

// checkFile checks (or with fix, rewrites) the go blocks of one markdown
// file and returns one line per problem.
func checkFile(md string, fix bool) ([]string, error) {
	src, err := os.ReadFile(md)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(src), "\n")
	var out []string
	var problems []string
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("%s:%d: unterminated go block", md, i+1)
		}
		block := strings.Join(lines[i+1:end], "\n")
		var m []string
		if i > 0 {
			m = marker.FindStringSubmatch(strings.TrimSpace(lines[i-1]))
		}
		if m == nil {
			problems = append(problems, fmt.Sprintf("%s:%d: go block without a marker line <!-- example: file_test.go ExampleName --> above it", md, i+1))
			out = append(out, lines[i+1:end+1]...)
			i = end
			continue
		}
		body, err := exampleBody(filepath.Join(filepath.Dir(md), m[1]), m[2])
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s:%d: %v", md, i+1, err))
			out = append(out, lines[i+1:end]...)
		case body != block && fix:
			out = append(out, strings.Split(body, "\n")...)
		case body != block:
			problems = append(problems, fmt.Sprintf("%s:%d: the block differs from the body of %s in %s", md, i+1, m[2], m[1]))
			out = append(out, lines[i+1:end]...)
		default:
			out = append(out, lines[i+1:end]...)
		}
		out = append(out, lines[end])
		i = end
	}
	if fix {
		if got := strings.Join(out, "\n"); got != string(src) {
			if err := os.WriteFile(md, []byte(got), 0o644); err != nil {
				return nil, err
			}
		}
	}
	return problems, nil
}

// exampleBody returns the body of the Example function name in the test
// file path: the lines between its braces, one leading tab removed.
func exampleBody(path, name string) (string, error) {
	if !strings.HasSuffix(path, "_test.go") {
		return "", fmt.Errorf("%s is not a test file: go test would not compile its Example", path)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return "", err
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Name.Name != name || fn.Body == nil {
			continue
		}
		text := src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset]
		text = bytes.Trim(text, "\n")
		ls := strings.Split(string(text), "\n")
		for j, l := range ls {
			ls[j] = strings.TrimPrefix(l, "\t")
		}
		return strings.Join(ls, "\n"), nil
	}
	return "", errors.New(path + " has no func " + name)
}

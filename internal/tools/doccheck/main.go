// Command doccheck fails when an exported name in the module has no doc
// comment, or a package has no package comment. The test command runs it so
// that "every exported name is documented" stays true.
//
// Usage: go run ./internal/tools/doccheck [dir]
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	problems, err := check(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "doccheck: %d undocumented names\n", len(problems))
		os.Exit(1)
	}
}

// check parses every non-test Go file under root, one package per
// directory, and returns one line per missing comment.
func check(root string) ([]string, error) {
	dirs := map[string][]string{}
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
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var problems []string
	fset := token.NewFileSet()
	for dir, files := range dirs {
		hasPkgDoc := false
		for _, path := range files {
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				return nil, err
			}
			if f.Doc != nil {
				hasPkgDoc = true
			}
			problems = append(problems, checkFile(fset, f)...)
		}
		if !hasPkgDoc {
			problems = append(problems, fmt.Sprintf("%s: package has no package comment", dir))
		}
	}
	sort.Strings(problems)
	return problems, nil
}

func checkFile(fset *token.FileSet, f *ast.File) []string {
	var out []string
	report := func(pos token.Pos, what string) {
		out = append(out, fmt.Sprintf("%s: %s has no doc comment", fset.Position(pos), what))
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Doc != nil {
				continue
			}
			if d.Recv != nil && !receiverExported(d.Recv) {
				continue
			}
			report(d.Pos(), "func "+d.Name.Name)
		case *ast.GenDecl:
			if d.Tok == token.IMPORT {
				continue
			}
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() && s.Doc == nil && d.Doc == nil {
						report(s.Pos(), "type "+s.Name.Name)
					}
					if s.Name.IsExported() {
						out = append(out, checkFields(fset, s)...)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						// A documented group covers its members, as godoc shows it.
						if n.IsExported() && s.Doc == nil && s.Comment == nil && d.Doc == nil {
							report(n.Pos(), n.Name)
						}
					}
				}
			}
		}
	}
	return out
}

// checkFields requires a comment on the exported fields of exported structs
// and the methods of exported interfaces; a comment covers the contiguous
// fields under it.
func checkFields(fset *token.FileSet, s *ast.TypeSpec) []string {
	var list *ast.FieldList
	switch t := s.Type.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return nil
	}
	var out []string
	// A comment above a field also covers the fields on the lines right
	// after it ("// WallMS and CPUMS are …"), up to a blank line.
	coveredUntil := -1
	for _, field := range list.List {
		line := fset.Position(field.Pos()).Line
		if field.Doc != nil || field.Comment != nil || line == coveredUntil+1 {
			coveredUntil = fset.Position(field.End()).Line
			continue
		}
		coveredUntil = -1
		for _, n := range field.Names {
			if n.IsExported() {
				out = append(out, fmt.Sprintf("%s: %s.%s has no doc comment", fset.Position(n.Pos()), s.Name.Name, n.Name))
			}
		}
	}
	return out
}

func receiverExported(recv *ast.FieldList) bool {
	if len(recv.List) == 0 {
		return false
	}
	t := recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}

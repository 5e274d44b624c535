// Command layercheck fails when an import of a module of the repository
// points back up nodeplane's layers, when production code imports the test
// kit, or when a package belongs to no layer. The layers, bottom up, are
// defined once, in layers.go: vocabulary → kernel seam → allocators and
// monitors → dataplane contracts and loop → rule model → drivers → managers
// → test kit → programs and examples.
//
// Only the imports of production files count for the order: a test may
// import anything (an external test of netfilter runs iptables). The test
// kit (internal/testkit/…) is imported only by test files, by other
// test-kit packages and by bench. The drivers stand apart: one driver
// does not import another. A reserved package (the interface monitor)
// is imported only from the folders listed for it.
//
// Imports that point back up today are listed in layers.go with who
// removes them; the check fails on a listed import that no longer exists,
// so the list only shrinks.
//
// Usage: go run ./internal/tools/layercheck [module dir …]
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
)

func main() {
	dirs := os.Args[1:]
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	var graph []pkg
	for _, dir := range dirs {
		g, err := load(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "layercheck:", err)
			os.Exit(2)
		}
		graph = append(graph, g...)
	}
	problems := check(graph, layers, reserved, known)
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "layercheck: %d problems\n", len(problems))
		os.Exit(1)
	}
}

// pkg is one package and the packages of the repository its production
// files import, as paths relative to root ("." for root itself).
type pkg struct {
	path    string
	imports []string
}

// load lists the packages of the module in dir and their imports.
func load(dir string) ([]pkg, error) {
	cmd := exec.Command("go", "list", "-e", "-f",
		`{{if .Error}}!{{.ImportPath}}: {{.Error.Err}}{{else}}{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{end}}`,
		"./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %w: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	var graph []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "!") {
			return nil, fmt.Errorf("package %s", line[1:])
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		p, ok := rel(fields[0])
		if !ok {
			return nil, fmt.Errorf("package %s is outside %s", fields[0], root)
		}
		var imports []string
		for _, imp := range fields[1:] {
			if r, ok := rel(imp); ok {
				imports = append(imports, r)
			}
		}
		graph = append(graph, pkg{path: p, imports: imports})
	}
	return graph, sc.Err()
}

// rel returns path relative to root, "." for root itself, and whether path
// is in the repository at all.
func rel(path string) (string, bool) {
	if path == root {
		return ".", true
	}
	if r, ok := strings.CutPrefix(path, root+"/"); ok {
		return r, true
	}
	return "", false
}

// classify returns the index in ls of the layer of the package at path
// (relative to root) and the folder of that layer that holds it: the
// longest folder that holds it, or -1 and "".
func classify(ls []layer, path string) (int, string) {
	best, bestFolder := -1, ""
	for i, l := range ls {
		for _, folder := range l.pkgs {
			var holds bool
			if folder == "." {
				holds = path == "."
			} else {
				holds = within(path, folder)
			}
			if holds && (best < 0 || len(folder) > len(bestFolder)) {
				best, bestFolder = i, folder
			}
		}
	}
	return best, bestFolder
}

// within says whether path is folder or below it.
func within(path, folder string) bool {
	return path == folder || strings.HasPrefix(path, folder+"/")
}

// reservedFolder returns the folder of rs that holds path, or "".
func reservedFolder(rs map[string][]string, path string) string {
	for folder := range rs {
		if within(path, folder) {
			return folder
		}
	}
	return ""
}

// mayImport says whether rs lets from import imp: imp is reserved for
// none, or from is in (or below) one of the folders imp is reserved for,
// or in imp's own folder.
func mayImport(rs map[string][]string, from, imp string) bool {
	folder := reservedFolder(rs, imp)
	if folder == "" || within(from, folder) {
		return true
	}
	for _, f := range rs[folder] {
		if within(from, f) {
			return true
		}
	}
	return false
}

// check returns one line per problem of graph against ls and rs, sorted:
// a package in no layer, an import that points up, reaches the test kit
// from production code, joins two folders of a layer that stand apart or
// reaches a reserved package from elsewhere and is not in exceptions, and
// an exception whose importer was checked but that no longer occurs.
func check(graph []pkg, ls []layer, rs map[string][]string, exceptions []exception) []string {
	excused := map[[2]string]bool{}
	for _, e := range exceptions {
		excused[[2]string{e.from, e.to}] = false
	}
	checked := map[string]bool{}
	var problems []string
	for _, p := range graph {
		checked[p.path] = true
		from, fromFolder := classify(ls, p.path)
		if from < 0 {
			problems = append(problems, fmt.Sprintf("%s: in no layer: add it to layers in internal/tools/layercheck/layers.go", p.path))
			continue
		}
		for _, imp := range p.imports {
			to, toFolder := classify(ls, imp)
			var why string
			switch {
			case to < 0:
				why = fmt.Sprintf("imports %s, which is in no layer", imp)
			case ls[to].testKit && !ls[from].testKit && !ls[from].usesTestKit:
				why = fmt.Sprintf("production code imports the test kit: %s", imp)
			case to > from:
				why = fmt.Sprintf("%s imports %s (%s) from below it", ls[from].name, imp, ls[to].name)
			case to == from && ls[to].apart && toFolder != fromFolder:
				why = fmt.Sprintf("imports %s, another of the %s, which stand apart", imp, ls[to].name)
			case !mayImport(rs, p.path, imp):
				why = fmt.Sprintf("imports %s, which only %s import", imp, strings.Join(rs[reservedFolder(rs, imp)], ", "))
			default:
				continue
			}
			key := [2]string{p.path, imp}
			if _, ok := excused[key]; ok {
				excused[key] = true
				continue
			}
			problems = append(problems, fmt.Sprintf("%s: %s", p.path, why))
		}
	}
	for _, e := range exceptions {
		if checked[e.from] && !excused[[2]string{e.from, e.to}] {
			problems = append(problems, fmt.Sprintf("%s: the known import of %s is gone: remove it from known in internal/tools/layercheck/layers.go", e.from, e.to))
		}
	}
	sort.Strings(problems)
	return problems
}

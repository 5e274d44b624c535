package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// module writes a module with root's path in a temporary folder: files
// maps a file's path to its source.
func module(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["go.mod"] = "module " + root + "\n\ngo 1.26\n"
	for name, src := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	}
	return dir
}

// imports is the source of package name importing paths (relative to
// root).
func imports(name string, paths ...string) string {
	src := "package " + name + "\n\n"
	for _, p := range paths {
		src += "import _ \"" + root + "/" + p + "\"\n"
	}
	return src
}

func TestCheckCatchesABackImportAndTheTestKitInProduction(t *testing.T) {
	dir := module(t, map[string]string{
		"clock/clock.go":                      imports("clock"),
		"kernel/kernel.go":                    imports("kernel", "clock"),
		"ipsets/ipsets.go":                    imports("ipsets", "kernel", "clock"),
		"internal/testkit/kerneltest/kt.go":   imports("kerneltest", "ipsets", "kernel"),
		"ipsets/ipsets_test.go":               imports("ipsets", "internal/testkit/kerneltest"),
		"ipsets/x_test.go":                    imports("ipsets_test", "internal/testkit/kerneltest", "vxlan"),
		"vxlan/vxlan.go":                      imports("vxlan", "ipsets", "kernel"),
		"bench/main.go":                       imports("main", "internal/testkit/kerneltest", "vxlan"),
		"examples/agent/agent.go":             imports("agent", "vxlan"),
		"internal/tools/layercheck/x/main.go": imports("main"),
	})
	graph, err := load(dir)
	require.NoError(t, err)

	// The graph as it is keeps every layer.
	require.Empty(t, check(graph, layers, reserved, nil))

	// A new import from the seam up to a driver, and the test kit in a
	// driver's production code.
	dir = module(t, map[string]string{
		"clock/clock.go":                    imports("clock"),
		"kernel/kernel.go":                  imports("kernel", "clock", "ipsets"),
		"ipsets/ipsets.go":                  imports("ipsets", "clock", "internal/testkit/kerneltest"),
		"ipsets/ipsetsfake/fake.go":         imports("ipsetsfake", "ipsets"),
		"nftables/nftables.go":              imports("nftables", "ipsets/ipsetsfake"),
		"ifacemonitor/monitor.go":           imports("ifacemonitor", "kernel"),
		"dataplane/loop.go":                 imports("dataplane", "ifacemonitor"),
		"endpoints/endpoints.go":            imports("endpoints", "ifacemonitor"),
		"internal/testkit/kerneltest/kt.go": imports("kerneltest", "clock"),
		"examples/agent/agent.go":           imports("agent", "internal/testkit/kerneltest"),
		"newpkg/new.go":                     imports("newpkg"),
	})
	graph, err = load(dir)
	require.NoError(t, err)
	require.Equal(t, []string{
		"endpoints: imports ifacemonitor, which only dataplane, internal/testkit, bench, examples import",
		"examples/agent: production code imports the test kit: internal/testkit/kerneltest",
		"ipsets: production code imports the test kit: internal/testkit/kerneltest",
		"kernel: kernel seam imports ipsets (drivers) from below it",
		"newpkg: in no layer: add it to layers in internal/tools/layercheck/layers.go",
		"nftables: imports ipsets/ipsetsfake, another of the drivers, which stand apart",
	}, check(graph, layers, reserved, nil))

	// A known back-import passes; one that is gone is reported; one whose
	// importer was not checked (another module) is not.
	require.Equal(t, []string{
		"clock: the known import of kernel is gone: remove it from known in internal/tools/layercheck/layers.go",
		"endpoints: imports ifacemonitor, which only dataplane, internal/testkit, bench, examples import",
		"examples/agent: production code imports the test kit: internal/testkit/kerneltest",
		"ipsets: production code imports the test kit: internal/testkit/kerneltest",
		"newpkg: in no layer: add it to layers in internal/tools/layercheck/layers.go",
		"nftables: imports ipsets/ipsetsfake, another of the drivers, which stand apart",
	}, check(graph, layers, reserved, []exception{
		{from: "kernel", to: "ipsets"},
		{from: "clock", to: "kernel"},
		{from: "vxlan", to: "kernel"},
	}))
}

func TestClassifyTakesTheLongestFolder(t *testing.T) {
	name := func(path string) string {
		i, _ := classify(layers, path)
		if i < 0 {
			return ""
		}
		return layers[i].name
	}
	require.Equal(t, "kernel fakes", name("kernel/kernelfake"))
	require.Equal(t, "kernel fakes", name("kernel/kernelfake/iptablesfake"))
	require.Equal(t, "kernel seam", name("kernel/internal/nlutil"))
	require.Equal(t, "kernel seam", name("kernel"))
	require.Equal(t, "drivers", name("nftables/nftablesfake"))
	require.Equal(t, "drivers", name("bpf/maps"))
	require.Equal(t, "managers", name("overlay"))
	require.Equal(t, "test kit", name("overlay/overlaytest"))
	require.Equal(t, "managers", name("internal/tunnel"))
	require.Equal(t, "test kit", name("internal/textform/textformtest"))
	require.Equal(t, "vocabulary", name("internal/textform"))
	require.Equal(t, "documentation and tools", name("."))
	require.Equal(t, "documentation and tools", name("bpf"))
	require.Equal(t, "", name("kernelx"))
	require.Equal(t, "", name("internal"))
}

// TestKnownImportsAreBackImports keeps the list of known imports honest:
// each one points up or reaches the test kit from production code under
// the layers as defined.
func TestKnownImportsAreBackImports(t *testing.T) {
	for _, e := range known {
		graph := []pkg{{path: e.from, imports: []string{e.to}}}
		require.Len(t, check(graph, layers, reserved, nil), 1, "%s → %s", e.from, e.to)
		require.NotEmpty(t, e.by, "%s → %s names who removes it", e.from, e.to)
	}
}

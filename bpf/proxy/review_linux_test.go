//go:build linux

package proxy

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/bpftest"
)

// doHere is a Kernel that runs fn on the calling thread, for tests that
// attach nothing.
type doHere struct{}

func (doHere) Do(fn func() error) error { return fn() }

// foreignPins pins a map under each of names in PinDir/links: objects
// whose names look like the Proxy's attachment pins but are not ones it
// makes.
func foreignPins(t *testing.T, dir string, names ...string) {
	t.Helper()
	links := filepath.Join(dir, linksDir)
	require.NoError(t, os.MkdirAll(links, 0o700))
	for _, n := range names {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
		require.NoError(t, err)
		require.NoError(t, m.Pin(filepath.Join(links, n)))
		require.NoError(t, m.Close())
	}
}

// The stale-pin sweep and Cleanup remove only the names the Proxy makes:
// ingress_<interface>, egress_<interface> with a valid interface name, and
// cgroup_<hook> for its hooks. A pin that merely starts like one is
// foreign and stays.
func TestKernelReviewForeignPinsSurvive(t *testing.T) {
	dir := bpftest.Dir(t)
	foreign := []string{"cgroup_foreign", "ingress_", "egress_longer-than-fifteen-bytes"}
	foreignPins(t, dir, foreign...)
	p, err := New(Options{Kernel: doHere{}, PinDir: dir})
	require.NoError(t, err)
	_, err = p.Apply(context.Background())
	require.NoError(t, err)
	for _, n := range foreign {
		require.FileExists(t, filepath.Join(dir, linksDir, n), "after the sweep")
	}
	require.NoError(t, p.Cleanup(context.Background()))
	for _, n := range foreign {
		require.FileExists(t, filepath.Join(dir, linksDir, n), "after Cleanup")
	}
}

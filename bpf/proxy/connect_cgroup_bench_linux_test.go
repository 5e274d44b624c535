//go:build linux

package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// connBenchCgroup puts one benchmark client thread, and it alone, in a
// cgroup a Proxy's connect-time programs sit on. A cgroup v2 holds whole
// processes unless it is threaded, so for the benchmark the test process
// moves into a new cgroup (root, which becomes a threaded domain) and the
// client thread, while it measures, into root's threaded child (leaf).
// The other threads stay in root, where no program is attached. Cleanup
// moves the process back where it was and removes both.
type connBenchCgroup struct {
	root, leaf string
}

func newConnBenchCgroup(b *testing.B) *connBenchCgroup {
	b.Helper()
	mount := cgroup2Mount(b)
	orig, err := ownCgroup()
	if err != nil {
		b.Fatal(err)
	}
	cg := &connBenchCgroup{root: filepath.Join(mount, fmt.Sprintf("nodeplane-bench-%d", os.Getpid()))}
	cg.leaf = filepath.Join(cg.root, "client")
	if err := os.Mkdir(cg.root, 0o755); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := writeCgroupFile(filepath.Join(mount, orig), "cgroup.procs", os.Getpid()); err != nil {
			b.Errorf("moving the test process back to %s: %v", orig, err)
		}
		removeCgroup(b, cg.leaf)
		removeCgroup(b, cg.root)
	})
	if err := os.Mkdir(cg.leaf, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cg.leaf, "cgroup.type"), []byte("threaded"), 0); err != nil {
		b.Fatalf("making %s threaded: %v", cg.leaf, err)
	}
	if err := writeCgroupFile(cg.root, "cgroup.procs", os.Getpid()); err != nil {
		b.Fatalf("moving the test process to %s: %v", cg.root, err)
	}
	return cg
}

// enter moves the calling thread, which must be locked to its goroutine,
// into the leaf cgroup; the function it returns moves it back to root.
func (cg *connBenchCgroup) enter() (leave func(), err error) {
	tid := unix.Gettid()
	if err := writeCgroupFile(cg.leaf, "cgroup.threads", tid); err != nil {
		return nil, fmt.Errorf("moving thread %d to %s: %w", tid, cg.leaf, err)
	}
	return func() { _ = writeCgroupFile(cg.root, "cgroup.threads", tid) }, nil
}

// writeCgroupFile writes id to file in the cgroup directory dir.
func writeCgroupFile(dir, file string, id int) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(strconv.Itoa(id)), 0)
}

// ownCgroup is the test process's cgroup v2, relative to the hierarchy's
// mount point.
func ownCgroup() (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if path, ok := strings.CutPrefix(s.Text(), "0::"); ok {
			return path, nil
		}
	}
	return "", errors.New("/proc/self/cgroup names no cgroup v2")
}

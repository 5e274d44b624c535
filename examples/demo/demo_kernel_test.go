package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// testWriter hands complete lines to t.Log.
type testWriter struct {
	t   *testing.T
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(p), nil
		}
		w.t.Log(strings.TrimRight(line, "\n"))
	}
}

// TestKernelDemo runs the demo's scenario, as `make demo` does: three nodes
// in fresh namespaces, the agents built from this module, every check. The
// scenario deletes its namespaces and stops its agents whatever happens;
// t.TempDir removes its files.
func TestKernelDemo(t *testing.T) {
	kerneltest.RequireKernel(t)
	kerneltest.RequireCommands(t, "ip", "ping", "ipset", "iptables", "nft", "conntrack")
	dir := t.TempDir()
	bin := filepath.Join(dir, "nodeagent")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to build the agent: %v", err)
	}
	build := exec.Command(goBin, "build", "-o", bin, "../nodeagent")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Scenario{Agent: bin, Out: &testWriter{t: t}, WorkDir: work}
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	// Nothing of the demo's is left.
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	if strings.Contains(string(out), s.prefix) {
		t.Errorf("namespaces left behind:\n%s", out)
	}
}

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// What a run names after its process ID: its network namespaces
// (npe2e<pid>-…) and its work directory (nodeplane-e2e-<pid>-…, holding the
// bpffs mount).
var (
	staleNetns = regexp.MustCompile(`^npe2e(\d+)-`)
	staleWork  = regexp.MustCompile(`/nodeplane-e2e-(\d+)-[^/]*/bpf$`)
)

func nsPrefix() string { return fmt.Sprintf("npe2e%d-", os.Getpid()) }

func workPattern() string { return fmt.Sprintf("nodeplane-e2e-%d-", os.Getpid()) }

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// removeStale deletes what an earlier run killed before its cleanup left:
// its namespaces and its bpffs mount (its processes died with it: they are
// started with a parent-death signal).
func removeStale(t *testing.T) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			if m := staleNetns.FindStringSubmatch(f[0]); m != nil {
				if pid, _ := strconv.Atoi(m[1]); pid != os.Getpid() && !alive(pid) {
					if err := ipCmd("netns", "delete", f[0]); err == nil {
						t.Logf("removed the namespace %s of an earlier run", f[0])
					}
				}
			}
		}
	}
	mounts, err := os.Open("/proc/self/mounts")
	if err != nil {
		return
	}
	defer mounts.Close()
	sc := bufio.NewScanner(mounts)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[2] != "bpf" {
			continue
		}
		if m := staleWork.FindStringSubmatch(f[1]); m != nil {
			if pid, _ := strconv.Atoi(m[1]); pid != os.Getpid() && !alive(pid) {
				if err := unix.Unmount(f[1], unix.MNT_DETACH); err == nil {
					_ = os.RemoveAll(filepath.Dir(f[1]))
					t.Logf("removed the bpffs and work directory %s of an earlier run", filepath.Dir(f[1]))
				}
			}
		}
	}
}

// onInterrupt cleans up when the test gets SIGINT or SIGTERM (Ctrl-C):
// t.Cleanup does not run then. undo stops the processes, deletes the
// namespaces and unmounts. What a run killed otherwise (go test's -timeout
// panics in the test) leaves, the next run removes (removeStale).
func onInterrupt(undo func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			fmt.Fprintf(os.Stderr, "e2e: %v: cleaning up\n", sig)
			undo()
			os.Exit(1)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

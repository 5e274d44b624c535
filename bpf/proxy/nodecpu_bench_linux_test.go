//go:build linux

package proxy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// BenchmarkKernelServiceNodeCPUSideBySide measures the CPU a connection
// costs the node between a client and a backend, apart from what it costs
// them. Every veth of the rigs receives through a NAPI kernel thread of
// its own (GRO on, TSO off so that the sending side hands every packet to
// it, threaded NAPI), so a packet's receive processing runs in the thread
// of the interface it arrived on: the node's work on a packet — the tc
// programs, netfilter, routing, forwarding, the hand-over to the next
// veth — in the thread of a host-side veth; the client's and the
// backend's TCP in the thread of the pod's interface. Reported per rig,
// per connection: the CPU time the host-side threads ran
// (<rig>-node-ns/conn, from /proc/<pid>/schedstat, in nanoseconds), the
// pod-side ones (<rig>-pods-ns/conn) and the client's thread
// (<rig>-client-ns/conn: its system calls, with the connect-time programs
// in them); and the node's against the nftables verdict map's
// (<rig>/nft-node) and kube-proxy's whole nftables table's (<rig>/kp-node).
// For bpf-ct, whose translation runs in the client's
// connect(), bpf-ct/nft-node-with-connect adds what its client ran beyond
// the nft rig's client to its node's CPU. A thread's wake-up per packet is
// part of every rig's figure alike (it inflates the common base: direct
// is the floor). All threads share connBenchCPU and the rigs take turns,
// as in BenchmarkKernelServiceConnectSideBySide (whose direct, bpf, bpf-ct,
// nft and kp rigs these are). bpf-lr is left out: its bpf_redirect_peer
// hands a packet to the pod's interface inside the host-side thread, so
// the pod's own receive processing would count as the node's.
// Run it with -benchtime 30x or more.
func BenchmarkKernelServiceNodeCPUSideBySide(b *testing.B) {
	const n = 10000
	kerneltest.RequireCommands(b, "nft", "unshare", "mount")
	set := newConnBenchRigs(b, n, false)
	rigs := set.targets
	// The NAPI threads of each rig: its host's side, its pods' side.
	var node, pods [][]int
	for _, r := range set.rigs {
		var hostSide, podSide []int
		for _, p := range []*kerneltest.Pod{r.client, r.backend} {
			hostSide = append(hostSide, connBenchNAPIThread(b, r.topo.Hosts[0].NS, p.HostVeth))
			podSide = append(podSide, connBenchNAPIThread(b, p.NS, p.Iface))
		}
		node, pods = append(node, hostSide), append(pods, podSide)
	}
	runtimes := func() (out [][2]time.Duration) {
		for i := range rigs {
			out = append(out, [2]time.Duration{threadRuntime(b, node[i]...), threadRuntime(b, pods[i]...)})
		}
		return out
	}
	rounds := b.N
	b.ResetTimer()
	before := runtimes()
	results, err := connBenchTakeTurns(rigs, rounds)
	after := runtimes()
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	set.checkConnectTime(b)
	conns := float64((rounds + 1) * connBenchTurn) // the warm-up's included
	perConn := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / conns }
	nodeCPU, clientCPU := map[string]float64{}, map[string]float64{}
	for i, r := range rigs {
		nodeCPU[r.name], clientCPU[r.name] = perConn(after[i][0]-before[i][0]), perConn(results[i].clientCPU)
		if nodeCPU[r.name] == 0 {
			b.Fatalf("%s: the host-side NAPI threads ran nothing: the packets did not go through them", r.name)
		}
		b.ReportMetric(nodeCPU[r.name], r.name+"-node-ns/conn")
		b.ReportMetric(perConn(after[i][1]-before[i][1]), r.name+"-pods-ns/conn")
		b.ReportMetric(clientCPU[r.name], r.name+"-client-ns/conn")
	}
	for _, r := range []string{"direct", "bpf", "bpf-ct"} {
		b.ReportMetric(nodeCPU[r]/nodeCPU["nft"], r+"/nft-node")
		b.ReportMetric(nodeCPU[r]/nodeCPU["kp"], r+"/kp-node")
	}
	b.ReportMetric((nodeCPU["bpf-ct"]+clientCPU["bpf-ct"]-clientCPU["nft"])/nodeCPU["nft"], "bpf-ct/nft-node-with-connect")
}

// connBenchNAPIThread makes dev, a veth in ns, receive through a NAPI
// kernel thread of its own, pins the thread to connBenchCPU and returns
// its pid. A veth receives through NAPI once GRO is on, and a packet its
// peer sends takes that way only while the peer's TSO is off, so every
// veth of a rig gets GRO on and TSO off (a connection of one-byte messages
// never segments); threaded NAPI is turned on through a sysfs of ns, mounted in
// a mount namespace of its own. The thread goes with the device.
func connBenchNAPIThread(b *testing.B, ns *kerneltest.NS, dev string) int {
	b.Helper()
	const ethtoolSTSO, ethtoolSGRO = 0x1f, 0x2c
	before := napiThreads(b)
	if err := ns.Do(func() error {
		if err := testEthtoolSet(dev, ethtoolSTSO, false); err != nil {
			return err
		}
		return testEthtoolSet(dev, ethtoolSGRO, true)
	}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	script := fmt.Sprintf("mount -t sysfs sysfs /sys && echo 1 > /sys/class/net/%s/threaded", dev)
	if out, err := ns.Exec(ctx, "unshare", "-m", "sh", "-c", script); err != nil {
		b.Fatalf("threaded NAPI on %s: %v\n%s", dev, err, out)
	}
	var added []int
	for pid := range napiThreads(b) {
		if !before[pid] {
			added = append(added, pid)
		}
	}
	if len(added) != 1 {
		b.Fatalf("threaded NAPI on %s: %d new NAPI threads, want 1", dev, len(added))
	}
	var mask unix.CPUSet
	mask.Set(connBenchCPU)
	if err := unix.SchedSetaffinity(added[0], &mask); err != nil {
		b.Fatalf("pinning the NAPI thread of %s: %v", dev, err)
	}
	return added[0]
}

// napiThreads lists the pids of the NAPI kernel threads ("napi/…").
func napiThreads(b *testing.B) map[int]bool {
	b.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	pids := map[int]bool{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", d.Name(), "comm"))
		if err == nil && strings.HasPrefix(string(comm), "napi/") {
			pids[pid] = true
		}
	}
	return pids
}

// threadRuntime sums the CPU time the threads ran.
func threadRuntime(b *testing.B, pids ...int) time.Duration {
	b.Helper()
	var sum time.Duration
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(string(data))
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		sum += time.Duration(ns)
	}
	return sum
}

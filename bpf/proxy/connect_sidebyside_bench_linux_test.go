//go:build linux

package proxy

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// BenchmarkKernelServiceConnectSideBySide measures the connection of
// BenchmarkKernelServiceConnect for several dataplanes at once, taking
// turns, so that what slows the machine down for a while (another process,
// the hypervisor taking the CPU) slows them all alike and their ratios hold:
// runs of BenchmarkKernelServiceConnect one after another vary by ±15% on
// a busy 2-core machine, more than the differences it is there to show.
//
// Six rigs of one host and two pods each are made side by side: direct
// (the client dials the backend), bpf (a Proxy with N services), bpf-lr
// (the same with Options.LocalRedirect), bpf-ct (the same with
// Options.ConnectTimePods, its client thread in the cgroup the programs
// sit on: connBenchCgroup), nft (N services in kube-proxy's nftables
// layout, the last one measured: nftServices, the verdict map's path
// alone) and kp (the same in kube-proxy's whole nftables table, the
// filter checks and masquerading every connection also crosses:
// kubeProxyServices). One op is a round: connBenchTurn
// connections through each rig in turn, every client and server thread
// pinned to the same CPU.
// Reported per rig: the mean time per connection (<rig>-ns/conn, the CPU a
// connection costs, since one CPU does all the work), its p50
// (<rig>-p50-ns) and the p50 of the handshake (<rig>-connect-p50-ns); and
// the ratios the project's targets are stated in: bpf/nft-conn (per
// connection, bpf/proxy against the verdict map), bpf/nft-p50,
// bpf/direct-conn, bpf/direct-p50 (the connection's p50) and
// bpf/direct-connect-p50 (the handshake's), bpf/kp-p50 (against kube-proxy's
// whole table), and the same for bpf-lr and bpf-ct; and what the proxy
// itself adds to a connection, its p50 less the direct one's, against what
// the verdict map adds (bpf/nft-added-p50) and what kube-proxy's whole
// table adds (bpf/kp-added-p50): the CPU each spends on a connection
// beside the application's own, which is the same for all. cpu-busy is the share of the measuring CPU's time
// it spent busy while the rigs took turns (from /proc/stat): near 1, a
// connection's time is the CPU it costs. Run it with -benchtime 40x or
// more.
func BenchmarkKernelServiceConnectSideBySide(b *testing.B) {
	const n = 10000
	kerneltest.RequireCommands(b, "nft")
	set := newConnBenchRigs(b, n, true)
	rigs := set.targets
	rounds := b.N
	b.ResetTimer()
	busy0, total0, statErr := connBenchCPUTicks()
	results, err := connBenchTakeTurns(rigs, rounds)
	busy1, total1, statErr1 := connBenchCPUTicks()
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if statErr == nil && statErr1 == nil && total1 > total0 {
		// Near 1: the CPU never waited, so a connection's time is its CPU.
		b.ReportMetric(float64(busy1-busy0)/float64(total1-total0), "cpu-busy")
	}
	set.checkConnectTime(b)
	mean, p50, connectP50 := map[string]float64{}, map[string]float64{}, map[string]float64{}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[(len(d)-1)/2].Nanoseconds())
	}
	for i, r := range rigs {
		res := results[i]
		mean[r.name] = float64(res.sum.Nanoseconds()) / float64(len(res.total))
		p50[r.name], connectP50[r.name] = median(res.total), median(res.connect)
		b.ReportMetric(mean[r.name], r.name+"-ns/conn")
		b.ReportMetric(p50[r.name], r.name+"-p50-ns")
		b.ReportMetric(connectP50[r.name], r.name+"-connect-p50-ns")
	}
	for _, r := range []string{"bpf", "bpf-lr", "bpf-ct"} {
		b.ReportMetric(mean[r]/mean["nft"], r+"/nft-conn")
		b.ReportMetric(p50[r]/p50["nft"], r+"/nft-p50")
		b.ReportMetric((p50[r]-p50["direct"])/(p50["nft"]-p50["direct"]), r+"/nft-added-p50")
		b.ReportMetric(p50[r]/p50["kp"], r+"/kp-p50")
		b.ReportMetric((p50[r]-p50["direct"])/(p50["kp"]-p50["direct"]), r+"/kp-added-p50")
		b.ReportMetric(mean[r]/mean["direct"], r+"/direct-conn")
		b.ReportMetric(p50[r]/p50["direct"], r+"/direct-p50")
		b.ReportMetric(connectP50[r]/connectP50["direct"], r+"/direct-connect-p50")
	}
}

// connBenchCPUTicks reads connBenchCPU's line of /proc/stat: the clock
// ticks it spent busy (anything but idle and iowait) and in all.
func connBenchCPUTicks() (busy, total uint64, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	prefix := fmt.Sprintf("cpu%d ", connBenchCPU)
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		for i, f := range strings.Fields(rest) {
			n, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return 0, 0, err
			}
			total += n
			if i != 3 && i != 4 { // idle, iowait
				busy += n
			}
		}
		return busy, total, nil
	}
	return 0, 0, fmt.Errorf("/proc/stat has no %q line", prefix)
}

// connBenchThreadCPU is the CPU time the calling thread has run.
func connBenchThreadCPU() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}

// connBenchTurn is how many connections a rig makes in one turn.
const connBenchTurn = 50

// connBenchRigs are the rigs the side-by-side benchmarks compare, each on
// a host of its own, in the order they take turns: direct (no service),
// bpf, bpf-lr (LocalRedirect, when asked for), bpf-ct (ConnectTimePods),
// nft (the verdict map's path) and kp (kube-proxy's whole table), the
// services n of them. rigs[i] is targets[i]'s.
type connBenchRigs struct {
	targets []connBenchTarget
	rigs    []*connBenchRig
	n       int
	ct      *Proxy // bpf-ct's
}

// newConnBenchRigs builds the rigs of n services, bpf-lr among them when
// withLR.
func newConnBenchRigs(b *testing.B, n int, withLR bool) *connBenchRigs {
	b.Helper()
	set := &connBenchRigs{n: n}
	add := func(name string, to netip.AddrPort, enter func() (func(), error), build func(*connBenchRig)) {
		r := newConnBenchRig(b)
		if build != nil {
			build(r)
		}
		if !to.IsValid() {
			to = r.backendAddr
		}
		set.rigs = append(set.rigs, r)
		set.targets = append(set.targets, connBenchTarget{name: name, from: r.client.NS, to: to, enter: enter})
	}
	add("direct", netip.AddrPort{}, nil, nil)
	add("bpf", connBenchServiceAddr(n/2), nil, func(r *connBenchRig) { r.bpfServices(b, n) })
	if withLR {
		add("bpf-lr", connBenchServiceAddr(n/2), nil, func(r *connBenchRig) {
			r.bpfServicesWith(b, n, func(o *Options) { o.LocalRedirect = true })
		})
	}
	cg := newConnBenchCgroup(b)
	add("bpf-ct", connBenchServiceAddr(n/2), cg.enter, func(r *connBenchRig) {
		set.ct = r.bpfServicesWith(b, n, func(o *Options) { o.Cgroup, o.ConnectTimePods = cg.leaf, true })
	})
	add("nft", connBenchServiceAddr(n-1), nil, func(r *connBenchRig) { r.nftServices(b, n) })
	add("kp", connBenchServiceAddr(n-1), nil, func(r *connBenchRig) { r.kubeProxyServices(b, n) })
	return set
}

// checkConnectTime fails b unless bpf-ct's connections were translated at
// connect(), not per packet: its service counted connections and no
// packets.
func (set *connBenchRigs) checkConnectTime(b *testing.B) {
	b.Helper()
	if c := set.ct.Counters()[connBenchServiceName(set.n/2)]; c.Connections == 0 || c.Packets != 0 {
		b.Fatalf("bpf-ct: the measured service's counters are %+v: its connections were not translated at connect()", c)
	}
}

// connBenchTarget is one rig's client namespace and what its client dials;
// enter, when set, is called on the client's thread before it measures
// (connBenchCgroup.enter).
type connBenchTarget struct {
	name  string
	from  *kerneltest.NS
	to    netip.AddrPort
	enter func() (leave func(), err error)
}

// connBenchTimes is what one rig measured: the summed time of its
// connections, each one's time and each one's handshake, and the CPU time
// its client thread ran for all of them, the warm-up's included
// (clientCPU, CLOCK_THREAD_CPUTIME_ID: the client's system calls, and the
// connect-time programs, which run in them).
type connBenchTimes struct {
	sum            time.Duration
	total, connect []time.Duration
	clientCPU      time.Duration
}

// connBenchTakeTurns runs rounds rounds of connBenchTurn connections per
// target, the targets taking turns in order, each from one thread locked
// in its client namespace and pinned by connBenchPin. Every target is
// warmed up first (50 connections, untimed).
func connBenchTakeTurns(targets []connBenchTarget, rounds int) ([]connBenchTimes, error) {
	results := make([]connBenchTimes, len(targets))
	// true: go on; false: stop. Room for two, so that the stop a target
	// passes on never waits, even on a turn still queued.
	turns := make([]chan bool, len(targets))
	for i := range turns {
		turns[i] = make(chan bool, 2)
	}
	errs := make(chan error, len(targets))
	for i, t := range targets {
		go func() {
			ran := false
			defer func() {
				if !ran { // the namespace could not be entered: stop the others
					turns[(i+1)%len(turns)] <- false
				}
			}()
			errs <- t.from.Do(func() error {
				ran = true
				if t.enter != nil {
					leave, err := t.enter()
					if err != nil {
						turns[(i+1)%len(turns)] <- false
						return err
					}
					defer leave()
				}
				defer connBenchPin()()
				cpu0, err := connBenchThreadCPU()
				if err != nil {
					turns[(i+1)%len(turns)] <- false
					return err
				}
				sa := &unix.SockaddrInet4{Port: int(t.to.Port()), Addr: t.to.Addr().As4()}
				buf := make([]byte, 1)
				next := turns[(i+1)%len(turns)]
				res := &results[i]
				res.total = make([]time.Duration, 0, rounds*connBenchTurn)
				res.connect = make([]time.Duration, 0, rounds*connBenchTurn)
				for round := 0; ; round++ {
					if !<-turns[i] {
						next <- false
						cpu1, err := connBenchThreadCPU()
						res.clientCPU = cpu1 - cpu0
						return err
					}
					warm := round == 0
					for range connBenchTurn {
						start := time.Now()
						connected, err := connBenchOnce(sa, buf)
						end := time.Now()
						if err != nil {
							next <- false
							return fmt.Errorf("%s: %w", t.name, err)
						}
						if !warm {
							res.sum += end.Sub(start)
							res.total = append(res.total, end.Sub(start))
							res.connect = append(res.connect, connected.Sub(start))
						}
					}
					// The last target ends a round; round 0 is the warm-up.
					next <- !(i == len(targets)-1 && round == rounds)
				}
			})
		}()
	}
	turns[0] <- true
	var first error
	for range targets {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return results, first
}

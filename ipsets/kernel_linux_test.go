package ipsets_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
)

func iptablesFor(fam ipsets.Family) string {
	if fam == ipsets.IPv6 {
		return "ip6tables"
	}
	return "iptables"
}

// openKernel opens the test namespace ns as the Kernel of a driver: the
// one way a driver reaches a namespace. It is closed when the test ends.
func openKernel(t *testing.T, ns *kerneltest.NS) *kernel.Namespace {
	t.Helper()
	k, err := kernel.Open(ns.Path())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, k.Close()) })
	return k
}

// kernelEnv is the scenario environment of a fresh network namespace,
// opened with kernel.Open: ipset runs inside it, and a reference is an
// iptables (ip6tables) rule matching the set.
func kernelEnv(t *testing.T) env {
	kerneltest.RequireCommands(t, "ipset", "iptables", "ip6tables")
	ns := kerneltest.NewNS(t)
	ctx := context.Background()
	netnet := false
	if _, err := ns.Exec(ctx, "ipset", "create", "probe-netnet", "hash:net,net"); err == nil {
		netnet = true
		_, err := ns.Exec(ctx, "ipset", "destroy", "probe-netnet")
		require.NoError(t, err)
	} else {
		require.Contains(t, err.Error(), "set type not supported", "probing hash:net,net")
	}
	return env{
		kernel: openKernel(t, ns),
		reference: func(t *testing.T, kname string, fam ipsets.Family, _ netfilter.SetType) func() {
			rule := []string{"INPUT", "-m", "set", "--match-set", kname, "src", "-j", "ACCEPT"}
			_, err := ns.Exec(ctx, iptablesFor(fam), append([]string{"-w", "-A"}, rule...)...)
			require.NoError(t, err)
			var once sync.Once
			return func() {
				once.Do(func() {
					_, err := ns.Exec(ctx, iptablesFor(fam), append([]string{"-w", "-D"}, rule...)...)
					assert.NoError(t, err)
				})
			}
		},
		netnet: netnet,
	}
}

// TestKernelScenarios runs the scenario suite against the real kernel, each
// scenario in a fresh network namespace.
func TestKernelScenarios(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, kernelEnv(t)) })
	}
}

// TestKernelSwapUnderTraffic resizes a set many times (each resize swaps a
// new set in) while an iptables rule lets a client in only through the set
// and the client connects continuously: no connection may fail.
func TestKernelSwapUnderTraffic(t *testing.T) {
	kerneltest.RequireCommands(t, "ipset", "iptables", "ip6tables")
	topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 1, PodsPerHost: 1})
	host, pod := topo.Hosts[0], topo.Hosts[0].Pods[0]
	for _, fam := range families {
		t.Run(fam.String(), func(t *testing.T) {
			ctx := context.Background()
			serverAddr, client := host.UnderlayIPv4.Addr(), pod.IPv4
			if fam == ipsets.IPv6 {
				serverAddr, client = host.UnderlayIPv6.Addr(), pod.IPv6
			}
			server, _ := host.NS.ListenTCP(t, netip.AddrPortFrom(serverAddr, 0))
			port := strconv.Itoa(int(server.Port()))

			d, rec := newDriver(t, env{kernel: openKernel(t, host.NS)}, fam)
			filler := manyIPs(fam, 6000)
			members := append([]netfilter.Member{netfilter.IPMember(client)}, filler...)
			require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "allow", Type: netfilter.HashIP, MaxSize: 10000}, members))
			apply(t, d)

			ipt := iptablesFor(fam)
			for _, rule := range [][]string{
				{"-A", "INPUT", "-p", "tcp", "--dport", port, "-m", "set", "--match-set", prefixOf(fam) + "allow", "src", "-j", "ACCEPT"},
				{"-A", "INPUT", "-p", "tcp", "--dport", port, "-j", "DROP"},
			} {
				_, err := host.NS.Exec(ctx, ipt, append([]string{"-w"}, rule...)...)
				require.NoError(t, err)
			}
			kerneltest.Require(t, kerneltest.TCPCheck(pod.NS, server))

			var ok, failed atomic.Int64
			var firstErr atomic.Value
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
					err := pod.NS.DialTCP(cctx, server)
					cancel()
					if err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					} else {
						ok.Add(1)
					}
				}
			})
			rec.reset()
			const resizes = 30
			for i := range resizes {
				n := 1000 + 150*i
				meta := netfilter.SetMetadata{Name: "allow", Type: netfilter.HashIP, MaxSize: 10000 + i + 1}
				require.NoError(t, d.AddOrReplaceSet(meta, members[:n]))
				apply(t, d)
				// Let some connections through between swaps.
				for start := ok.Load(); ok.Load() < start+2 && failed.Load() == 0; {
					time.Sleep(time.Millisecond)
				}
			}
			close(stop)
			wg.Wait()
			assert.Equal(t, resizes, rec.count("restore"))
			assert.Equal(t, resizes, strings.Count(strings.Join(restores(rec), ""), "\nswap "), "every resize swapped")
			assert.Zero(t, failed.Load(), "connections failed during swaps: first error %v", firstErr.Load())
			assert.GreaterOrEqual(t, ok.Load(), int64(2*resizes))
			t.Logf("%v: %d connections succeeded across %d swaps", fam, ok.Load(), resizes)

			// The set really is in the path: without the client it is cut.
			require.NoError(t, d.RemoveMembers("allow", []netfilter.Member{netfilter.IPMember(client)}))
			apply(t, d)
			kerneltest.Require(t, kerneltest.Not(kerneltest.TCPCheck(pod.NS, server)))
		})
	}
}

func restores(r *recorder) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.calls {
		if len(c.args) > 0 && c.args[0] == "restore" {
			out = append(out, c.stdin)
		}
	}
	return out
}

// TestKernelFakeMatchesKernel feeds the same commands to the fake and to the
// kernel, including failing ones, and compares their outputs and errors.
func TestKernelFakeMatchesKernel(t *testing.T) {
	ke := kernelEnv(t)
	fe := fakeEnv(ke.netnet)
	ctx := context.Background()
	scripts := []string{
		"create a hash:ip family inet maxelem 4 -exist\nadd a 10.0.0.1\nadd a 10.0.0.2 -exist\n",
		"add a 10.0.0.1\n",
		"del a 10.9.9.9\n",
		"del a 10.9.9.9 -exist\n",
		"add a fd00::1\n",
		"add nope 10.0.0.1\n",
		"add a 10.0.0.3\nadd a 10.0.0.4\nadd a 10.0.0.5\n",
		"create a hash:ip family inet maxelem 8 -exist\n",
		"create b hash:net family inet6\nadd b fd00::1/128\nadd b fd00:1:2::3/48\nadd b ::/0\n",
		"create c hash:ip,port family inet\nadd c 10.0.0.1,80\nadd c 10.0.0.1,udp:53\nadd c 10.0.0.1,tcp:80\n",
		"create d bitmap:port range 10-20\nadd d 15\nadd d 21\n",
		"create t hash:net family inet\nswap a t\n",
		"create u hash:ip family inet maxelem 100\nadd u 10.0.0.7\nswap a u\ndestroy u\n",
		"destroy nope\n",
		"create n hash:net family inet\nadd n 10.1.2.3/8\nadd n 0.0.0.0/32\n",
		"create m hash:net family inet6\nadd m fd00::1/64\nadd m ::1.2.3.4/120\n",
		"create z hash:ip family inet6\nadd z ::2:0\nadd z ::ffff:1.2.3.4\nadd z ::0.0.0.1\n",
		"add z ::\n",
		"add a 0.0.0.0\n",
		"create y hash:ip,port family inet\nadd y 10.0.0.1,udp:0\nadd y 0.0.0.0,tcp:80\n",
		"create w hash:ip family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x12345678\nadd w 10.0.0.1\n",
	}
	for i, script := range scripts {
		kout, kerr := ke.ipset(ctx, strings.NewReader(script), "restore")
		fout, ferr := fe.ipset(ctx, strings.NewReader(script), "restore")
		assert.Equal(t, string(kout), string(fout), "script %d stdout", i)
		assert.Equal(t, kerr == nil, ferr == nil, "script %d: kernel %v, fake %v", i, kerr, ferr)
		if kerr != nil && ferr != nil {
			t.Logf("script %d: kernel: %s", i, ipsetMessage(kerr))
			assert.Equal(t, ipsetMessage(kerr), ipsetMessage(ferr), "script %d", i)
		}
	}
	for _, args := range [][]string{{"test", "a", "10.0.0.1"}, {"test", "a", "10.9.9.9"}, {"test", "nope", "10.0.0.1"}, {"test", "n", "10.0.0.0/8"}} {
		_, kerr := ke.ipset(ctx, nil, args...)
		_, ferr := fe.ipset(ctx, nil, args...)
		assert.Equal(t, kerr == nil, ferr == nil, "%v: kernel %v, fake %v", args, kerr, ferr)
		if kerr != nil && ferr != nil {
			tail := func(err error) string {
				msg := ipsetMessage(err)
				if _, after, ok := strings.Cut(msg, "exit status 1: "); ok {
					return after
				}
				return msg
			}
			assert.Equal(t, tail(kerr), tail(ferr), "%v", args)
		}
	}
	for _, name := range []string{"a", "b", "c", "d", "t", "n", "m", "z", "y", "w"} {
		k, kok := ke.read(t, name)
		f, fok := fe.read(t, name)
		assert.Equal(t, kok, fok, name)
		assert.Equal(t, k, f, name)
	}
	assert.Equal(t, ke.names(t), fe.names(t))
}

// ipsetMessage extracts "Error in line N: message" (or the message) from a
// failed ipset's error.
func ipsetMessage(err error) string {
	s := err.Error()
	if i := strings.Index(s, "ipset v"); i >= 0 {
		s = s[i:]
		if j := strings.Index(s, ": "); j >= 0 {
			s = s[j+2:]
		}
	}
	return strings.TrimSpace(s)
}

// TestKernelApplyThenResyncWritesNothing checks the property of
// TestApplyThenResyncWritesNothing against the real kernel for a sample of
// seeds: whatever the API accepts, the kernel stores as the driver models
// it, so a resync or a restart writes nothing.
func TestKernelApplyThenResyncWritesNothing(t *testing.T) {
	e := kernelEnv(t)
	for seed := uint64(1000); seed < 1024; seed++ {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			runProperty(t, e, seed)
		})
	}
}

// roundIPs returns n members of fam that belong to round alone.
func roundIPs(fam ipsets.Family, round, n int) []netfilter.Member {
	out := make([]netfilter.Member, n)
	for i := range n {
		if fam == ipsets.IPv6 {
			out[i] = netfilter.IPMember(netip.AddrFrom16([16]byte{0: 0xfd, 2: byte(round >> 8), 3: byte(round), 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}))
		} else {
			out[i] = netfilter.IPMember(netip.AddrFrom4([4]byte{byte(10 + round>>8), byte(round), byte(i >> 8), byte(i)}))
		}
	}
	return out
}

// TestKernelUpdatesNeverShrinkSet updates a large set many times — most of
// it replaced (a swap), then a few members (in place), in turn — while a
// poller in the namespace keeps asking the kernel whether a member that
// stays desired is in the set (`ipset test`) and how many members the set
// has (`ipset list -t`). The set's size is the same before and after every
// update, so a rule matching it must never see it smaller, nor without the
// kept member. (Every delete before every add, as the driver used to write
// an update, left it nearly empty for most of the update.) It runs until
// the poller has sampled the set in the middle of enough updates.
func TestKernelUpdatesNeverShrinkSet(t *testing.T) {
	kerneltest.RequireCommands(t, "ipset")
	for _, fam := range families {
		t.Run(fam.String(), func(t *testing.T) {
			ns := kerneltest.NewNS(t)
			e := env{kernel: openKernel(t, ns)}
			d, rec := newDriver(t, e, fam)
			const n, nKept = 20000, 100
			kept := roundIPs(fam, 0, nKept)
			cur := append(slices.Clone(kept), roundIPs(fam, 1, n-nKept)...)
			meta := netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}
			require.NoError(t, d.AddOrReplaceSet(meta, cur))
			apply(t, d)
			kname := prefixOf(fam) + "s"
			probe := kept[nKept/2].String()

			ctx := context.Background()
			var gen atomic.Int64 // odd while an Apply runs
			var samples, during atomic.Int64
			var mu sync.Mutex
			var failures []string
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					g0 := gen.Load()
					_, terr := ns.Exec(ctx, "ipset", "test", kname, probe)
					out, lerr := ns.Exec(ctx, "ipset", "list", "-t", kname)
					g1 := gen.Load()
					var bad []string
					if terr != nil {
						bad = append(bad, "kept member: "+terr.Error())
					}
					switch {
					case lerr != nil:
						bad = append(bad, "list: "+lerr.Error())
					case entriesOf(string(out)) < n:
						bad = append(bad, "entries: "+strconv.Itoa(entriesOf(string(out))))
					}
					samples.Add(1)
					if g0%2 == 1 || g1 != g0 {
						during.Add(1)
					}
					if len(bad) > 0 {
						mu.Lock()
						if len(failures) < 10 {
							failures = append(failures, fmt.Sprintf("update %d: %v", g0/2+1, bad))
						}
						mu.Unlock()
					}
				}
			})
			const wantDuring = 100
			rec.reset()
			round := 2
			for ; during.Load() < wantDuring && round < 400; round++ {
				if round%2 == 0 {
					cur = append(slices.Clone(kept), roundIPs(fam, round, n-nKept)...)
				} else {
					cur = append(cur[:n-50:n-50], roundIPs(fam, round, 50)...)
				}
				require.NoError(t, d.AddOrReplaceSet(meta, cur))
				gen.Add(1)
				_, err := d.Apply(ctx)
				gen.Add(1)
				require.NoError(t, err)
			}
			close(stop)
			wg.Wait()
			updates := round - 2
			t.Logf("%v: %d updates, %d samples, %d during an update", fam, updates, samples.Load(), during.Load())
			require.GreaterOrEqual(t, during.Load(), int64(wantDuring), "the poller must sample the set during updates")
			assert.Empty(t, failures, "a rule saw the set shrink or lose a kept member")
			swaps := strings.Count(strings.Join(restores(rec), ""), "\nswap "+kname+" ")
			assert.Equal(t, (updates+1)/2, swaps, "replacing most of the set swaps, a few members are changed in place")
			ks, _ := e.read(t, kname)
			assert.Len(t, ks.members, n)
		})
	}
}

// entriesOf returns the "Number of entries" of `ipset list -t` output, or
// -1.
func entriesOf(out string) int {
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(line, "Number of entries:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return -1
}

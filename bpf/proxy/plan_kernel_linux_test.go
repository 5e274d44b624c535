//go:build linux

package proxy

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/bpftest"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
)

// proxyKernel is what a Proxy holds in the kernel, read without it: each
// map entry ("map key → value", in hex as a Plan says it), each
// attachment pin of linksDir with the ID of the program its link runs, and
// each classic tc filter of ours ("tc <dir>_<interface>", readTCFilters)
// with the ID of its program.
type proxyKernel struct {
	entries map[string]string // "fe key" or "be key" → value
	pins    map[string]ebpf.ProgramID
}

func hexOf(x any) string {
	b, err := binary.Append(nil, binary.NativeEndian, x)
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("%x", b)
}

// readProxyKernel reads the Proxy's maps and pins.
func readProxyKernel(t *testing.T, p *Proxy) proxyKernel {
	t.Helper()
	pk := proxyKernel{entries: map[string]string{}, pins: map[string]ebpf.ProgramID{}}
	var fk feKey
	var fv feVal
	it := p.k.fe.Iterate()
	for it.Next(&fk, &fv) {
		pk.entries["fe "+hexOf(fk)] = hexOf(fv)
	}
	require.NoError(t, it.Err())
	var bk beKey
	var bv beVal
	it = p.k.be.Iterate()
	for it.Next(&bk, &bv) {
		pk.entries["be "+hexOf(bk)] = hexOf(bv)
	}
	require.NoError(t, it.Err())
	var mk mgKey
	it = p.k.mg.Iterate()
	for it.Next(&mk, &bv) {
		pk.entries["mg "+hexOf(mk)] = hexOf(bv)
	}
	require.NoError(t, it.Err())
	dir := filepath.Join(p.o.PinDir, linksDir)
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, f := range files {
		l, err := link.LoadPinnedLink(filepath.Join(dir, f.Name()), nil)
		require.NoError(t, err)
		info, err := l.Info()
		require.NoError(t, err)
		pk.pins[f.Name()] = info.Program
		require.NoError(t, l.Close())
	}
	for k, id := range readTCFilters(t, p.o.Kernel) {
		pk.pins[k] = id
	}
	return pk
}

// planDiff is what a Plan says changes: the entries by "map key" (a
// Plan's write of the frontend map when its Object's key is a frontend
// key's size) with their new value ("" when deleted), and the pins by file
// name (classic tc filters as readTCFilters names them) with their op.
func planDiff(t *testing.T, pl dataplane.Plan) (entries map[string]string, pins map[string]dataplane.WriteOp) {
	t.Helper()
	entries, pins = map[string]string{}, map[string]dataplane.WriteOp{}
	for _, w := range pl.Writes {
		switch w.Kind {
		case "entry", kindMaglevSlot:
			key, val, ok := strings.Cut(w.Object, " → ")
			require.True(t, ok, w.Object)
			m := "be "
			switch {
			case w.Kind == kindMaglevSlot:
				m = "mg "
			case len(key) == 2*binary.Size(feKey{}):
				m = "fe "
			}
			if w.Op == dataplane.WriteDelete {
				val = ""
			}
			_, dup := entries[m+key]
			require.False(t, dup, "one write per entry: %v", w)
			entries[m+key] = val
		case kindAttach:
			f := strings.Fields(w.Object)
			require.GreaterOrEqual(t, len(f), 2, w.Object)
			key := f[1] + "_" + f[0]
			if strings.HasSuffix(w.Object, " (tc)") {
				key = "tc " + key
			}
			_, dup := pins[key]
			require.False(t, dup, "one write per attachment: %v", w)
			pins[key] = w.Op
		default:
			t.Fatalf("unknown kind in %v", w)
		}
	}
	return entries, pins
}

// kernelDiff is what changed from before to after, in planDiff's terms.
func kernelDiff(before, after proxyKernel) (entries map[string]string, pins map[string]dataplane.WriteOp) {
	entries, pins = map[string]string{}, map[string]dataplane.WriteOp{}
	for k, v := range after.entries {
		if before.entries[k] != v {
			entries[k] = v
		}
	}
	for k := range before.entries {
		if _, ok := after.entries[k]; !ok {
			entries[k] = ""
		}
	}
	for f, id := range after.pins {
		old, ok := before.pins[f]
		switch {
		case !ok:
			pins[f] = dataplane.WriteAdd
		case old != id:
			pins[f] = dataplane.WriteReplace
		}
	}
	for f := range before.pins {
		if _, ok := after.pins[f]; !ok {
			pins[f] = dataplane.WriteDelete
		}
	}
	return entries, pins
}

// genService returns service i at random: IPv4, IPv6 or both, a NodePort
// sometimes, zero to four backends of its families.
func genService(r *rand.Rand, i int) cluster.Service {
	s := cluster.Service{Name: fmt.Sprintf("ns/svc-%d:p", i), Port: uint16(80 + r.IntN(3)), Protocol: []cluster.Protocol{cluster.TCP, cluster.UDP}[r.IntN(2)]}
	v4, v6 := r.IntN(3) != 1, r.IntN(3) != 0
	if v4 {
		s.ClusterIPs = append(s.ClusterIPs, netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}))
	}
	if v6 {
		s.ClusterIPs = append(s.ClusterIPs, netip.AddrFrom16([16]byte{0: 0xfd, 1: 0x96, 14: byte(i >> 8), 15: byte(i)}))
	}
	if r.IntN(4) == 0 {
		s.NodePort = uint16(30000 + i)
	}
	for j := range r.IntN(5) {
		a := netip.AddrFrom4([4]byte{10, 244, byte(r.IntN(4)), byte(j + 1)})
		if !v4 || (v6 && r.IntN(2) == 0) {
			a = netip.AddrFrom16([16]byte{0: 0xfd, 1: 0x44, 14: byte(r.IntN(4)), 15: byte(j + 1)})
		}
		s.Backends = append(s.Backends, cluster.Backend{Addr: netip.AddrPortFrom(a, uint16(8080+r.IntN(2))), Local: r.IntN(2) == 0})
	}
	return s
}

// For random services (both families, NodePorts, backends added, changed
// and removed), interfaces that come and go, and entries deleted behind
// the Proxy's back: Plan writes nothing, the next Apply makes exactly the
// planned writes (the maps and the attachment pins, or the classic tc
// filters, change by them, and Stats counts as many), and then the Plan is
// empty and State in sync; in each attach mode.
func TestKernelProxyPlanProperties(t *testing.T) { attachModes(t, testKernelProxyPlanProperties) }

func testKernelProxyPlanProperties(t *testing.T, mode AttachMode) {
	ctx := context.Background()
	planned := map[string]int{} // by op and kind
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 5))
			ns := kerneltest.NewNS(t)
			ifaces := []string{"eth0", "veth1", "veth2", "veth3"}
			for _, n := range ifaces {
				out, err := ns.Exec(ctx, "ip", "link", "add", n, "up", "type", "bridge")
				require.NoError(t, err, "%s", out)
			}
			kns, err := kernel.Open(ns.Path())
			require.NoError(t, err)
			t.Cleanup(func() { _ = kns.Close() })
			opts := Options{Kernel: kns, PinDir: bpftest.Dir(t), HostInterfaces: []string{"eth0"}, PodInterfacePrefixes: []string{"veth"},
				Attach: mode, Maglev: MaglevOptions{Enabled: seed != 0, TableSize: 251}} // and Maglev tables but for seed 0
			p, err := New(opts)
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
			_, err = p.Plan(ctx)
			require.ErrorIs(t, err, ErrNotApplied)
			_, err = p.State(ctx)
			require.ErrorIs(t, err, ErrNotApplied)
			apply(t, p) // opens the maps and loads the programs
			setLink := func(name string, up bool) {
				l, err := kns.LinkByName(ctx, name)
				require.NoError(t, err)
				state := kernel.LinkUp
				if !up {
					state = kernel.LinkGone
				}
				p.OnLink(kernel.Link{Name: name, Index: l.Index}, state)
			}
			setLink("eth0", true)
			p.OnUpdate(cluster.NodeAddrs{Addrs: []netip.Addr{netip.MustParseAddr("192.168.0.1"), netip.MustParseAddr("fd01::1")}})
			live := map[int]bool{}
			for i := range 8 {
				p.OnUpdate(genService(r, i))
				live[i] = true
			}
			round := func(what string) {
				t.Helper()
				require.NoError(t, p.CompleteDeferredWork(ctx))
				before := readProxyKernel(t, p)
				stats := p.Stats()
				pl, err := p.Plan(ctx)
				require.NoError(t, err)
				assert.Equal(t, before, readProxyKernel(t, p), "%s: Plan writes nothing", what)
				assert.Equal(t, stats.Writes, p.Stats().Writes, "%s: Plan writes nothing", what)
				for _, w := range pl.Writes {
					planned[w.Op.String()+" "+string(w.Kind)]++
				}
				_, err = p.Apply(ctx)
				require.NoError(t, err, what)
				after := readProxyKernel(t, p)
				wantE, wantP := planDiff(t, pl)
				gotE, gotP := kernelDiff(before, after)
				assert.Equal(t, wantE, gotE, "%s: the entries change as planned\n%v", what, pl)
				assert.Equal(t, wantP, gotP, "%s: the attachments change as planned\n%v", what, pl)
				assert.Equal(t, uint64(len(pl.Writes)), p.Stats().Writes-stats.Writes, "%s: Stats count the planned writes\n%v", what, pl)
				pl, err = p.Plan(ctx)
				require.NoError(t, err)
				assert.True(t, pl.Empty(), "%s: %v", what, pl)
				st, err := p.State(ctx)
				require.NoError(t, err)
				assert.True(t, st.InSync(), "%s: %v", what, st)
				assert.Len(t, st.Owned, len(after.entries)+len(after.pins), "%s: every entry and attachment", what)
			}
			round("first")
			for i := range 8 {
				switch r.IntN(4) {
				case 0: // interfaces come and go
					for _, n := range ifaces[1:] {
						setLink(n, r.IntN(2) == 0)
					}
				case 1: // behind the Proxy's back: entries deleted, found by a resync
					pk := readProxyKernel(t, p)
					for k := range pk.entries {
						if r.IntN(4) != 0 || !strings.HasPrefix(k, "fe ") {
							continue
						}
						var fk feKey
						b, err := hex.DecodeString(k[3:])
						require.NoError(t, err)
						_, err = binary.Decode(b, binary.NativeEndian, &fk)
						require.NoError(t, err)
						require.NoError(t, p.k.fe.Delete(&fk))
					}
					p.QueueResync()
				default: // services changed, added, removed
					for _, n := range slices.Sorted(maps.Keys(live)) {
						switch r.IntN(4) {
						case 0:
							p.OnUpdate(cluster.ServiceRemove{Name: fmt.Sprintf("ns/svc-%d:p", n)})
							delete(live, n)
						case 1:
							p.OnUpdate(genService(r, n))
						}
					}
					for range r.IntN(4) {
						n := 8 + r.IntN(24)
						p.OnUpdate(genService(r, n))
						live[n] = true
					}
				}
				if r.IntN(2) == 0 { // and an interface comes or goes
					n := ifaces[1+r.IntN(len(ifaces)-1)]
					_, up := p.links[n]
					setLink(n, !up)
				}
				round(fmt.Sprint("round ", i))
			}

		})
	}
	for _, k := range []string{"add entry", "replace entry", "delete entry", "add attach", "delete attach"} {
		assert.Positive(t, planned[k], "the draw makes writes of each kind to plan: %v", planned)
	}
	t.Logf("planned: %v", planned)
}

// The connect-time hooks in Plan and State: none planned once attached
// (a resync finds every attachment, TCX and cgroup, in place); a hook
// detached behind the Proxy's back is drift, planned as one attachment,
// which the Apply makes, and then nothing is planned.
func TestKernelProxyPlanCgroupHooks(t *testing.T) {
	ctx := context.Background()
	r, cg := newCgroupRig(t)
	p := r.cgroupProxy(t, cg)
	p.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)})
	apply(t, p)
	p.QueueResync()
	pl, err := p.Plan(ctx)
	require.NoError(t, err)
	require.True(t, pl.Empty(), "%v", pl)
	st, err := p.State(ctx)
	require.NoError(t, err)
	require.True(t, st.InSync(), "%v", st)
	hooks := 0
	for _, o := range st.Owned {
		if o.Kind == kindAttach && strings.HasPrefix(o.Text, "cgroup "+cg.path+" ") {
			hooks++
		}
	}
	require.Equal(t, len(cgroupHooks), hooks)

	found, err := detachPinned(p.cgroupPin(cgroupHooks[0].name))
	require.NoError(t, err)
	require.True(t, found)
	p.QueueResync()
	want := dataplane.Write{Op: dataplane.WriteAdd, Kind: kindAttach, Object: cgroupText(cg.path, cgroupHooks[0])}
	pl, err = p.Plan(ctx)
	require.NoError(t, err)
	require.Equal(t, []dataplane.Write{want}, pl.Writes)
	st, err = p.State(ctx)
	require.NoError(t, err)
	require.Equal(t, []dataplane.Drift{{Kind: kindAttach, Name: "cgroup " + cg.path + " " + cgroupHooks[0].name, Want: want.Object}}, st.Drift)
	stats := p.Stats()
	apply(t, p)
	require.Equal(t, uint64(1), p.Stats().Writes-stats.Writes)
	pl, err = p.Plan(ctx)
	require.NoError(t, err)
	require.True(t, pl.Empty(), "%v", pl)
}

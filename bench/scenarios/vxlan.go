//go:build linux

package scenarios

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/bench/internal/harness"
	"github.com/nodeplane/nodeplane/internal/testkit/benchutil"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/overlay"
	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/vxlan"
)

// The vxlan scenarios measure the VXLAN overlay: remote VTEPs (a permanent
// neighbour entry tunnel IP → MAC and an FDB entry MAC → underlay IP each)
// on a device np-vxlan (VNI 4096, port 4789) whose parent is a veth up0
// (peer up1, both up) holding 198.18.0.1/16, made by Setup in the trial's
// namespace with vxlan.Driver.
//
//   - vxlan/entries/N: program N remote VTEPs on the existing device. Ours
//     is a new vxlan.Driver's first Apply on a kernel.Namespace opened in
//     Run (it reads the device, its neighbours, FDB and addresses, then
//     writes the 2N entries in one neighbour and one FDB batch). The peer
//     is one vishvananda/netlink NeighSet per entry, in process (what Felix
//     does); the floor is one hand-written `ip -batch` of `neigh replace`
//     lines plus one `bridge -batch` of `fdb replace` lines; peer2 is one
//     `ip neigh replace` and one `bridge fdb replace` exec per VTEP (capped
//     at 1k).
//   - vxlan/add-one/N: with N nodes (VTEP and block each) in sync in a
//     VXLAN overlay.Manager, its vxlan Driver and a main-table routetable.Table, one more
//     node and block arrive and one pass applies them (CompleteDeferredWork,
//     the Driver's Apply, the Table's Apply; no ip set, whose cost is the
//     ipsets driver's). Compare ours across sizes; the floor is the three
//     netlink calls the new node needs (two NeighSet, one RouteReplace).
//     l2-us is the manager and the Driver (the neighbour and FDB entries),
//     routes-us the Table's Apply: the kernel's insertion of a route via
//     a gateway of its own through a device that already has N such
//     routes grows with N (its fib_info hash leaves the gateway out, so
//     they all share a bucket), for the floor as for ours.
//   - vxlan/heap/N: the heap a Manager, its Driver and the route Table keep
//     per node once N nodes are applied.
const (
	vxDev      = "np-vxlan"
	vxParent   = "up0"
	vxParentPr = "up1"
)

var vxLocal = netip.MustParseAddr("198.18.0.1")

func init() {
	for _, n := range []int{1_000, 10_000} {
		harness.Register(vxlanEntries(n))
	}
	harness.Register(vxlanAddOne(10), vxlanAddOne(10_000), vxlanHeap(10_000))
}

// vxRemote is the i-th benchmark VTEP (i from 0): underlay 198.18.x.y
// (never .0.1), MAC 02:00:00:xx:xx:xx, and tunnel address 10.x.y.1 of its
// block vxBlock(i).
func vxRemote(i int) (node string, r vxlan.Remote, block netip.Prefix) {
	j := i + 2
	r.Underlay = netip.AddrFrom4([4]byte{198, 18 + byte(j>>16), byte(j >> 8), byte(j)})
	block = vxBlock(i)
	b := block.Addr().As4()
	b[3] = 1
	r.TunnelIP = netip.AddrFrom4(b)
	r.MAC = net.HardwareAddr{0x02, 0, 0, byte(j >> 16), byte(j >> 8), byte(j)}
	return fmt.Sprintf("node%d", j), r, block
}

// vxBlock returns the i-th block (10.x.y.0/24, x.y from i).
func vxBlock(i int) netip.Prefix {
	j := i + 2
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(j >> 8), byte(j), 0}), 24)
}

var vxLocalDevice = vxlan.Device{Local: vxLocal, MAC: net.HardwareAddr{0x02, 0xee, 0, 0, 0, 1}, Address: netip.MustParseAddr("10.255.255.250")}

// vxDriver returns a new vxlan.Driver on k for the device.
func vxDriver(k *kernel.Namespace) (*vxlan.Driver, error) {
	d, err := vxlan.NewDriver(vxlan.DriverOptions{Kernel: k, Family: vxlan.IPv4, Name: vxDev})
	if err != nil {
		return nil, err
	}
	dev := vxLocalDevice
	if err := d.SetDevice(&dev); err != nil {
		return nil, err
	}
	return d, nil
}

// vxSetEntries writes remote r's FDB entry and then its neighbour entry on
// the device (index idx) with vishvananda/netlink, one NeighSet each.
func vxSetEntries(h *netlink.Handle, idx int, r vxlan.Remote) error {
	if err := h.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF,
		State: netlink.NUD_PERMANENT, IP: r.Underlay.AsSlice(), HardwareAddr: r.MAC}); err != nil {
		return err
	}
	return h.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: netlink.FAMILY_V4,
		State: netlink.NUD_PERMANENT, IP: r.TunnelIP.AsSlice(), HardwareAddr: r.MAC})
}

// vxSetup makes the parent and the device (with vxlan.Driver, no
// remotes) and returns the device's index.
func vxSetup(ctx context.Context, env *harness.Env) (int, error) {
	idx, err := setupVeth(env, vxParent, vxParentPr)
	if err != nil {
		return 0, err
	}
	l, err := env.NS.Handle().LinkByIndex(idx)
	if err != nil {
		return 0, err
	}
	if err := env.NS.Handle().AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: vxLocal.AsSlice(), Mask: net.CIDRMask(16, 32)}}); err != nil {
		return 0, err
	}
	k, err := kernel.Open(env.NS.Path())
	if err != nil {
		return 0, err
	}
	defer k.Close()
	d, err := vxDriver(k)
	if err != nil {
		return 0, err
	}
	if _, err := d.Apply(ctx); err != nil {
		return 0, err
	}
	dev, err := k.LinkByName(ctx, d.Device())
	if err != nil {
		return 0, err
	}
	return dev.Index, routesQuiesce(ctx)
}

func vxlanEntries(n int) harness.Scenario {
	setup := keep(vxSetup)
	neighLine := func(i int) []string {
		_, r, _ := vxRemote(i)
		return []string{"neigh", "replace", r.TunnelIP.String(), "lladdr", r.MAC.String(), "dev", vxDev, "nud", "permanent"}
	}
	fdbLine := func(i int) []string {
		_, r, _ := vxRemote(i)
		return []string{"fdb", "replace", r.MAC.String(), "dev", vxDev, "dst", r.Underlay.String(), "self", "permanent"}
	}
	vs := []harness.Variant{
		{
			Name: "vxlan Driver (batched)", Role: harness.Ours, Setup: setup,
			Run: func(ctx context.Context, env *harness.Env) error {
				k, err := kernel.Open(env.NS.Path())
				if err != nil {
					return err
				}
				defer k.Close()
				d, err := vxDriver(k)
				if err != nil {
					return err
				}
				for i := range n {
					node, r, _ := vxRemote(i)
					if err := d.SetRemote(node, r); err != nil {
						return err
					}
				}
				if _, err := d.Apply(ctx); err != nil {
					return err
				}
				if st := d.Stats(); st.Writes != uint64(2*n) {
					return fmt.Errorf("unexpected writes: %+v", st)
				}
				return nil
			},
		},
		{
			Name: "netlink NeighSet per entry", Role: harness.Peer, Setup: setup,
			Run: func(_ context.Context, env *harness.Env) error {
				h, idx := env.NS.Handle(), env.State.(int)
				for i := range n {
					_, r, _ := vxRemote(i)
					if err := vxSetEntries(h, idx, r); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			Name: "ip -batch + bridge -batch", Role: harness.Floor,
			Setup: func(ctx context.Context, env *harness.Env) error {
				err := setup(ctx, env)
				var ip, br bytes.Buffer
				for i := range n {
					fmt.Fprintln(&ip, strings.Join(neighLine(i), " "))
					fmt.Fprintln(&br, strings.Join(fdbLine(i), " "))
				}
				env.State = [2][]byte{ip.Bytes(), br.Bytes()}
				return err
			},
			Run: func(ctx context.Context, env *harness.Env) error {
				in := env.State.([2][]byte)
				if _, err := env.NS.ExecInput(ctx, bytes.NewReader(in[1]), "bridge", "-batch", "-"); err != nil {
					return err
				}
				_, err := env.NS.ExecInput(ctx, bytes.NewReader(in[0]), "ip", "-batch", "-")
				return err
			},
		},
	}
	note := "peers: netlink NeighSet per entry in process (Felix), and one `ip neigh` + one `bridge fdb` exec per VTEP"
	if n > routeExecCap {
		note = fmt.Sprintf("peer2 (one `ip neigh replace` and one `bridge fdb replace` exec per VTEP) capped at %d VTEPs", routeExecCap)
	} else {
		vs = append(vs, harness.Variant{
			Name: "ip neigh + bridge fdb per VTEP (exec)", Role: harness.Peer, Setup: setup,
			Run: func(ctx context.Context, env *harness.Env) error {
				for i := range n {
					if _, err := env.NS.Exec(ctx, "bridge", fdbLine(i)...); err != nil {
						return err
					}
					if _, err := env.NS.Exec(ctx, "ip", neighLine(i)...); err != nil {
						return err
					}
				}
				return nil
			},
		})
	}
	return harness.Scenario{Name: "vxlan/entries/" + strconv.Itoa(n), Size: n, Note: note, Variants: vs}
}

// vxStack is a VXLAN overlay Manager with its Driver and route Table on a
// trial's namespace.
type vxStack struct {
	k   *kernel.Namespace
	tbl *routetable.Table
	m   *overlay.Manager
	d   *vxlan.Driver // m's
}

// vxLoad applies n nodes with a new stack.
func vxLoad(ctx context.Context, env *harness.Env, n int) (*vxStack, error) {
	k, err := kernel.Open(env.NS.Path())
	if err != nil {
		return nil, err
	}
	st := &vxStack{k: k}
	st.tbl, err = routetable.New(routetable.Options{Kernel: k, Family: routetable.IPv4, Table: kernel.TableMain})
	if err == nil {
		st.m, err = overlay.New(overlay.Options{Family: vxlan.IPv4, NodeName: "local", Kernel: k, Routes: st.tbl,
			Encap: overlay.VXLAN{Device: vxDev}})
	}
	if err == nil {
		st.d = st.m.Driver().(*vxlan.Driver)
	}
	if err != nil {
		k.Close()
		return nil, err
	}
	st.m.OnUpdate(cluster.Node{Name: "local", UnderlayV4: vxLocal, TunnelV4: vxLocalDevice.Address, VXLANMACV4: cluster.MAC(vxLocalDevice.MAC)})
	for i := range n {
		st.addNode(i)
	}
	return st, st.pass(ctx)
}

// vxLoaded is add-one's Setup: the device, and n nodes applied with a new
// stack; keep hands the stack to Run, else its namespace is closed and Run
// gets the device's index. The machine settles (routesQuiesce) last.
func vxLoaded(n int, keep bool) setupFunc {
	return func(ctx context.Context, env *harness.Env) error {
		idx, err := vxSetup(ctx, env)
		if err != nil {
			return err
		}
		st, err := vxLoad(ctx, env, n)
		if err != nil {
			return err
		}
		if keep {
			env.State = st
		} else {
			st.k.Close()
			env.State = idx
		}
		return routesQuiesce(ctx)
	}
}

func (st *vxStack) addNode(i int) {
	node, r, _ := vxRemote(i)
	st.m.OnUpdate(cluster.Node{Name: node, UnderlayV4: r.Underlay, TunnelV4: r.TunnelIP, VXLANMACV4: cluster.MAC(r.MAC)})
	st.m.OnUpdate(cluster.Block{CIDR: vxBlock(i), Node: node})
}

// pass applies as a loop pass does (PhaseTunnelL2, then PhaseRoutes),
// twice if the first asks for it.
func (st *vxStack) pass(ctx context.Context) error {
	if err := st.m.CompleteDeferredWork(ctx); err != nil {
		return err
	}
	if _, err := st.m.Driver().Apply(ctx); err != nil {
		return err
	}
	_, err := st.tbl.Apply(ctx)
	return err
}

func vxlanAddOne(n int) harness.Scenario {
	return harness.Scenario{
		Name: "vxlan/add-one/" + strconv.Itoa(n),
		Size: 1,
		Note: "one node (VTEP and block) added with " + strconv.Itoa(n) + " in sync, applied in one pass; compare ours across sizes (the floor is the three netlink calls it needs)",
		Variants: []harness.Variant{
			{
				Name: "overlay Manager + vxlan Driver + Table", Role: harness.Ours,
				Setup: vxLoaded(n, true),
				Run: func(ctx context.Context, env *harness.Env) error {
					st := env.State.(*vxStack)
					defer st.k.Close()
					before, routesBefore := st.d.Stats(), st.tbl.Counters().RouteWrites
					st.addNode(n)
					t0 := time.Now()
					if err := st.m.CompleteDeferredWork(ctx); err != nil {
						return err
					}
					if _, err := st.m.Driver().Apply(ctx); err != nil {
						return err
					}
					t1 := time.Now()
					if _, err := st.tbl.Apply(ctx); err != nil {
						return err
					}
					env.Report("l2-us", float64(t1.Sub(t0).Microseconds()))
					env.Report("routes-us", float64(time.Since(t1).Microseconds()))
					after := st.d.Stats()
					env.Report("entry-writes", float64(after.Writes-before.Writes))
					env.Report("route-writes", float64(st.tbl.Counters().RouteWrites-routesBefore))
					return nil
				},
			},
			{
				Name: "netlink: 2 NeighSet + RouteReplace", Role: harness.Floor,
				Setup: vxLoaded(n, false),
				Run: func(_ context.Context, env *harness.Env) error {
					h, idx := env.NS.Handle(), env.State.(int)
					_, r, _ := vxRemote(n)
					if err := vxSetEntries(h, idx, r); err != nil {
						return err
					}
					b := vxBlock(n)
					return h.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: &net.IPNet{IP: b.Addr().AsSlice(), Mask: net.CIDRMask(24, 32)},
						Gw: r.TunnelIP.AsSlice(), Flags: int(netlink.FLAG_ONLINK), Protocol: netlink.RouteProtocol(routetable.DefaultProtocol)})
				},
			},
		},
	}
}

func vxlanHeap(n int) harness.Scenario {
	return harness.Scenario{
		Name: "vxlan/heap/" + strconv.Itoa(n),
		Size: n,
		Note: "heapB/node: heap kept by a Manager, its Driver and the route Table per applied node (VTEP and block); times include two forced GCs",
		Variants: []harness.Variant{{
			Name: "overlay Manager + vxlan Driver + Table", Role: harness.Ours,
			Setup: func(ctx context.Context, env *harness.Env) error {
				_, err := vxSetup(ctx, env)
				return err
			},
			Run: func(ctx context.Context, env *harness.Env) error {
				before := benchutil.HeapInUse()
				st, err := vxLoad(ctx, env, n)
				if err != nil {
					return err
				}
				env.Report("heapB/node", heapPer(before, n))
				runtime.KeepAlive(st)
				if s := st.m.Stats(); s.TunnelRoutes != n {
					return errors.Join(st.k.Close(), fmt.Errorf("%d tunnel routes, want %d", s.TunnelRoutes, n))
				}
				return st.k.Close()
			},
		}},
	}
}

package vxlan_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/vxlan"
)

// recorder passes a Driver's calls to a namespace and logs each write in
// the words of a Plan: "+ link np-vxlan", "- link np-vxlan", "~ link
// np-vxlan mtu 1400", "~ link np-vxlan addr add 10.244.1.250/32", "fdb
// replace <entry>", "neighbour delete <ip> dev np-vxlan" …
type recorder struct {
	vxlan.DriverKernel
	mu  sync.Mutex
	log []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	r.mu.Unlock()
}

// take returns the writes logged since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.log
	r.log = nil
	return out
}

// name returns the name of the link with index i.
func (r *recorder) name(ctx context.Context, i int) string {
	links, _ := r.DriverKernel.Links(ctx)
	for _, l := range links {
		if l.Index == i {
			return l.Name
		}
	}
	return fmt.Sprintf("if%d", i)
}

func (r *recorder) AddLink(ctx context.Context, l kernel.Link) (kernel.Link, error) {
	r.add("+ link " + l.Name)
	return r.DriverKernel.AddLink(ctx, l)
}

func (r *recorder) DeleteLink(ctx context.Context, i int) error {
	r.add("- link " + r.name(ctx, i))
	return r.DriverKernel.DeleteLink(ctx, i)
}

func (r *recorder) SetLinkUp(ctx context.Context, i int, up bool) error {
	r.add(fmt.Sprintf("~ link %s up=%v", r.name(ctx, i), up))
	return r.DriverKernel.SetLinkUp(ctx, i, up)
}

func (r *recorder) SetLinkMTU(ctx context.Context, i, mtu int) error {
	r.add(fmt.Sprintf("~ link %s mtu %d", r.name(ctx, i), mtu))
	return r.DriverKernel.SetLinkMTU(ctx, i, mtu)
}

func (r *recorder) SetLinkMAC(ctx context.Context, i int, mac net.HardwareAddr) error {
	r.add(fmt.Sprintf("~ link %s mac %s", r.name(ctx, i), mac))
	return r.DriverKernel.SetLinkMAC(ctx, i, mac)
}

func (r *recorder) AddAddr(ctx context.Context, a kernel.Addr) error {
	r.add(fmt.Sprintf("~ link %s addr add %s", r.name(ctx, a.LinkIndex), a.Prefix))
	return r.DriverKernel.AddAddr(ctx, a)
}

func (r *recorder) DeleteAddr(ctx context.Context, a kernel.Addr) error {
	r.add(fmt.Sprintf("~ link %s addr del %s", r.name(ctx, a.LinkIndex), a.Prefix))
	return r.DriverKernel.DeleteAddr(ctx, a)
}

func (r *recorder) ApplyFDB(ctx context.Context, ops []kernel.FDBOp) []error {
	for _, op := range ops {
		e := op.Entry
		s := e.MAC.String() + " dev " + r.name(ctx, e.LinkIndex)
		if e.Dst.IsValid() {
			s += " dst " + e.Dst.String()
		}
		s += " self"
		if e.Permanent {
			s += " permanent"
		}
		r.add(fmt.Sprintf("fdb %v %s", op.Kind, s))
	}
	return r.DriverKernel.ApplyFDB(ctx, ops)
}

func (r *recorder) ApplyNeighbors(ctx context.Context, ops []kernel.NeighborOp) []error {
	for _, op := range ops {
		n := op.Neighbor
		s := n.IP.String() + " dev " + r.name(ctx, n.LinkIndex)
		if op.Kind != kernel.OpDelete {
			s += " lladdr " + n.MAC.String() + " PERMANENT"
		}
		r.add(fmt.Sprintf("neighbour %v %s", op.Kind, s))
	}
	return r.DriverKernel.ApplyNeighbors(ctx, ops)
}

// planLog is what the recorder logs of p's writes.
func planLog(t testing.TB, p dataplane.Plan) []string {
	t.Helper()
	var out []string
	for _, w := range p.Writes {
		switch w.Kind {
		case "link":
			f := strings.Fields(w.Object)
			switch {
			case w.Op == dataplane.WriteAdd:
				out = append(out, "+ link "+f[0])
			case w.Op == dataplane.WriteDelete:
				out = append(out, "- link "+f[0])
			case len(f) == 2 && f[1] == "up":
				out = append(out, "~ link "+f[0]+" up=true")
			default:
				out = append(out, "~ link "+w.Object)
			}
		case "fdb":
			op := kernel.OpReplace
			if w.Op == dataplane.WriteDelete {
				op = kernel.OpDelete
			}
			out = append(out, fmt.Sprintf("fdb %v %s", op, w.Object))
		case "neighbour":
			if w.Op == dataplane.WriteDelete {
				obj, _, _ := strings.Cut(w.Object, " lladdr ")
				out = append(out, fmt.Sprintf("neighbour %v %s", kernel.OpDelete, obj))
			} else {
				out = append(out, fmt.Sprintf("neighbour %v %s", kernel.OpReplace, w.Object))
			}
		default:
			t.Fatalf("a write of kind %q: %v", w.Kind, w)
		}
	}
	return out
}

// planWorld is a Driver on a recorder over k, with the setup of the
// conformance suite (up0 holds node 1's underlay address).
type planWorld struct {
	t   testing.TB
	fam vxlan.Family
	k   kernel.Kernel
	rec *recorder
	clk *clock.Fake
	d   *vxlan.Driver
	// writes counts the namespace's writes (a fake's Writes), or nil.
	writes func() int
}

func newPlanWorld(t testing.TB, k kernel.Kernel, fam vxlan.Family, writes func() int) *planWorld {
	t.Helper()
	confSetup(t, k, confVariant{fam})
	w := &planWorld{t: t, fam: fam, k: k, rec: &recorder{DriverKernel: k}, writes: writes,
		clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	var err error
	w.d, err = vxlan.NewDriver(vxlan.DriverOptions{Kernel: w.rec, Family: fam, Clock: w.clk})
	require.NoError(t, err)
	return w
}

// nsWrites is the namespace's count of writes, or 0 when it has none.
func (w *planWorld) nsWrites() int {
	if w.writes == nil {
		return 0
	}
	return w.writes()
}

// declare draws the declarations: the device (now and then none, another
// VNI, MTU, MAC or tunnel address) and a random half of n remotes, some of
// which share a tunnel address or MAC with another node.
func (w *planWorld) declare(r *rand.Rand, n int) {
	t := w.t
	if r.IntN(8) == 0 {
		require.NoError(t, w.d.SetDevice(nil))
	} else {
		dev := &vxlan.Device{Local: underlay(w.fam, 1), VNI: pick(r, uint32(0), 4097), MTU: pick(r, 0, 1400, 1300)}
		dev.MAC = pick(r, nil, nodeMAC(w.fam, 1), nodeMAC(w.fam, 99))
		dev.Address = pick(r, netip.Addr{}, tunnelIP(w.fam, 1), tunnelIP(w.fam, 99))
		require.NoError(t, w.d.SetDevice(dev))
	}
	for i := 2; i < 2+n; i++ {
		if r.IntN(2) == 0 {
			w.d.RemoveRemote(nodeName(i))
			continue
		}
		rm := vxlan.Remote{TunnelIP: tunnelIP(w.fam, i), MAC: nodeMAC(w.fam, i), Underlay: underlay(w.fam, pick(r, i, i+100))}
		if r.IntN(6) == 0 {
			rm.TunnelIP = tunnelIP(w.fam, 2+r.IntN(n))
		}
		if r.IntN(6) == 0 {
			rm.MAC = nodeMAC(w.fam, 2+r.IntN(n))
		}
		require.NoError(t, w.d.SetRemote(nodeName(i), rm))
	}
}

// scribble changes the device and its entries as someone else would:
// deletes entries, writes stale ones (ours and leftovers), changes the
// device's MTU, takes it down, adds an address, or deletes it. It returns
// whether it changed the device itself.
func (w *planWorld) scribble(r *rand.Rand, n int) bool {
	ctx := context.Background()
	dev, err := w.k.LinkByName(ctx, w.d.Device())
	if err != nil {
		return false
	}
	var nops []kernel.NeighborOp
	neighs, err := w.k.Neighbors(ctx, w.fam, dev.Index)
	require.NoError(w.t, err)
	for _, nb := range neighs {
		if r.IntN(4) == 0 {
			nops = append(nops, kernel.NeighborOp{Kind: kernel.OpDelete, Neighbor: nb})
		}
	}
	var fops []kernel.FDBOp
	fdb, err := w.k.FDB(ctx, dev.Index)
	require.NoError(w.t, err)
	for _, e := range fdb {
		if r.IntN(4) == 0 && e.Permanent {
			fops = append(fops, kernel.FDBOp{Kind: kernel.OpDelete, Entry: e})
		}
	}
	for range r.IntN(4) {
		i := 2 + r.IntN(n+3) // some beyond the remotes: leftovers
		nops = append(nops, kernel.NeighborOp{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: dev.Index,
			IP: tunnelIP(w.fam, i), MAC: nodeMAC(w.fam, pick(r, i, i+50)), State: kernel.NUDPermanent}})
		fops = append(fops, kernel.FDBOp{Kind: kernel.OpReplace, Entry: kernel.FDBEntry{LinkIndex: dev.Index,
			MAC: nodeMAC(w.fam, i), Dst: underlay(w.fam, pick(r, i, i+50)), Permanent: true}})
	}
	for _, err := range w.k.ApplyNeighbors(ctx, nops) {
		require.NoError(w.t, err)
	}
	for _, err := range w.k.ApplyFDB(ctx, fops) {
		require.NoError(w.t, err)
	}
	switch r.IntN(10) {
	case 0:
		require.NoError(w.t, w.k.SetLinkMTU(ctx, dev.Index, 1350))
	case 1:
		require.NoError(w.t, w.k.SetLinkUp(ctx, dev.Index, false))
	case 2:
		require.NoError(w.t, w.k.AddAddr(ctx, kernel.Addr{LinkIndex: dev.Index, Prefix: netip.PrefixFrom(tunnelIP(w.fam, 77), w.fam.Bits())}))
	case 3:
		require.NoError(w.t, w.k.DeleteLink(ctx, dev.Index))
	default:
		return false
	}
	return true
}

// check checks the Plan properties on the Driver as it stands: Plan
// writes nothing; the Apply after it makes exactly the writes it lists, in
// its order; after that Apply, Plan is empty and an Apply writes nothing;
// State and Stats agree. failing says some writes of the Apply are made
// to fail. It returns how many writes the Plan listed.
func (w *planWorld) check(what string, failing bool) int {
	t := w.t
	t.Helper()
	ctx := context.Background()
	w.rec.take()
	before := w.nsWrites()
	stats := w.d.Stats()
	plan, err := w.d.Plan(ctx)
	require.NoError(t, err, what)
	require.Empty(t, w.rec.take(), "%s: Plan wrote", what)
	require.Equal(t, before, w.nsWrites(), "%s: Plan wrote (the namespace's count)", what)

	res, err := w.d.Apply(ctx)
	if failing && err != nil {
		require.ErrorIs(t, err, dataplane.ErrPartial, what)
		require.Positive(t, res.RetryAfter, what)
	} else {
		require.NoError(t, err, "%s\n%v", what, plan)
	}
	require.Equal(t, planLog(t, plan), w.rec.take(), "%s: Apply made other writes than its Plan:\n%v", what, plan)
	if w.writes != nil {
		require.Equal(t, before+len(plan.Writes), w.nsWrites(), "%s: the namespace's count of writes", what)
	}
	require.Equal(t, stats.Writes+uint64(len(plan.Writes)), w.d.Stats().Writes, "%s: Stats.Writes", what)

	after, err := w.d.Plan(ctx)
	require.NoError(t, err, what)
	require.True(t, after.Empty(), "%s: Plan after Apply:\n%v", what, after)
	before = w.nsWrites()
	_, err = w.d.Apply(ctx)
	if !failing {
		require.NoError(t, err, what)
	}
	require.Empty(t, w.rec.take(), "%s: an Apply whose Plan is empty wrote", what)
	require.Equal(t, before, w.nsWrites(), "%s: an Apply whose Plan is empty wrote (the namespace's count)", what)

	st, err := w.d.State(ctx)
	require.NoError(t, err, what)
	s := w.d.Stats()
	assert.Len(t, st.Failing, s.Failing, what)
	if !failing {
		assert.True(t, st.InSync(), "%s: %v", what, st)
		assert.Equal(t, s.Desired, s.InKernel, "%s: %+v", what, s)
		assert.Len(t, st.Owned, s.InKernel, "%s: %v", what, st)
	}
	return len(plan.Writes)
}

// planProperty draws declarations and drift over rounds and checks the
// Plan properties after each: declarations changed alone; the kernel
// changed, then a resync (or, for the device, its link state reported);
// entry writes made to fail, then their retry due.
func planProperty(w *planWorld, seed uint64, rounds, n int, fake *kernelfake.Namespace) int {
	r := rand.New(rand.NewPCG(seed, 21))
	planned := 0
	for round := range rounds {
		what := fmt.Sprintf("%v seed %d round %d", w.fam, seed, round)
		w.declare(r, n)
		if round > 0 && r.IntN(2) == 0 {
			if w.scribble(r, n) && r.IntN(2) == 0 {
				w.d.OnLinkState(w.d.Device(), 0, kernel.LinkGone)
			} else {
				w.d.QueueResync()
			}
		}
		failing := fake != nil && r.IntN(4) == 0
		if failing {
			fake.Fail(kernelfake.OpApplyFDB, 1, nil)
			fake.Fail(kernelfake.OpApplyNeighbors, 1, nil)
		}
		planned += w.check(what, failing)
		if failing {
			fake.ClearFailures()
			w.clk.Advance(time.Minute) // the retries are due
			planned += w.check(what+", retried", false)
		}
	}
	return planned
}

// TestPlanProperties checks the Plan properties on a fake namespace, IPv4
// and IPv6, over many seeds.
func TestPlanProperties(t *testing.T) {
	for _, fam := range []vxlan.Family{vxlan.IPv4, vxlan.IPv6} {
		for seed := range uint64(30) {
			t.Run(fmt.Sprintf("%v/%d", fam, seed), func(t *testing.T) {
				ns := kernelfake.New(kernelfake.Options{})
				w := newPlanWorld(t, ns, fam, ns.Writes)
				planned := planProperty(w, seed, 8, 12, ns)
				t.Logf("%d writes planned", planned)
			})
		}
	}
}

// TestPlanText shows a Plan and a State in their text form.
func TestPlanText(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	w := newPlanWorld(t, ns, vxlan.IPv4, ns.Writes)
	require.NoError(t, w.d.SetDevice(&vxlan.Device{Local: underlay(vxlan.IPv4, 1), MAC: nodeMAC(vxlan.IPv4, 1), Address: tunnelIP(vxlan.IPv4, 1), MTU: 1400}))
	require.NoError(t, w.d.SetRemote("node2", vxlan.Remote{TunnelIP: tunnelIP(vxlan.IPv4, 2), MAC: nodeMAC(vxlan.IPv4, 2), Underlay: underlay(vxlan.IPv4, 2)}))
	plan, err := w.d.Plan(bg)
	require.NoError(t, err)
	up0, err := ns.LinkByName(bg, "up0")
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf(`vxlan-np-vxlan: 5 writes
+ link np-vxlan vxlan vni 4096 port 4789 local 198.18.0.1 parent %d mtu 1400 mac 02:aa:04:00:00:01
~ link np-vxlan addr add 10.244.1.250/32
~ link np-vxlan up (was down)
+ fdb 02:aa:04:00:00:02 dev np-vxlan dst 198.18.0.2 self permanent
+ neighbour 10.244.2.250 dev np-vxlan lladdr 02:aa:04:00:00:02 PERMANENT`, up0.Index), plan.String())
	_, err = w.d.Apply(bg)
	require.NoError(t, err)

	// Someone points node2's FDB entry elsewhere and deletes its
	// neighbour entry; a resync finds both.
	dev, err := ns.LinkByName(bg, "np-vxlan")
	require.NoError(t, err)
	for _, err := range ns.ApplyFDB(bg, []kernel.FDBOp{{Kind: kernel.OpReplace, Entry: kernel.FDBEntry{LinkIndex: dev.Index,
		MAC: nodeMAC(vxlan.IPv4, 2), Dst: underlay(vxlan.IPv4, 9), Permanent: true}}}) {
		require.NoError(t, err)
	}
	for _, err := range ns.ApplyNeighbors(bg, []kernel.NeighborOp{{Kind: kernel.OpDelete, Neighbor: kernel.Neighbor{LinkIndex: dev.Index, IP: tunnelIP(vxlan.IPv4, 2)}}}) {
		require.NoError(t, err)
	}
	w.d.QueueResync()
	st, err := w.d.State(bg)
	require.NoError(t, err)
	assert.Equal(t, `vxlan-np-vxlan: 2 owned, 2 drifted, 0 failing
  fdb 02:aa:04:00:00:02: want 02:aa:04:00:00:02 dev np-vxlan dst 198.18.0.2 self permanent, have 02:aa:04:00:00:02 dev np-vxlan dst 198.18.0.9 self permanent
  neighbour 10.244.2.250: missing (want 10.244.2.250 dev np-vxlan lladdr 02:aa:04:00:00:02 PERMANENT)`, st.String())
	plan, err = w.d.Plan(bg)
	require.NoError(t, err)
	assert.Equal(t, `vxlan-np-vxlan: 2 writes
~ fdb 02:aa:04:00:00:02 dev np-vxlan dst 198.18.0.2 self permanent (was 02:aa:04:00:00:02 dev np-vxlan dst 198.18.0.9 self permanent)
+ neighbour 10.244.2.250 dev np-vxlan lladdr 02:aa:04:00:00:02 PERMANENT`, plan.String())
}

func pick[T any](r *rand.Rand, vs ...T) T { return vs[r.IntN(len(vs))] }

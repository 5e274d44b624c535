package ipip_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipip"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

// recorder passes a Driver's calls to a namespace and logs each write in
// the words of a Plan: "+ link np-ipip", "- link np-ipip", "~ link np-ipip
// mtu 1400", "~ link np-ipip addr add 10.244.1.250/32", "~ link np-ipip up".
type recorder struct {
	ipip.DriverKernel
	mu  sync.Mutex
	log []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	r.log = append(r.log, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.log
	r.log = nil
	return out
}

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
	r.add("+ link %s", l.Name)
	return r.DriverKernel.AddLink(ctx, l)
}

func (r *recorder) DeleteLink(ctx context.Context, i int) error {
	r.add("- link %s", r.name(ctx, i))
	return r.DriverKernel.DeleteLink(ctx, i)
}

func (r *recorder) SetLinkUp(ctx context.Context, i int, up bool) error {
	if up {
		r.add("~ link %s up", r.name(ctx, i))
	} else {
		r.add("~ link %s down", r.name(ctx, i))
	}
	return r.DriverKernel.SetLinkUp(ctx, i, up)
}

func (r *recorder) SetLinkMTU(ctx context.Context, i, mtu int) error {
	r.add("~ link %s mtu %d", r.name(ctx, i), mtu)
	return r.DriverKernel.SetLinkMTU(ctx, i, mtu)
}

func (r *recorder) AddAddr(ctx context.Context, a kernel.Addr) error {
	r.add("~ link %s addr add %s", r.name(ctx, a.LinkIndex), a.Prefix)
	return r.DriverKernel.AddAddr(ctx, a)
}

func (r *recorder) DeleteAddr(ctx context.Context, a kernel.Addr) error {
	r.add("~ link %s addr del %s", r.name(ctx, a.LinkIndex), a.Prefix)
	return r.DriverKernel.DeleteAddr(ctx, a)
}

// planLog is what the recorder logs of p's writes.
func planLog(t *testing.T, p dataplane.Plan) []string {
	var out []string
	for _, w := range p.Writes {
		require.Equal(t, dataplane.ObjectKind("link"), w.Kind, "%v", w)
		name := strings.Fields(w.Object)[0]
		switch w.Op {
		case dataplane.WriteAdd:
			out = append(out, "+ link "+name)
		case dataplane.WriteDelete:
			out = append(out, "- link "+name)
		default:
			out = append(out, "~ link "+w.Object)
		}
	}
	return out
}

// TestPlanProperties checks on a fake namespace that models ipip (this
// project's kernel has none: TestKernelNoIPIP), for the catch-all tunl0
// and a device of its own over many seeds of declarations and drift (MTU,
// down, a stray address, the device deleted; then a resync or the link
// reported): Plan writes nothing; the Apply after it makes exactly its
// writes, in its order; after it Plan is empty and an Apply writes
// nothing; State and Stats agree.
func TestPlanProperties(t *testing.T) {
	for _, name := range []string{ipip.DefaultDevice, "np-ipip"} {
		for seed := range uint64(30) {
			t.Run(fmt.Sprintf("%s/%d", name, seed), func(t *testing.T) {
				ns := fakeHost(t, true)
				rec := &recorder{DriverKernel: ns}
				d, err := ipip.NewDriver(ipip.DriverOptions{Kernel: rec, Name: name, Clock: newClock()})
				require.NoError(t, err)
				r := rand.New(rand.NewPCG(seed, 21))
				planned := 0
				for round := range 10 {
					what := fmt.Sprintf("%s seed %d round %d", name, seed, round)
					if r.IntN(6) == 0 {
						require.NoError(t, d.SetDevice(nil))
					} else {
						require.NoError(t, d.SetDevice(&ipip.Device{Local: netip.MustParseAddr("198.18.0.1"),
							Address: pick(r, netip.Addr{}, netip.MustParseAddr("10.244.1.250"), netip.MustParseAddr("10.244.1.251")),
							MTU:     pick(r, 0, 1400, 1480)}))
					}
					if round > 0 && r.IntN(2) == 0 && scribble(t, ns, r, name) {
						if r.IntN(2) == 0 {
							d.OnLinkState(name, 0, kernel.LinkGone)
						} else {
							d.QueueResync()
						}
					}
					planned += checkPlan(t, d, ns, rec, what)
				}
				t.Logf("%d writes planned", planned)
			})
		}
	}
}

// scribble changes the device as someone else would, and reports whether
// it did.
func scribble(t *testing.T, ns *kernelfake.Namespace, r *rand.Rand, name string) bool {
	a := ns.Admin()
	dev, err := a.LinkByName(bg, name)
	if err != nil {
		return false
	}
	switch r.IntN(4) {
	case 0:
		require.NoError(t, a.SetLinkMTU(bg, dev.Index, 1300))
	case 1:
		require.NoError(t, a.SetLinkUp(bg, dev.Index, false))
	case 2:
		require.NoError(t, a.AddAddr(bg, kernel.Addr{LinkIndex: dev.Index, Prefix: netip.MustParsePrefix("10.99.0.1/32")}))
	default:
		require.NoError(t, a.DeleteLink(bg, dev.Index))
	}
	return true
}

// checkPlan checks the Plan properties on d as it stands and returns how
// many writes the Plan listed.
func checkPlan(t *testing.T, d *ipip.Driver, ns *kernelfake.Namespace, rec *recorder, what string) int {
	t.Helper()
	rec.take()
	before, stats := ns.Writes(), d.Stats()
	plan, err := d.Plan(bg)
	require.NoError(t, err, what)
	require.Empty(t, rec.take(), "%s: Plan wrote", what)
	require.Equal(t, before, ns.Writes(), "%s: Plan wrote", what)
	_, err = d.Apply(bg)
	require.NoError(t, err, "%s\n%v", what, plan)
	require.Equal(t, planLog(t, plan), rec.take(), "%s: Apply made other writes than its Plan:\n%v", what, plan)
	require.Equal(t, before+len(plan.Writes), ns.Writes(), "%s: the namespace's count of writes", what)
	require.Equal(t, stats.Writes+uint64(len(plan.Writes)), d.Stats().Writes, what)

	after, err := d.Plan(bg)
	require.NoError(t, err, what)
	require.True(t, after.Empty(), "%s: Plan after Apply:\n%v", what, after)
	before = ns.Writes()
	_, err = d.Apply(bg)
	require.NoError(t, err, what)
	require.Empty(t, rec.take(), "%s: an Apply whose Plan is empty wrote", what)
	require.Equal(t, before, ns.Writes(), what)

	st, err := d.State(bg)
	require.NoError(t, err, what)
	assert.True(t, st.InSync(), "%s: %v", what, st)
	s := d.Stats()
	assert.Equal(t, s.Desired, s.InKernel, "%s: %+v", what, s)
	assert.Len(t, st.Owned, s.InKernel, what)
	return len(plan.Writes)
}

// TestPlanAndState shows the Plan of a new device, the State after a
// change behind the Driver's back, and the failure of a kernel without
// ipip in State.
func TestPlanAndState(t *testing.T) {
	ns := fakeHost(t, true)
	d, err := ipip.NewDriver(ipip.DriverOptions{Kernel: ns, Name: "np-ipip"})
	require.NoError(t, err)
	require.NoError(t, d.SetDevice(&ipip.Device{Local: netip.MustParseAddr("198.18.0.1"), Address: netip.MustParseAddr("10.244.1.250"), MTU: 1480}))
	plan, err := d.Plan(bg)
	require.NoError(t, err)
	assert.Equal(t, `ipip-np-ipip: 3 writes
+ link np-ipip ipip local 198.18.0.1 mtu 1480
~ link np-ipip addr add 10.244.1.250/32
~ link np-ipip up (was down)`, plan.String())
	_, err = d.Apply(bg)
	require.NoError(t, err)
	dev, _ := ns.Link("np-ipip")
	require.NoError(t, ns.Admin().SetLinkMTU(bg, dev.Index, 1300))
	d.OnLinkState("np-ipip", dev.Index, kernel.LinkDown)
	_, err = d.Apply(bg)
	require.NoError(t, err)
	st, err := d.State(bg)
	require.NoError(t, err)
	assert.Equal(t, "ipip-np-ipip: 1 owned, 0 drifted, 0 failing", st.String())
	assert.Equal(t, []dataplane.Object{{Kind: "link", Text: "np-ipip ipip local 198.18.0.1 mtu 1480"}}, st.Owned)

	// This project's kernel has no ipip: the device fails, and State says
	// so (missing, failing with the kernel's error).
	bare := fakeHost(t, false)
	d, err = ipip.NewDriver(ipip.DriverOptions{Kernel: bare, Clock: newClock()})
	require.NoError(t, err)
	require.NoError(t, d.SetDevice(&ipip.Device{Local: netip.MustParseAddr("198.18.0.1")}))
	_, err = d.Apply(bg)
	require.ErrorIs(t, err, ipip.ErrDevice)
	require.ErrorIs(t, err, kernel.ErrNotSupported)
	st, err = d.State(bg)
	require.NoError(t, err)
	require.Len(t, st.Failing, 1)
	assert.Equal(t, dataplane.ObjectKind("link"), st.Failing[0].Kind)
	assert.ErrorIs(t, st.Failing[0], kernel.ErrNotSupported)
	assert.Equal(t, []dataplane.Drift{{Kind: "link", Name: "tunl0", Want: "tunl0 ipip"}}, st.Drift)
	assert.Equal(t, dataplane.DriverStats{Desired: 1, Failing: 1, Writes: 1}, d.Stats())
	// Before its retry is due, the device is not in the Plan.
	plan, err = d.Plan(bg)
	require.NoError(t, err)
	assert.True(t, plan.Empty(), "%v", plan)
}

func pick[T any](r *rand.Rand, vs ...T) T { return vs[r.IntN(len(vs))] }

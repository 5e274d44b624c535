package sysctls_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/sysctls"
)

// planKeys are keys of the fake namespace, with the values they take.
// None is changed by the kernel when another is written (IPv4
// forwarding sets all.accept_redirects: TestPlanCoupledSysctls).
var planKeys = []struct {
	key    string
	values []string
}{
	{"net.ipv4.ip_forward", []string{"0", "1"}},
	{"net.ipv6.conf.all.forwarding", []string{"0", "1"}},
	{"net.ipv4.conf.all.rp_filter", []string{"0", "1", "2"}},
	{"net.ipv4.conf.default.rp_filter", []string{"0", "1", "2"}},
	{"net.ipv4.conf.all.send_redirects", []string{"0", "1"}},
	{"net.ipv4.conf.all.proxy_arp", []string{"0", "1"}},
	{"net.ipv4.conf.lo.rp_filter", []string{"0", "1", "2"}},
}

// TestPlanProperties checks on a fake namespace, for many seeds of
// settings (values and accepted values) and of values changed behind the
// Driver's back: Plan writes nothing; the Apply after it writes exactly
// the Plan's sysctls, in its order, with its values; after it Plan is
// empty and Apply writes nothing; after a resync, the same holds again.
func TestPlanProperties(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 21))
			ns := kernelfake.New(kernelfake.Options{})
			scribble := func() {
				for _, k := range planKeys {
					if r.IntN(2) == 0 {
						require.NoError(t, ns.Admin().SetSysctl(ctx, k.key, k.values[r.IntN(len(k.values))]))
					}
				}
			}
			var settings []sysctls.Setting
			for _, k := range planKeys {
				if r.IntN(4) == 0 {
					continue
				}
				s := sysctls.Setting{Key: k.key, Value: k.values[r.IntN(len(k.values))]}
				if r.IntN(3) == 0 {
					s.Accept = []string{k.values[r.IntN(len(k.values))]}
				}
				settings = append(settings, s)
			}
			c := &counting{next: ns}
			d, err := sysctls.New(sysctls.Options{Kernel: c, Settings: settings, Clock: clock.NewFake(time.Unix(1000, 0))})
			require.NoError(t, err)
			planned := 0
			for round := range 4 {
				what := fmt.Sprintf("seed %d, round %d", seed, round)
				scribble()
				if round > 0 {
					d.QueueResync()
				}
				c.reset()
				before := ns.Writes()
				plan, err := d.Plan(ctx)
				require.NoError(t, err, what)
				_, sets := c.reset()
				require.Empty(t, sets, "%s: Plan wrote", what)
				require.Equal(t, before, ns.Writes(), "%s: Plan wrote (the namespace's count)", what)

				_, err = d.Apply(ctx)
				require.NoError(t, err, what)
				_, sets = c.reset()
				var want []string
				for _, w := range plan.Writes {
					require.Equal(t, dataplane.WriteReplace, w.Op, what)
					want = append(want, strings.Replace(w.Object, " = ", "=", 1))
				}
				require.Equal(t, want, sets, "%s: Apply made other writes than its Plan:\n%v", what, plan)
				require.Equal(t, before+len(plan.Writes), ns.Writes(), "%s: the namespace's count", what)
				planned += len(plan.Writes)

				after, err := d.Plan(ctx)
				require.NoError(t, err, what)
				require.True(t, after.Empty(), "%s: %v", what, after)
				before = ns.Writes()
				_, err = d.Apply(ctx)
				require.NoError(t, err, what)
				require.Equal(t, before, ns.Writes(), "%s: an Apply whose Plan is empty wrote", what)

				st, err := d.State(ctx)
				require.NoError(t, err, what)
				assert.True(t, st.InSync(), "%s: %v", what, st)
				assert.Len(t, st.Owned, len(settings), what)
			}
			t.Logf("seed %d: %d settings, %d writes planned", seed, len(settings), planned)
		})
	}
}

// TestStateReportsDrift checks that State lists a value changed behind
// the Driver's back as drift, with the desired and the kernel's value,
// and a key the kernel lacks as drift with no value, and writes nothing.
func TestStateReportsDrift(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	d, err := sysctls.New(sysctls.Options{Kernel: ns, Settings: []sysctls.Setting{
		{Key: "net.ipv4.ip_forward", Value: "1"},
		{Key: "net.ipv4.conf.np-missing.forwarding", Value: "1"},
	}})
	require.NoError(t, err)
	_, _ = d.Apply(ctx)
	require.NoError(t, ns.Admin().SetSysctl(ctx, "net.ipv4.ip_forward", "0"))
	before := ns.Writes()
	st, err := d.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, before, ns.Writes(), "State writes nothing")
	assert.Equal(t, []dataplane.Drift{
		{Kind: "sysctl", Name: "net.ipv4.conf.np-missing.forwarding", Want: "1"},
		{Kind: "sysctl", Name: "net.ipv4.ip_forward", Want: "1", Have: "0"},
	}, st.Drift)
	assert.Equal(t, []dataplane.Object{{Kind: "sysctl", Text: "net.ipv4.ip_forward = 0"}}, st.Owned)
	require.Len(t, st.Failing, 1)
	assert.ErrorIs(t, st.Failing[0], sysctls.ErrNotApplied)
	assert.False(t, st.InSync())
}

// TestPlanCoupledSysctls shows the one way a Plan misses a write: the
// kernel turns all.accept_redirects to the opposite of IPv4 forwarding
// when forwarding is written, which Plan, deciding on the values read
// before any write, cannot know. Apply, checking the settings in order,
// writes accept_redirects back after it; the Plan after that is empty.
func TestPlanCoupledSysctls(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	require.NoError(t, ns.Admin().SetSysctl(ctx, "net.ipv4.ip_forward", "0"))
	redirects, err := ns.Sysctl(ctx, "net.ipv4.conf.all.accept_redirects")
	require.NoError(t, err)
	require.Equal(t, "1", redirects, "the kernel turned it on with forwarding off")
	c := &counting{next: ns}
	d, err := sysctls.New(sysctls.Options{Kernel: c, Settings: []sysctls.Setting{
		{Key: "net.ipv4.ip_forward", Value: "1"},
		{Key: "net.ipv4.conf.all.accept_redirects", Value: "1"},
	}})
	require.NoError(t, err)
	plan, err := d.Plan(ctx)
	require.NoError(t, err)
	assert.Equal(t, "sysctls: 1 write\n~ sysctl net.ipv4.ip_forward = 1 (was 0)", plan.String())
	_, err = d.Apply(ctx)
	require.NoError(t, err)
	_, sets := c.reset()
	assert.Equal(t, []string{"net.ipv4.ip_forward=1", "net.ipv4.conf.all.accept_redirects=1"}, sets)
	after, err := d.Plan(ctx)
	require.NoError(t, err)
	assert.True(t, after.Empty(), "%v", after)
}

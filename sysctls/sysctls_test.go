package sysctls_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/sysctls"
)

var ctx = context.Background()

// counting wraps a kernel.Sysctls and records its calls.
type counting struct {
	next kernel.Sysctls
	mu   sync.Mutex
	gets []string
	sets []string
}

func (c *counting) Sysctl(ctx context.Context, key string) (string, error) {
	c.mu.Lock()
	c.gets = append(c.gets, key)
	c.mu.Unlock()
	return c.next.Sysctl(ctx, key)
}

func (c *counting) SetSysctl(ctx context.Context, key, value string) error {
	c.mu.Lock()
	c.sets = append(c.sets, key+"="+value)
	c.mu.Unlock()
	return c.next.SetSysctl(ctx, key, value)
}

func (c *counting) reset() (gets, sets []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gets, sets, c.gets, c.sets = c.gets, c.sets, nil, nil
	return gets, sets
}

// hostDir makes a /proc/sys stand-in holding the machine-wide keys.
func hostDir(t *testing.T, bpf string) sysctls.ProcSys {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "kernel"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "kernel", "unprivileged_bpf_disabled"), []byte(bpf+"\n"), 0o644))
	return sysctls.ProcSys{Root: root}
}

func outcomes(r sysctls.Report) map[string]string {
	out := map[string]string{}
	for _, res := range r.Results {
		out[res.Setting.Key] = res.String()
	}
	return out
}

func TestDefaultsOnAFreshNamespace(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	require.NoError(t, ns.SetSysctl(ctx, "net.ipv4.conf.all.rp_filter", "1"))
	k := &counting{next: ns}
	host := hostDir(t, "0")
	m, err := sysctls.New(sysctls.Options{Kernel: k, Host: host})
	require.NoError(t, err)
	rep := m.Check(ctx)
	assert.Equal(t, map[string]string{
		"net.ipv4.ip_forward":              "net.ipv4.ip_forward: changed 0 -> 1",
		"net.ipv4.conf.all.rp_filter":      "net.ipv4.conf.all.rp_filter: changed 1 -> 2",
		"net.ipv6.conf.all.forwarding":     "net.ipv6.conf.all.forwarding: changed 0 -> 1",
		"kernel.unprivileged_bpf_disabled": "kernel.unprivileged_bpf_disabled: changed 0 -> 2",
	}, outcomes(rep))
	require.NoError(t, rep.Err())
	assert.Len(t, rep.Changed(), 4)
	assert.Empty(t, rep.Failed())
	v, _ := ns.Sysctl(ctx, "net.ipv4.ip_forward")
	assert.Equal(t, "1", v)
	b, err := host.Sysctl(ctx, "kernel.unprivileged_bpf_disabled")
	require.NoError(t, err)
	assert.Equal(t, "2", b)

	// Everything right now: read, nothing written.
	k.reset()
	rep = m.Check(ctx)
	gets, sets := k.reset()
	assert.Empty(t, sets)
	assert.Len(t, gets, 3)
	assert.Empty(t, rep.Changed())
	assert.Len(t, rep.Results, 4)
	for _, r := range rep.Results {
		assert.Equal(t, sysctls.Kept, r.Outcome, r.String())
		assert.Equal(t, r.Was, r.Now)
	}
}

func TestAcceptableValuesAreLeftAlone(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	require.NoError(t, ns.SetSysctl(ctx, "net.ipv4.ip_forward", "1"))
	require.NoError(t, ns.SetSysctl(ctx, "net.ipv4.conf.all.rp_filter", "0"))
	k := &counting{next: ns}
	m, err := sysctls.New(sysctls.Options{Kernel: k, Host: hostDir(t, "1"), Settings: sysctls.Defaults(ipfamily.IPv4)})
	require.NoError(t, err)
	rep := m.Check(ctx)
	_, sets := k.reset()
	assert.Empty(t, sets)
	assert.Equal(t, map[string]string{
		"net.ipv4.ip_forward":              "net.ipv4.ip_forward: kept 1",
		"net.ipv4.conf.all.rp_filter":      "net.ipv4.conf.all.rp_filter: kept 0",
		"kernel.unprivileged_bpf_disabled": "kernel.unprivileged_bpf_disabled: kept 1",
	}, outcomes(rep))
}

func TestWhatCannotBeApplied(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	var reports []sysctls.Report
	m, err := sysctls.New(sysctls.Options{
		Kernel: ns,
		Settings: []sysctls.Setting{
			{Key: "net.ipv4.ip_forward", Value: "1"},
			{Key: "kernel.unprivileged_bpf_disabled", Value: "2", Accept: []string{"1"}},
			{Key: "net.ipv4.no_such_key", Value: "1"},
		},
		OnReport: func(r sysctls.Report) { reports = append(reports, r) },
	})
	require.NoError(t, err)
	_, err = m.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial, "nothing required failed: the failures are the settings'")
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 2, pe.Failed)
	oe := pe.Objects()[0]
	assert.Equal(t, "sysctls: write sysctl kernel.unprivileged_bpf_disabled: setting not applied: no access to machine-wide sysctls", oe.Error())
	assert.Equal(t, dataplane.DriverStats{Desired: 3, InKernel: 1, Failing: 2, Writes: 1}, m.Stats())
	require.Len(t, reports, 1)
	failed := reports[0].Failed()
	require.Len(t, failed, 2)
	assert.ErrorIs(t, failed[0].Err, sysctls.ErrNoHostAccess)
	assert.ErrorIs(t, failed[0].Err, sysctls.ErrNotApplied)
	assert.Equal(t, "kernel.unprivileged_bpf_disabled: failed: no access to machine-wide sysctls", failed[0].String())
	assert.ErrorIs(t, failed[1].Err, kernel.ErrNotFound)
	assert.Equal(t, 1, strings.Count(failed[1].Err.Error(), "sysctls: "), failed[1].Err.Error())
	assert.NotContains(t, failed[1].Err.Error(), "kernel: ")

	// Read-only host: the value is read and the write refused.
	m, err = sysctls.New(sysctls.Options{Kernel: ns, Host: sysctls.ReadOnly(hostDir(t, "0")),
		Settings: []sysctls.Setting{{Key: "kernel.unprivileged_bpf_disabled", Value: "2", Accept: []string{"1"}}}})
	require.NoError(t, err)
	rep := m.Check(ctx)
	require.Len(t, rep.Failed(), 1)
	assert.ErrorIs(t, rep.Failed()[0].Err, sysctls.ErrReadOnly)
	assert.Equal(t, "0", rep.Failed()[0].Was)
}

// A Required setting that fails fails the Apply; the loop resyncs and
// retries, and it converges once the kernel takes it.
func TestRequiredFailureFailsTheDriver(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	refused := errors.New("refused by policy")
	ns.Refuse(func(op kernelfake.Op, obj any) error {
		if s, ok := obj.(kernelfake.Sysctl); ok && s.Key == "net.ipv4.ip_forward" {
			return refused
		}
		return nil
	})
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	m, err := sysctls.New(sysctls.Options{Kernel: ns, Settings: sysctls.Defaults(ipfamily.IPv4)[:1], Clock: clk})
	require.NoError(t, err)
	res, err := m.Apply(ctx)
	require.ErrorIs(t, err, sysctls.ErrNotApplied)
	require.ErrorIs(t, err, refused)
	require.NotErrorIs(t, err, dataplane.ErrPartial, "a required setting fails the Driver")
	assert.Equal(t, 100*time.Millisecond, res.RetryAfter)
	calls := ns.Calls(kernelfake.OpSetSysctl)
	_, err = m.Apply(ctx)
	require.ErrorIs(t, err, refused, "its retry is not due: nothing is written, the Driver still fails")
	require.NotErrorIs(t, err, dataplane.ErrPartial)
	assert.Equal(t, calls, ns.Calls(kernelfake.OpSetSysctl))
	ns.Refuse(nil)
	m.QueueResync() // as the loop does after a failure
	_, err = m.Apply(ctx)
	require.NoError(t, err)
	v, _ := ns.Sysctl(ctx, "net.ipv4.ip_forward")
	assert.Equal(t, "1", v)
}

// ignoring accepts writes and keeps its value, as a kernel that clamps one.
// Values written the way `sysctl -w` spells them are read back in the
// kernel's own form: the same value, kept once written (kernelfake parses
// them as the kernel does; TestKernelValuesInTheKernelsForm on the kernel).
func TestValuesInTheKernelsForm(t *testing.T) {
	checkValuesInTheKernelsForm(t, kernelfake.New(kernelfake.Options{}))
}

func checkValuesInTheKernelsForm(t *testing.T, ns kernel.Sysctls) {
	require.NoError(t, ns.SetSysctl(ctx, "net.ipv4.ip_local_port_range", "32768 60999"))
	require.NoError(t, ns.SetSysctl(ctx, "net.ipv4.ip_forward", "0"))
	require.NoError(t, ns.SetSysctl(ctx, "net.ipv4.conf.all.rp_filter", "2"))
	k := &counting{next: ns}
	m, err := sysctls.New(sysctls.Options{Kernel: k, Settings: []sysctls.Setting{
		{Key: "net.ipv4.ip_local_port_range", Value: "20000 30000"},
		{Key: "net.ipv4.ip_forward", Value: "01", Required: true},
		{Key: "net.ipv4.conf.all.rp_filter", Value: "1", Accept: []string{" 0", "2 "}},
	}})
	require.NoError(t, err)
	_, err = m.Apply(ctx)
	require.NoError(t, err)
	_, sets := k.reset()
	assert.ElementsMatch(t, []string{"net.ipv4.ip_local_port_range=20000 30000", "net.ipv4.ip_forward=01"}, sets,
		"rp_filter's 2 is one of Accept")
	v, err := ns.Sysctl(ctx, "net.ipv4.ip_local_port_range")
	require.NoError(t, err)
	assert.Equal(t, "20000\t30000", v, "the kernel's form")
	rep := m.Check(ctx)
	assert.Empty(t, rep.Failed())
	_, sets = k.reset()
	assert.Empty(t, sets, "kept as it is")
	st, err := m.State(ctx)
	require.NoError(t, err)
	assert.Empty(t, st.Drift)
	assert.Zero(t, m.Stats().Failing)
}

type ignoring struct{ kernel.Sysctls }

func (ignoring) SetSysctl(context.Context, string, string) error { return nil }

func TestReadBackMismatch(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	m, err := sysctls.New(sysctls.Options{Kernel: ignoring{ns}, Settings: []sysctls.Setting{{Key: "net.ipv4.ip_forward", Value: "1", Required: true}}})
	require.NoError(t, err)
	rep := m.Check(ctx)
	require.Len(t, rep.Failed(), 1)
	assert.Contains(t, rep.Failed()[0].Err.Error(), `wrote "1", read back "0"`)
	require.ErrorIs(t, rep.Err(), sysctls.ErrNotApplied)
}

func TestResyncSchedule(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	k := &counting{next: ns}
	var reports int
	m, err := sysctls.New(sysctls.Options{Kernel: k,
		Settings: sysctls.Defaults(ipfamily.IPv4)[:1], OnReport: func(sysctls.Report) { reports++ }})
	require.NoError(t, err)
	_, err = m.Apply(ctx)
	require.NoError(t, err)
	gets, sets := k.reset()
	assert.Len(t, gets, 2)
	assert.Equal(t, []string{"net.ipv4.ip_forward=1"}, sets)
	assert.Equal(t, 1, reports)

	_, err = m.Apply(ctx)
	require.NoError(t, err)
	gets, _ = k.reset()
	assert.Empty(t, gets, "not due")

	// Drift behind the agent's back, repaired at the loop's resync.
	require.NoError(t, ns.SetSysctl(ctx, "net.ipv4.ip_forward", "0"))
	_, err = m.Apply(ctx)
	require.NoError(t, err)
	gets, _ = k.reset()
	assert.Empty(t, gets)
	m.QueueResync()
	_, err = m.Apply(ctx)
	require.NoError(t, err)
	_, sets = k.reset()
	assert.Equal(t, []string{"net.ipv4.ip_forward=1"}, sets)
	assert.Equal(t, 2, reports)

	// A check that changes nothing reports nothing.
	m.QueueResync()
	_, err = m.Apply(ctx)
	require.NoError(t, err)
	gets, sets = k.reset()
	assert.Len(t, gets, 1)
	assert.Empty(t, sets)
	assert.Equal(t, 2, reports)
	assert.Equal(t, dataplane.DriverStats{Desired: 1, InKernel: 1, Writes: 2}, m.Stats())
}

// A group's settings (a manager's, per interface say) are checked at the
// next Apply, alone; a failing one backs off on its own and is forgotten
// with its group; a key taken by another group is refused.
func TestGroups(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	_, err := ns.AddLink(ctx, kernel.Link{Name: "eth1", Kind: kernel.KindBridge})
	require.NoError(t, err)
	k := &counting{next: ns}
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	m, err := sysctls.New(sysctls.Options{Kernel: k, Clock: clk, Settings: []sysctls.Setting{}})
	require.NoError(t, err)
	_, err = m.Apply(ctx)
	require.NoError(t, err)
	k.reset()

	eth1 := []sysctls.Setting{{Key: "net.ipv4.conf.eth1.forwarding", Value: "1"}}
	require.NoError(t, m.SetGroup("iface eth1", eth1))
	_, err = m.Apply(ctx)
	require.NoError(t, err)
	gets, sets := k.reset()
	assert.Equal(t, []string{"net.ipv4.conf.eth1.forwarding", "net.ipv4.conf.eth1.forwarding"}, gets, "only the new setting is read")
	assert.Equal(t, []string{"net.ipv4.conf.eth1.forwarding=1"}, sets)
	assert.Equal(t, eth1, m.Settings())

	require.ErrorIs(t, m.SetGroup("other", eth1), sysctls.ErrInvalidOptions, "a key is kept by one group")
	require.ErrorIs(t, m.SetGroup("other", []sysctls.Setting{{Key: "net", Value: "1"}}), sysctls.ErrInvalidOptions)

	// An interface that is not there: the setting fails on its own backoff.
	gone := []sysctls.Setting{{Key: "net.ipv4.conf.gone0.forwarding", Value: "1"}}
	require.NoError(t, m.SetGroup("iface gone0", gone))
	res, err := m.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	require.ErrorIs(t, err, kernel.ErrNotFound)
	assert.Equal(t, 100*time.Millisecond, res.RetryAfter)
	oe, ok := m.Failure("net.ipv4.conf.gone0.forwarding")
	require.True(t, ok)
	assert.Equal(t, 1, oe.Attempts)
	k.reset()
	_, err = m.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial, "still failing, waiting")
	gets, _ = k.reset()
	assert.Empty(t, gets, "not tried before its retry")
	clk.Advance(res.RetryAfter)
	_, err = m.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	gets, _ = k.reset()
	assert.Equal(t, []string{"net.ipv4.conf.gone0.forwarding"}, gets, "retried alone when due")
	assert.Equal(t, dataplane.DriverStats{Desired: 2, InKernel: 1, Failing: 1, Writes: 1}, m.Stats())

	// Withdrawn: forgotten at once, with no resync and nothing else due.
	require.NoError(t, m.SetGroup("iface gone0", nil))
	_, ok = m.Failure("net.ipv4.conf.gone0.forwarding")
	assert.False(t, ok)
	_, err = m.Apply(ctx)
	require.NoError(t, err)
	assert.Equal(t, dataplane.DriverStats{Desired: 1, InKernel: 1, Writes: 1}, m.Stats())
	m.QueueResync()
	_, err = m.Apply(ctx)
	require.NoError(t, err)
	assert.Equal(t, dataplane.DriverStats{Desired: 1, InKernel: 1, Writes: 1}, m.Stats())

	// The same with no other setting kept at all.
	require.NoError(t, m.SetGroup("iface eth1", nil))
	require.NoError(t, m.SetGroup("iface gone0", gone))
	_, err = m.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	require.NoError(t, m.SetGroup("iface gone0", nil))
	_, err = m.Apply(ctx)
	require.NoError(t, err)
	assert.Equal(t, dataplane.DriverStats{Writes: 1}, m.Stats())
}

func TestOptions(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	var nilNS *kernelfake.Namespace
	for name, o := range map[string]sysctls.Options{
		"no kernel":   {},
		"nil kernel":  {Kernel: nilNS},
		"empty key":   {Kernel: ns, Settings: []sysctls.Setting{{Value: "1"}}},
		"one part":    {Kernel: ns, Settings: []sysctls.Setting{{Key: "net", Value: "1"}}},
		"dotdot":      {Kernel: ns, Settings: []sysctls.Setting{{Key: "net/../kernel/x", Value: "1"}}},
		"absolute":    {Kernel: ns, Settings: []sysctls.Setting{{Key: "/proc/sys/net/ipv4/ip_forward", Value: "1"}}},
		"twice":       {Kernel: ns, Settings: []sysctls.Setting{{Key: "net.ipv4.ip_forward", Value: "1"}, {Key: "net/ipv4/ip_forward", Value: "1"}}},
		"empty value": {Kernel: ns, Settings: []sysctls.Setting{{Key: "net.ipv4.ip_forward"}}},
		"newline":     {Kernel: ns, Settings: []sysctls.Setting{{Key: "net.ipv4.ip_forward", Value: "1\n"}}},
	} {
		_, err := sysctls.New(o)
		require.ErrorIs(t, err, sysctls.ErrInvalidOptions, name)
		assert.Equal(t, 1, strings.Count(err.Error(), "sysctls: "), err.Error())
	}
	var nilHost *kernelfake.Namespace
	m, err := sysctls.New(sysctls.Options{Kernel: ns, Host: nilHost, Settings: []sysctls.Setting{}})
	require.NoError(t, err)
	assert.Empty(t, m.Settings())
	assert.Empty(t, m.Check(ctx).Results)
	assert.Equal(t, "sysctls", m.Name())
	assert.Equal(t, dataplane.PhaseRoutes, m.Phase())
}

func TestProcSys(t *testing.T) {
	p := hostDir(t, "0")
	_, err := p.Sysctl(ctx, "net.ipv4.ip_forward")
	require.ErrorIs(t, err, kernel.ErrInvalid, "net.* keys are a namespace's")
	require.ErrorIs(t, p.SetSysctl(ctx, "kernel/../../etc/passwd", "x"), kernel.ErrInvalid)
	_, err = p.Sysctl(ctx, "kernel.no_such")
	require.ErrorIs(t, err, kernel.ErrNotFound)
	require.ErrorIs(t, p.SetSysctl(ctx, "kernel.no_such", "1"), kernel.ErrNotFound, "a sysctl is never created")
	require.NoError(t, p.SetSysctl(ctx, "kernel/unprivileged_bpf_disabled", "1"))
	v, err := p.Sysctl(ctx, "kernel.unprivileged_bpf_disabled")
	require.NoError(t, err)
	assert.Equal(t, "1", v)
	ro := sysctls.ReadOnly(p)
	require.ErrorIs(t, ro.SetSysctl(ctx, "kernel.unprivileged_bpf_disabled", "0"), sysctls.ErrReadOnly)
	v, _ = ro.Sysctl(ctx, "kernel.unprivileged_bpf_disabled")
	assert.Equal(t, "1", v)
}

func TestStrings(t *testing.T) {
	assert.Equal(t, "kept", sysctls.Kept.String())
	assert.Equal(t, "changed", sysctls.Changed.String())
	assert.Equal(t, "failed", sysctls.Failed.String())
	assert.Equal(t, "unknown", sysctls.Outcome(0).String())
	r := sysctls.Report{Results: []sysctls.Result{
		{Setting: sysctls.Setting{Key: "a.b"}, Was: "1", Now: "1", Outcome: sysctls.Kept},
		{Setting: sysctls.Setting{Key: "a.c"}, Was: "0", Now: "1", Outcome: sysctls.Changed},
	}}
	assert.Equal(t, "a.b: kept 1\na.c: changed 0 -> 1", r.String())
}

// A group's settings re-checked on request (its object re-created with the
// kernel's defaults), and every Report that checked something handed to
// the watchers, kept settings included.
func TestRecheckGroupAndWatch(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	_, err := ns.AddLink(ctx, kernel.Link{Name: "eth1", Kind: kernel.KindBridge})
	require.NoError(t, err)
	k := &counting{next: ns}
	m, err := sysctls.New(sysctls.Options{Kernel: k, Settings: []sysctls.Setting{}})
	require.NoError(t, err)
	var reports []sysctls.Report
	m.Watch(func(r sysctls.Report) {
		reports = append(reports, r)
		_ = m.Stats() // outside the Driver's lock
	})
	m.Watch(nil)

	eth1 := []sysctls.Setting{{Key: "net.ipv4.conf.eth1.forwarding", Value: "1"}}
	require.NoError(t, m.SetGroup("iface eth1", eth1))
	_, err = m.Apply(ctx)
	require.NoError(t, err)
	require.Len(t, reports, 1)
	assert.Equal(t, sysctls.Changed, reports[0].Results[0].Outcome)

	_, err = m.Apply(ctx)
	require.NoError(t, err)
	require.Len(t, reports, 1, "nothing checked, nothing told")

	// The interface is made again: its value is the kernel's default.
	require.NoError(t, ns.Admin().SetSysctl(ctx, "net.ipv4.conf.eth1.forwarding", "0"))
	k.reset()
	m.RecheckGroup("iface eth1")
	m.RecheckGroup("unknown")
	_, err = m.Apply(ctx)
	require.NoError(t, err)
	gets, sets := k.reset()
	assert.Equal(t, []string{"net.ipv4.conf.eth1.forwarding", "net.ipv4.conf.eth1.forwarding"}, gets)
	assert.Equal(t, []string{"net.ipv4.conf.eth1.forwarding=1"}, sets)
	require.Len(t, reports, 2)

	// A check that keeps the value is told as well.
	m.RecheckGroup("iface eth1")
	_, err = m.Apply(ctx)
	require.NoError(t, err)
	require.Len(t, reports, 3)
	assert.Equal(t, sysctls.Kept, reports[2].Results[0].Outcome)
	m.Check(ctx)
	require.Len(t, reports, 4)
}

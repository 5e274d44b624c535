//go:build linux

package sysctls_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/sysctls"
)

// hostValue reads a sysctl of the machine (and, for net.*, of the test
// process's own namespace, which is the host's), never writing.
func hostValue(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/" + rel)
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// TestKernelStaticConfig runs the Driver on a loop in a fresh namespace
// where one setting is wrong (ip_forward 0), one strict (rp_filter 1) and
// one right (IPv6 forwarding 1): it reports and fixes the first two, leaves
// the third alone (no write), and only reads the machine-wide
// kernel.unprivileged_bpf_disabled, which no namespace can hold apart from
// the host: the test gives it a read-only Host, so the host's value is
// reported and never changed. A restarted Driver writes nothing; after
// drift it writes only the drifted key. The host's own values are the same
// before and after.
func TestKernelStaticConfig(t *testing.T) {
	ns := kerneltest.NewNS(t)
	require.NoError(t, ns.SetSysctl("net.ipv4.ip_forward", "0"))
	require.NoError(t, ns.SetSysctl("net.ipv4.conf.all.rp_filter", "1"))
	require.NoError(t, ns.SetSysctl("net.ipv6.conf.all.forwarding", "1"))
	hostBefore := map[string]string{}
	for _, rel := range []string{"net/ipv4/ip_forward", "net/ipv4/conf/all/rp_filter", "net/ipv6/conf/all/forwarding", "kernel/unprivileged_bpf_disabled"} {
		hostBefore[rel] = hostValue(t, rel)
	}
	bpf := hostBefore["kernel/unprivileged_bpf_disabled"]
	t.Logf("host kernel.unprivileged_bpf_disabled = %s (read only)", bpf)

	k := &counting{next: managertest.Open(t, ns)}
	reports := make(chan sysctls.Report, 4)
	m, err := sysctls.New(sysctls.Options{
		Kernel:   k,
		Host:     sysctls.ReadOnly(sysctls.ProcSys{}), // never the host's values
		Settings: sysctls.Defaults(),
		OnReport: func(r sysctls.Report) { reports <- r },
	})
	require.NoError(t, err)
	loop := managertest.StartLoop(t, dataplane.Options{}, nil, m)
	managertest.InSync(loop)
	var rep sysctls.Report
	select {
	case rep = <-reports:
	case <-time.After(30 * time.Second):
		t.Fatal("no report")
	}
	t.Logf("report:\n%s", rep)
	got := outcomes(rep)
	assert.Equal(t, "net.ipv4.ip_forward: changed 0 -> 1", got["net.ipv4.ip_forward"])
	assert.Equal(t, "net.ipv4.conf.all.rp_filter: changed 1 -> 2", got["net.ipv4.conf.all.rp_filter"])
	assert.Equal(t, "net.ipv6.conf.all.forwarding: kept 1", got["net.ipv6.conf.all.forwarding"])
	switch bpf {
	case "1", "2":
		assert.Equal(t, "kernel.unprivileged_bpf_disabled: kept "+bpf, got["kernel.unprivileged_bpf_disabled"])
	default:
		require.Len(t, rep.Failed(), 1)
		assert.ErrorIs(t, rep.Failed()[0].Err, sysctls.ErrReadOnly, "reported, not written")
	}
	_, sets := k.reset()
	assert.ElementsMatch(t, []string{"net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=2"}, sets, "the right value was not written")
	for key, want := range map[string]string{"net.ipv4.ip_forward": "1", "net.ipv4.conf.all.rp_filter": "2", "net.ipv6.conf.all.forwarding": "1"} {
		v, err := ns.Sysctl(key)
		require.NoError(t, err)
		assert.Equal(t, want, v, key)
	}
	h := managertest.WaitReady(t, loop, 30*time.Second)
	if bpf == "1" || bpf == "2" {
		assert.NoError(t, h.LastError)
	} else {
		assert.ErrorIs(t, h.LastError, dataplane.ErrPartial, "the read-only key is an object failing, not the Driver")
	}
	st := h.Drivers["sysctls"]
	assert.Equal(t, 4, st.Desired)
	assert.EqualValues(t, 2, st.Writes)

	// A restarted agent: reads, writes nothing.
	m2, err := sysctls.New(sysctls.Options{Kernel: k, Host: sysctls.ReadOnly(sysctls.ProcSys{})})
	require.NoError(t, err)
	rep = m2.Check(ctx)
	_, sets = k.reset()
	assert.Empty(t, sets)
	assert.Empty(t, rep.Changed())

	// Drift: only the drifted key is written.
	require.NoError(t, ns.SetSysctl("net.ipv6.conf.all.forwarding", "0"))
	rep = m2.Check(ctx)
	_, sets = k.reset()
	assert.Equal(t, []string{"net.ipv6.conf.all.forwarding=1"}, sets)
	t.Logf("after drift:\n%s", rep)

	for rel, was := range hostBefore {
		assert.Equal(t, was, hostValue(t, rel), "the host's %s is untouched", rel)
	}
}

// TestKernelValuesInTheKernelsForm: values written the way `sysctl -w` and
// CNI docs spell them ("20000 30000", "01") are read back in the kernel's
// own form ("20000\t30000", "1"); the Driver takes them as the same value:
// one write, then kept, with no failure and no drift.
func TestKernelValuesInTheKernelsForm(t *testing.T) {
	checkValuesInTheKernelsForm(t, managertest.Open(t, kerneltest.NewNS(t)))
}

package drivertest_test

import (
	"context"
	"net/netip"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
)

func blackhole(p string) kernel.RouteOp {
	return kernel.RouteOp{Kind: kernel.OpReplace, Route: kernel.Route{Family: kernel.IPv4, Table: 100,
		Dst: netip.MustParsePrefix(p), Type: kernel.RTNBlackhole}}
}

func TestRecorderCountsWritesOnly(t *testing.T) {
	ctx := context.Background()
	ns := kernelfake.New(kernelfake.Options{})
	rec := drivertest.Record(ns)

	errs := rec.ApplyRoutes(ctx, []kernel.RouteOp{blackhole("10.0.0.0/24"), blackhole("10.0.1.0/24")})
	require.Equal(t, []error{nil, nil}, errs)
	require.NoError(t, rec.AddRule(ctx, kernel.Rule{Family: kernel.IPv4, Priority: 100, Action: kernel.RuleLookup, Table: 100}))
	require.NoError(t, rec.SetSysctl(ctx, "net.ipv4.ip_forward", "1"))
	assert.Equal(t, 4, rec.Writes())
	assert.Equal(t, ns.Writes(), rec.Writes(), "the namespace saw the same writes")

	// Reads are not writes.
	_, err := rec.Rules(ctx, kernel.IPv4)
	require.NoError(t, err)
	require.NoError(t, rec.DumpRoutes(ctx, kernel.IPv4, 100, func(*kernel.Route) error { return nil }, nil))
	_, err = rec.Runner().Run(ctx, nil, "iptables-nft-save", "-t", "filter")
	require.NoError(t, err)
	_, err = rec.Runner().Run(ctx, nil, "ipset", "list", "-name")
	require.NoError(t, err)
	assert.Equal(t, 4, rec.Writes())

	// Runs that write are.
	_, err = rec.Runner().Run(ctx, strings.NewReader("*filter\n:np-a - [0:0]\nCOMMIT\n"), "iptables-nft-restore", "--noflush")
	require.NoError(t, err)
	_, err = rec.Runner().Run(ctx, strings.NewReader("create np4-a hash:ip family inet\n"), "ipset", "restore")
	require.NoError(t, err)
	assert.Equal(t, 6, rec.Writes())
	assert.Equal(t, []string{"np4-a"}, ns.IPSets().Names(), "the input reached the binary")
	log := rec.Log()
	require.Len(t, log, 6)
	assert.Equal(t, "replace route 10.0.0.0/24 table 100", log[0])
	assert.Contains(t, log[4], "run iptables-nft-restore --noflush\n\t*filter\n\t:np-a - [0:0]")

	total, objects := rec.Failed()
	assert.Zero(t, total+objects)
	rec.ResetCounts()
	assert.Zero(t, rec.Writes())
	assert.Empty(t, rec.Log())
}

func TestRecorderFailsTheNextWrites(t *testing.T) {
	ctx := context.Background()
	ns := kernelfake.New(kernelfake.Options{})
	rec := drivertest.Record(ns)
	rec.FailWrites(2)

	errs := rec.ApplyRoutes(ctx, []kernel.RouteOp{blackhole("10.0.0.0/24"), blackhole("10.0.1.0/24"), blackhole("10.0.2.0/24")})
	require.Len(t, errs, 3)
	for _, err := range errs[:2] {
		var oe *kernel.OpError
		require.ErrorAs(t, err, &oe)
		assert.ErrorIs(t, err, drivertest.ErrInjected)
		assert.ErrorIs(t, err, syscall.EIO)
	}
	require.NoError(t, errs[2], "the rest of the batch goes on")
	assert.Equal(t, []string{"10.0.2.0/24"}, dsts(ns.Routes(kernel.IPv4, 100)), "failed operations never reach the namespace")
	assert.Equal(t, 1, ns.Calls(kernelfake.OpApplyRoutes))

	require.NoError(t, rec.AddRule(ctx, kernel.Rule{Family: kernel.IPv4, Priority: 100, Action: kernel.RuleLookup, Table: 100}), "disarmed after 2")
	total, objects := rec.Failed()
	assert.Equal(t, []int{2, 2}, []int{total, objects})

	// Failures the namespace returns count too.
	ns.Fail(kernelfake.OpAddRule, 1, nil)
	require.Error(t, rec.AddRule(ctx, kernel.Rule{Family: kernel.IPv4, Priority: 101, Action: kernel.RuleLookup, Table: 100}))
	total, objects = rec.Failed()
	assert.Equal(t, []int{3, 3}, []int{total, objects})
}

func TestRecorderFailsBinariesAsTheKernelRefusingALine(t *testing.T) {
	ctx := context.Background()
	ns := kernelfake.New(kernelfake.Options{})
	rec := drivertest.Record(ns)
	for _, c := range []struct {
		name, input string
		args        []string
		line        int
		stderr      string
	}{
		{"iptables-nft-restore", "*filter\n:np-a - [0:0]\n-A np-a -j ACCEPT\nCOMMIT\n", []string{"--noflush"}, 2, "iptables-nft-restore: line 2 failed\n"},
		{"ip6tables-legacy-restore", "# hello\n*nat\n-A np-b -j RETURN\nCOMMIT\n", []string{"--noflush"}, 3, "ip6tables-legacy-restore: line 3 failed\n"},
		{"ipset", "create np4-a hash:ip family inet\nadd np4-a 10.0.0.1\n", []string{"restore"}, 1, "ipset v7.17: Error in line 1: Kernel error received: injected failure\n"},
		{"ipset", "", []string{"destroy", "np4-a"}, 0, "ipset v7.17: Kernel error received: injected failure\n"},
	} {
		rec.FailWrites(1)
		var stdin *strings.Reader
		if c.input != "" {
			stdin = strings.NewReader(c.input)
		}
		var err error
		if stdin != nil {
			_, err = rec.Runner().Run(ctx, stdin, c.name, c.args...)
		} else {
			_, err = rec.Runner().Run(ctx, nil, c.name, c.args...)
		}
		var ce *command.Error
		require.ErrorAs(t, err, &ce, c.name)
		assert.ErrorIs(t, err, drivertest.ErrInjected)
		assert.Equal(t, 1, ce.ExitCode)
		assert.Equal(t, c.stderr, string(ce.Stderr))
		if c.line > 0 {
			// The drivers find the line as they find the real binaries'.
			re := regexp.MustCompile(`(?:line (\d+) failed|Error in line (\d+):)`)
			re2 := command.NewRestoreError(append([]string{c.name}, c.args...), []byte(c.input), nil, err, re)
			assert.Equal(t, c.line, re2.Line, c.name)
		}
	}
	assert.Empty(t, ns.IPSets().Names(), "nothing reached the binary")
	assert.Nil(t, ns.IPTables().Chains(iptablesfake.BackendNFT, kernel.IPv4, "filter"))
	total, objects := rec.Failed()
	assert.Equal(t, []int{4, 0}, []int{total, objects}, "runs of binaries are no object writes")
}

func TestRunWrites(t *testing.T) {
	for _, c := range []struct {
		argv  string
		write bool
	}{
		{"iptables-nft-restore --noflush", true},
		{"/usr/sbin/ip6tables-legacy-restore -w 5 --noflush", true},
		{"iptables-legacy-save -t filter", false},
		{"ip6tables-nft-save", false},
		{"iptables -t nat -A POSTROUTING -j MASQUERADE", true},
		{"iptables-nft -w 5 -I FORWARD 1 -j DROP", true},
		{"iptables -t filter -L -n", false},
		{"iptables -C FORWARD -j DROP", false},
		{"ipset restore", true},
		{"ipset -exist restore", true},
		{"ipset add np4-a 10.0.0.1", true},
		{"ipset del np4-a 10.0.0.1", true},
		{"ipset destroy np4-a", true},
		{"ipset swap np4-a np4-b", true},
		{"ipset flush np4-a", true},
		{"ipset create np4-a hash:ip", true},
		{"ipset list -name", false},
		{"ipset save np4-a", false},
		{"ipset -o save list np4-a", false},
		{"ipset test np4-a 10.0.0.1", false},
		{"nft list ruleset", false},
		{"nft -f -", true},
		{"conntrack -D", true},
	} {
		f := strings.Fields(c.argv)
		assert.Equal(t, c.write, drivertest.RunWrites(f[0], f[1:]), c.argv)
	}
}

func dsts(rs []kernel.Route) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Dst.String())
	}
	return out
}

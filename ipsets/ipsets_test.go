package ipsets_test

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/ipsetsfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// newFake returns a driver of family fam on a fresh kernelfake namespace,
// and the ipset fake its Runner serves ipset from.
func newFake(t *testing.T, fam ipsets.Family, opts ...func(*ipsets.Options)) (*ipsets.IPSets, *ipsetsfake.Kernel) {
	t.Helper()
	ns := kernelfake.New(kernelfake.Options{})
	o := ipsets.Options{Family: fam, Prefix: prefixOf(fam), Kernel: ns}
	for _, f := range opts {
		f(&o)
	}
	d, err := ipsets.New(o)
	require.NoError(t, err)
	return d, ns.IPSets()
}

// runnerKernel is a kernel.Commands of a runner of the test's own (one
// that fails or slows down calls).
type runnerKernel struct{ r command.Runner }

func (k runnerKernel) Runner() command.Runner { return k.r }

// commands returns r as a driver's Kernel.
func commands(r command.Runner) kernel.Commands { return runnerKernel{r} }

func TestNewRejectsBadOptions(t *testing.T) {
	cases := []struct {
		name string
		opts ipsets.Options
	}{
		{"no family", ipsets.Options{Prefix: "np4-"}},
		{"bad family", ipsets.Options{Family: 5, Prefix: "np4-"}},
		{"no prefix", ipsets.Options{Family: ipsets.IPv4}},
		{"prefix with space", ipsets.Options{Family: ipsets.IPv4, Prefix: "np 4"}},
		{"prefix with tilde", ipsets.Options{Family: ipsets.IPv4, Prefix: "np~"}},
		{"prefix too long", ipsets.Options{Family: ipsets.IPv4, Prefix: strings.Repeat("p", ipsets.MaxPrefixLength+1)}},
		{"negative destroys", ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", MaxDestroysPerApply: -1}},
		{"negative budget", ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", ResyncBudget: -1}},
		{"negative retry", ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", RetryInterval: -1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ipsets.New(tc.opts)
			assert.ErrorIs(t, err, ipsets.ErrInvalidOptions)
			assert.Nil(t, d)
		})
	}
	d, err := ipsets.New(ipsets.Options{Family: ipsets.IPv6, Prefix: strings.Repeat("p", ipsets.MaxPrefixLength)})
	require.NoError(t, err)
	assert.Equal(t, ipsets.IPv6, d.Family())
	assert.Equal(t, dataplane.PhaseIPSetsUpdate, d.Phase())
	assert.Equal(t, "ipsets-"+strings.Repeat("p", ipsets.MaxPrefixLength), d.Name())
}

func TestBadInputChangesNothing(t *testing.T) {
	v4 := func(s string) netfilter.Member { return netfilter.IPMember(netip.MustParseAddr(s)) }
	good := []netfilter.Member{v4("10.0.0.1")}
	cases := []struct {
		name    string
		meta    netfilter.SetMetadata
		members []netfilter.Member
		err     error
	}{
		{"empty name", netfilter.SetMetadata{Type: netfilter.HashIP}, good, netfilter.ErrInvalidSetName},
		{"name with space", netfilter.SetMetadata{Name: "a b", Type: netfilter.HashIP}, good, netfilter.ErrInvalidSetName},
		{"name with tilde", netfilter.SetMetadata{Name: "~0", Type: netfilter.HashIP}, good, netfilter.ErrInvalidSetName},
		{"name too long", netfilter.SetMetadata{Name: strings.Repeat("n", 28), Type: netfilter.HashIP}, good, netfilter.ErrSetNameTooLong},
		{"unknown type", netfilter.SetMetadata{Name: "s", Type: "hash:mac"}, good, netfilter.ErrUnknownSetType},
		{"no type", netfilter.SetMetadata{Name: "s"}, good, netfilter.ErrUnknownSetType},
		{"other family set", netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, Family: ipsets.IPv6}, good, netfilter.ErrWrongFamily},
		{"other family member", netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, []netfilter.Member{v4("10.0.0.1"), netfilter.IPMember(netip.MustParseAddr("fd00::1"))}, netfilter.ErrWrongFamily},
		{"4in6 in a v4 set", netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, []netfilter.Member{netfilter.IPMember(netip.MustParseAddr("::ffff:10.0.0.1"))}, netfilter.ErrWrongFamily},
		{"zero member", netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, []netfilter.Member{{}}, netfilter.ErrInvalidMember},
		{"prefix in hash:ip", netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, []netfilter.Member{netfilter.NetMember(netip.MustParsePrefix("10.0.0.0/8"))}, netfilter.ErrInvalidMember},
		{"/0 in hash:net", netfilter.SetMetadata{Name: "s", Type: netfilter.HashNet}, []netfilter.Member{netfilter.NetMember(netip.MustParsePrefix("0.0.0.0/0"))}, netfilter.ErrInvalidMember},
		{"address in hash:ip,port", netfilter.SetMetadata{Name: "s", Type: netfilter.HashIPPort}, good, netfilter.ErrInvalidMember},
		{"address in hash:net,net", netfilter.SetMetadata{Name: "s", Type: netfilter.HashNetNet}, good, netfilter.ErrInvalidMember},
		{"address in bitmap:port", netfilter.SetMetadata{Name: "s", Type: netfilter.BitmapPort}, good, netfilter.ErrInvalidMember},
		{"port out of range", netfilter.SetMetadata{Name: "s", Type: netfilter.BitmapPort, Range: netfilter.PortRange{First: 10, Last: 20}}, []netfilter.Member{netfilter.PortMember(21)}, netfilter.ErrInvalidMember},
		{"port in hash:ip", netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, []netfilter.Member{netfilter.PortMember(80)}, netfilter.ErrInvalidMember},
		{"empty range", netfilter.SetMetadata{Name: "s", Type: netfilter.BitmapPort, Range: netfilter.PortRange{First: 20, Last: 10}}, nil, netfilter.ErrInvalidSetMetadata},
		{"range on a hash", netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, Range: netfilter.PortRange{First: 1, Last: 2}}, nil, netfilter.ErrInvalidSetMetadata},
		{"size on a bitmap", netfilter.SetMetadata{Name: "s", Type: netfilter.BitmapPort, MaxSize: 10}, nil, netfilter.ErrInvalidSetMetadata},
		{"negative size", netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: -1}, nil, netfilter.ErrInvalidSetMetadata},
		{"too many members", netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: 1}, []netfilter.Member{v4("10.0.0.1"), v4("10.0.0.2")}, netfilter.ErrTooManyMembers},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, k := newFake(t, ipsets.IPv4)
			require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: 10}, good))
			apply(t, d)
			k.ResetCalls()

			err := d.AddOrReplaceSet(tc.meta, tc.members)
			require.ErrorIs(t, err, tc.err)
			t.Log(err)
			members, ok := d.Members("s")
			require.True(t, ok)
			assert.Equal(t, good, members, "desired state unchanged")
			meta, _ := d.Metadata("s")
			assert.Equal(t, netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, Family: ipsets.IPv4, MaxSize: 10}, meta)
			assert.Equal(t, []string{"s"}, d.Names())
			apply(t, d)
			assert.Zero(t, k.CountCalls("restore"), "nothing written")
		})
	}
}

func TestMemberOperationErrors(t *testing.T) {
	d, _ := newFake(t, ipsets.IPv4)
	a1 := netfilter.IPMember(netip.MustParseAddr("10.0.0.1"))
	a2 := netfilter.IPMember(netip.MustParseAddr("10.0.0.2"))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: 2}, []netfilter.Member{a1}))

	assert.ErrorIs(t, d.AddMembers("nope", []netfilter.Member{a2}), netfilter.ErrUnknownSet)
	assert.ErrorIs(t, d.RemoveMembers("nope", []netfilter.Member{a2}), netfilter.ErrUnknownSet)
	assert.ErrorIs(t, d.AddMembers("bad name", []netfilter.Member{a2}), netfilter.ErrInvalidSetName)
	assert.ErrorIs(t, d.AddMembers("s", []netfilter.Member{a2, netfilter.IPMember(netip.MustParseAddr("fd00::1"))}), netfilter.ErrWrongFamily)
	assert.ErrorIs(t, d.RemoveMembers("s", []netfilter.Member{netfilter.PortMember(1)}), netfilter.ErrInvalidMember)
	assert.ErrorIs(t, d.AddMembers("s", []netfilter.Member{a2, netfilter.IPMember(netip.MustParseAddr("10.0.0.3"))}), netfilter.ErrTooManyMembers)
	assert.ErrorIs(t, d.RemoveSet(strings.Repeat("x", 40)), netfilter.ErrSetNameTooLong)
	got, _ := d.Members("s")
	assert.Equal(t, []netfilter.Member{a1}, got, "failed calls changed nothing")

	require.NoError(t, d.AddMembers("s", []netfilter.Member{a2, a2, a1}), "duplicates and present members count once")
	got, _ = d.Members("s")
	assert.Equal(t, []netfilter.Member{a1, a2}, got)
	require.NoError(t, d.RemoveMembers("s", []netfilter.Member{a2, netfilter.IPMember(netip.MustParseAddr("10.9.9.9"))}))
	got, _ = d.Members("s")
	assert.Equal(t, []netfilter.Member{a1}, got)

	require.NoError(t, d.RemoveSet("nope"), "removing an unknown set does nothing")
	require.NoError(t, d.RemoveSet("s"))
	_, ok := d.Members("s")
	assert.False(t, ok)
	_, ok = d.Metadata("s")
	assert.False(t, ok)
	assert.Empty(t, d.Names())

	name, err := d.KernelName("s")
	require.NoError(t, err)
	assert.Equal(t, "np4-s", name)
	_, err = d.KernelName(strings.Repeat("x", 28))
	assert.ErrorIs(t, err, netfilter.ErrSetNameTooLong)
}

func TestDefaultsFilledIn(t *testing.T) {
	d, k := newFake(t, ipsets.IPv6)
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "h", Type: netfilter.HashNet}, nil))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "p", Type: netfilter.BitmapPort}, nil))
	meta, ok := d.Metadata("h")
	require.True(t, ok)
	assert.Equal(t, netfilter.SetMetadata{Name: "h", Type: netfilter.HashNet, Family: ipsets.IPv6, MaxSize: netfilter.DefaultMaxSize}, meta)
	meta, _ = d.Metadata("p")
	assert.Equal(t, netfilter.SetMetadata{Name: "p", Type: netfilter.BitmapPort, Family: ipsets.IPv6, Range: netfilter.PortRange{First: 0, Last: 65535}}, meta)
	apply(t, d)
	h, _ := k.Header("np6-h")
	assert.Contains(t, h, "family inet6")
	assert.Contains(t, h, "maxelem 1048576")
	h, _ = k.Header("np6-p")
	assert.Contains(t, h, "range 0-65535")
}

func TestOneRestorePerApply(t *testing.T) {
	d, k := newFake(t, ipsets.IPv4)
	for _, name := range []string{"c", "a", "b"} {
		require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: name, Type: netfilter.HashIP}, manyIPs(ipsets.IPv4, 2)))
	}
	apply(t, d)
	assert.Equal(t, 1, k.CountCalls("restore"))
	script := k.Calls()[len(k.Calls())-1].Stdin
	assert.Equal(t, `create np4-a hash:ip family inet maxelem 1048576 -exist
add np4-a 10.1.0.0
add np4-a 10.1.0.1
create np4-b hash:ip family inet maxelem 1048576 -exist
add np4-b 10.1.0.0
add np4-b 10.1.0.1
create np4-c hash:ip family inet maxelem 1048576 -exist
add np4-c 10.1.0.0
add np4-c 10.1.0.1
`, sortAdds(script), "sets in name order, create before adds")

	require.NoError(t, d.RemoveMembers("a", manyIPs(ipsets.IPv4, 1)))
	require.NoError(t, d.AddMembers("b", []netfilter.Member{netfilter.IPMember(netip.MustParseAddr("10.9.0.1"))}))
	k.ResetCalls()
	apply(t, d)
	require.Equal(t, 1, k.CountCalls("restore"))
	assert.Equal(t, "del np4-a 10.1.0.0 -exist\nadd np4-b 10.9.0.1 -exist\n", k.Calls()[0].Stdin)
}

// sortAdds sorts each run of add lines (member order within a set is map
// order).
func sortAdds(script string) string {
	lines := strings.SplitAfter(script, "\n")
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && strings.HasPrefix(lines[j], "add ") {
			j++
		}
		if j > i {
			sub := lines[i:j]
			for a := range sub {
				for b := a + 1; b < len(sub); b++ {
					if sub[b] < sub[a] {
						sub[a], sub[b] = sub[b], sub[a]
					}
				}
			}
			i = j
		} else {
			i++
		}
	}
	return strings.Join(lines, "")
}

func TestMemberChangesReported(t *testing.T) {
	var got []netfilter.MemberChange
	d, k := newFake(t, ipsets.IPv4, func(o *ipsets.Options) {
		o.OnMemberChange = func(c netfilter.MemberChange) { got = append(got, c) }
	})
	m := manyIPs(ipsets.IPv4, 3)
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, m[:2]))
	apply(t, d)
	assert.ElementsMatch(t, []netfilter.MemberChange{{Set: "s", Member: m[0], Added: true}, {Set: "s", Member: m[1], Added: true}}, got)

	got = nil
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: 10}, m[1:]))
	apply(t, d)
	assert.ElementsMatch(t, []netfilter.MemberChange{{Set: "s", Member: m[0], Added: false}, {Set: "s", Member: m[2], Added: true}}, got,
		"a swap reports the difference")

	got = nil
	k.FailNext(1, "restore", "")
	require.NoError(t, d.AddMembers("s", m[:1]))
	_, err := d.Apply(context.Background())
	require.Error(t, err)
	assert.Empty(t, got, "nothing reported for a failed write")

	apply(t, d)
	assert.Equal(t, []netfilter.MemberChange{{Set: "s", Member: m[0], Added: true}}, got)

	got = nil
	require.NoError(t, d.RemoveSet("s"))
	apply(t, d)
	assert.ElementsMatch(t, []netfilter.MemberChange{
		{Set: "s", Member: m[0], Added: false}, {Set: "s", Member: m[1], Added: false}, {Set: "s", Member: m[2], Added: false},
	}, got, "a destroyed set's members are reported removed")
}

// A line the kernel refuses fails its set alone: the error keeps the line
// and ipset's message, the set waits for its backoff, and converges once
// the kernel accepts it.
func TestRestoreErrorKeepsContext(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	d, k := newFake(t, ipsets.IPv4, func(o *ipsets.Options) { o.Clock = clk })
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, manyIPs(ipsets.IPv4, 10)))
	k.FailLine("10.1.0.", "Kernel error received: no memory")
	res, err := d.Apply(context.Background())
	require.ErrorIs(t, err, dataplane.ErrPartial)
	require.ErrorIs(t, err, ipsets.ErrRestore)
	assert.Equal(t, ipsets.DefaultRetryInterval, res.RetryAfter)
	var rerr *command.RestoreError
	require.ErrorAs(t, err, &rerr)
	assert.Equal(t, 2, rerr.Line)
	assert.Equal(t, []string{"ipset", "restore"}, rerr.Argv)
	assert.Contains(t, string(rerr.Stderr), "Error in line 2: Kernel error received: no memory")
	assert.Contains(t, rerr.FailedLine(), "add np4-s 10.1.0.")
	assert.Contains(t, rerr.Excerpt(), "      1  create np4-s hash:ip")
	assert.Contains(t, rerr.Excerpt(), ">     2  add np4-s 10.1.0.")
	assert.Equal(t, 5, strings.Count(rerr.Excerpt(), "\n"), "lines 1-5 around line 2")
	var ce *command.Error
	assert.ErrorAs(t, err, &ce, "the runner's error is kept")
	assert.Regexp(t, `^ipsets: 1 object\(s\) failed; write set np4-s: ipset restore failed: line 2 "add np4-s 10\.1\.0\.\d+": Kernel error received: no memory$`, err.Error())

	// Until it is due, the set is not tried again.
	k.ClearFailures()
	k.ResetCalls()
	_, err = d.Apply(context.Background())
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.Zero(t, k.CountCalls(""), "nothing run while the set waits")

	clk.Advance(res.RetryAfter)
	apply(t, d)
	assert.Equal(t, 1, k.CountCalls("restore"))
	got, _ := k.Members("np4-s")
	assert.Len(t, got, 10)
}

func TestRestoreErrorWithoutLine(t *testing.T) {
	fail := command.RunnerFunc(func(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
		if args[0] == "restore" {
			return []byte("partial"), errors.New("signal: killed")
		}
		return nil, nil
	})
	d, err := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: commands(fail)})
	require.NoError(t, err)
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, manyIPs(ipsets.IPv4, 10)))
	_, err = d.Apply(context.Background())
	require.ErrorIs(t, err, ipsets.ErrRestore)
	var rerr *command.RestoreError
	require.ErrorAs(t, err, &rerr)
	assert.Zero(t, rerr.Line)
	assert.Equal(t, "partial", string(rerr.Stdout))
	assert.Equal(t, 7, strings.Count(rerr.Excerpt(), "\n"), "the first lines")
	text := err.Error()
	assert.True(t, strings.HasPrefix(text, "ipsets: ipset restore failed: ipset restore: signal: killed\ninput:\n      1  create np4-s "), text)
	assert.Equal(t, 1, strings.Count(text, "ipsets: "), text)
}

func TestListFailureForcesFullResync(t *testing.T) {
	d, k := newFake(t, ipsets.IPv4)
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, manyIPs(ipsets.IPv4, 2)))
	apply(t, d)
	d.QueueResync()
	k.FailNext(1, "list", "")
	_, err := d.Apply(context.Background())
	require.ErrorIs(t, err, ipsets.ErrCommand)
	require.NotErrorIs(t, err, dataplane.ErrPartial, "the set list is the whole driver's")
	res, err := d.ApplyDeletions(context.Background())
	require.NoError(t, err, "deletions wait for the resync")
	assert.Zero(t, res.RetryAfter)
	k.ResetCalls()
	apply(t, d)
	assert.Equal(t, 1, k.CountCalls("save"), "the retry re-reads every owned set")
	assert.Zero(t, k.CountCalls("restore"))
}

// A set ipset cannot read is neither written nor destroyed, and fails
// alone: the other sets are read and written, and it is read again when
// due.
func TestUnreadableSetIsIsolated(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	d, k := newFake(t, ipsets.IPv4, func(o *ipsets.Options) { o.Clock = clk })
	require.NoError(t, k.Exec("create", "np4-bad", "hash:ip"))
	require.NoError(t, k.Exec("create", "np4-stale", "hash:ip"))
	k.FailLine("save np4-bad", "Kernel error received: Operation not permitted")
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "bad", Type: netfilter.HashIP}, manyIPs(ipsets.IPv4, 1)))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "good", Type: netfilter.HashIP}, manyIPs(ipsets.IPv4, 1)))
	ctx := context.Background()
	res, err := d.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	require.ErrorIs(t, err, ipsets.ErrCommand)
	assert.Contains(t, err.Error(), "read set np4-bad: ipset command failed: save np4-bad")
	assert.Equal(t, ipsets.DefaultRetryInterval, res.RetryAfter)
	_, err = d.ApplyDeletions(ctx)
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe, "ApplyDeletions reports the set that waits for its read")
	assert.Equal(t, dataplane.PartialError{Driver: "ipsets", Waiting: 1, Errs: pe.Errs}, *pe)
	assert.Equal(t, []string{"np4-bad", "np4-good"}, k.Names(), "the other set is written, the leftover destroyed")
	members, _ := k.Members("np4-bad")
	assert.Empty(t, members, "the unreadable set is not written")

	k.ClearFailures()
	clk.Advance(res.RetryAfter)
	apply(t, d)
	members, _ = k.Members("np4-bad")
	assert.Equal(t, []string{"10.1.0.0"}, members)
}

// A destroy that ipset refuses fails that set alone; one whose failure
// belongs to no set (the runner itself failed) forces a full resync.
func TestDestroyFailures(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	ns := kernelfake.New(kernelfake.Options{})
	k, r := ns.IPSets(), ns.Runner()
	var broken atomic.Bool
	runner := command.RunnerFunc(func(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
		if broken.Load() && args[0] == "destroy" {
			return nil, &command.Error{Argv: append([]string{name}, args...), ExitCode: -1, Err: errors.New("exec: no such file")}
		}
		return r.Run(ctx, stdin, name, args...)
	})
	d, err := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: commands(runner), Clock: clk, MaxDestroysPerApply: 5})
	require.NoError(t, err)
	for _, n := range []string{"a", "b"} {
		require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: n, Type: netfilter.HashIP}, nil))
	}
	apply(t, d)
	require.NoError(t, d.RemoveSet("a"))
	require.NoError(t, d.RemoveSet("b"))
	k.FailNext(1, "destroy", "")
	res, err := d.ApplyDeletions(context.Background())
	require.ErrorIs(t, err, dataplane.ErrPartial)
	require.ErrorIs(t, err, ipsets.ErrCommand)
	assert.Contains(t, err.Error(), "set np4-a: ")
	assert.Equal(t, []string{"np4-a"}, k.Names(), "the other set is destroyed")
	clk.Advance(res.RetryAfter)
	res, err = d.ApplyDeletions(context.Background())
	require.NoError(t, err)
	assert.Zero(t, res.RetryAfter)
	assert.Empty(t, k.Names())

	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "c", Type: netfilter.HashIP}, nil))
	apply(t, d)
	require.NoError(t, d.RemoveSet("c"))
	broken.Store(true)
	_, err = d.ApplyDeletions(context.Background())
	require.ErrorIs(t, err, ipsets.ErrCommand)
	require.NotErrorIs(t, err, dataplane.ErrPartial)
	broken.Store(false)
	k.ResetCalls()
	apply(t, d)
	assert.Equal(t, 1, k.CountCalls("list"), "the failure forced a full resync")
	assert.Empty(t, k.Names())

	// A set destroyed by someone else meanwhile is simply gone.
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, nil))
	apply(t, d)
	require.NoError(t, d.RemoveSet("s"))
	require.NoError(t, k.Exec("destroy", "np4-s"))
	res, err = d.ApplyDeletions(context.Background())
	require.NoError(t, err)
	assert.Zero(t, res.RetryAfter)
}

func TestDestroysAreRateLimited(t *testing.T) {
	d, k := newFake(t, ipsets.IPv4, func(o *ipsets.Options) {
		o.MaxDestroysPerApply = 2
		o.RetryInterval = 7 * time.Millisecond
	})
	names := []string{"a", "b", "c", "d", "e"}
	for _, n := range names {
		require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: n, Type: netfilter.HashIP}, nil))
	}
	apply(t, d)
	for _, n := range names {
		require.NoError(t, d.RemoveSet(n))
	}
	ctx := context.Background()
	var calls []int
	for range 3 {
		k.ResetCalls()
		res, err := d.ApplyDeletions(ctx)
		require.NoError(t, err)
		calls = append(calls, k.CountCalls("destroy"))
		if len(k.Names()) > 0 {
			assert.Equal(t, 7*time.Millisecond, res.RetryAfter)
		} else {
			assert.Zero(t, res.RetryAfter)
		}
	}
	assert.Equal(t, []int{2, 2, 1}, calls)
	assert.Empty(t, k.Names())
}

// clockRunner advances a fake clock on every save, so that the resync
// budget is spent after a known number of sets.
type clockRunner struct {
	r   command.Runner
	clk *clock.Fake
	per time.Duration
}

func (c clockRunner) Run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	if len(args) > 0 && args[0] == "save" {
		c.clk.Advance(c.per)
	}
	return c.r.Run(ctx, stdin, name, args...)
}

func TestResyncBudgetBoundsRechecks(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	k := ns.IPSets()
	clk := clock.NewFake(time.Unix(0, 0))
	d, err := ipsets.New(ipsets.Options{
		Family: ipsets.IPv4, Prefix: "np4-", Clock: clk, ResyncBudget: 100 * time.Millisecond,
		Kernel: commands(clockRunner{r: ns.Runner(), clk: clk, per: 40 * time.Millisecond}),
	})
	require.NoError(t, err)
	for i := range 7 {
		require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s" + string(rune('0'+i)), Type: netfilter.HashIP}, manyIPs(ipsets.IPv4, 3)))
	}
	apply(t, d)
	require.NoError(t, k.Exec("add", "np4-s6", "10.9.9.9"))

	d.QueueResync()
	var saves []int
	for range 4 {
		k.ResetCalls()
		res, err := d.Apply(context.Background())
		require.NoError(t, err)
		saves = append(saves, k.CountCalls("save"))
		if res.RetryAfter == 0 {
			break
		}
	}
	assert.Equal(t, []int{3, 3, 1}, saves, "3 sets of 40ms fit a 100ms budget (the third overruns it)")
	got, _ := k.Members("np4-s6")
	assert.NotContains(t, got, "10.9.9.9", "the foreign member was found and removed")
}

func TestOwnershipIsByPrefix(t *testing.T) {
	d, k := newFake(t, ipsets.IPv4)
	for _, name := range []string{"np4", "np4x", "np-4-a", "other"} {
		require.NoError(t, k.Exec("create", name, "hash:ip"))
	}
	require.NoError(t, k.Exec("create", "np4-stale", "hash:ip"))
	require.NoError(t, k.Exec("create", "np4-~3", "hash:ip"), "a temporary set left by a crash")
	apply(t, d)
	for range 3 {
		apply(t, d)
	}
	assert.ElementsMatch(t, []string{"np4", "np4x", "np-4-a", "other"}, k.Names())
	for _, c := range k.Calls() {
		if c.Args[0] == "save" {
			assert.True(t, strings.HasPrefix(c.Args[1], "np4-"), "only owned sets are read: %v", c.Args)
		}
	}
}

func TestTemporaryNameAvoidsKnownSets(t *testing.T) {
	d, k := newFake(t, ipsets.IPv4, func(o *ipsets.Options) { o.MaxDestroysPerApply = 1 })
	require.NoError(t, k.Exec("create", "np4-~0", "hash:net"))
	require.NoError(t, k.Exec("add", "np4-~0", "10.0.0.0/8"))
	require.NoError(t, k.SetReferences("np4-~0", 1))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: 5}, nil))
	_, err := d.Apply(context.Background())
	require.NoError(t, err)
	_, err = d.ApplyDeletions(context.Background())
	require.ErrorIs(t, err, netfilter.ErrSetInUse, "the leftover is held")
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: 6}, nil))
	_, err = d.Apply(context.Background())
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe, "Apply reports the leftover that waits to be destroyed")
	assert.Equal(t, dataplane.PartialError{Driver: "ipsets", Waiting: 1, Errs: pe.Errs}, *pe)
	assert.Contains(t, lastScript(k), "swap np4-s np4-~1\n")
	members, _ := k.Members("np4-~0")
	assert.Equal(t, []string{"10.0.0.0/8"}, members, "the leftover is untouched until it can be destroyed")
}

func TestApplyHonoursContext(t *testing.T) {
	d, _ := newFake(t, ipsets.IPv4)
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := d.Apply(ctx)
	require.ErrorIs(t, err, ipsets.ErrCommand)
	assert.Contains(t, err.Error(), "context canceled")
}

// TestWithLoop runs the driver under a dataplane.Loop: the set is created
// before the (fake) rule writer runs and destroyed only after it dropped
// its reference.
func TestWithLoop(t *testing.T) {
	d, k := newFake(t, ipsets.IPv4, func(o *ipsets.Options) { o.RetryInterval = time.Millisecond })
	rules := &ruleWriter{k: k}
	loop, err := dataplane.New(dataplane.Options{Coalesce: -1})
	require.NoError(t, err)
	require.NoError(t, loop.AddDriver(d))
	require.NoError(t, loop.AddDriver(rules))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	loop.DatastoreInSync()
	loop.InterfacesInSync()

	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "allow", Type: netfilter.HashIP}, manyIPs(ipsets.IPv4, 2)))
	rules.want("np4-allow")
	require.NoError(t, loop.Send(ctx, "kick"))
	require.Eventually(t, func() bool { return rules.has("np4-allow") }, 5*time.Second, time.Millisecond)

	require.NoError(t, d.RemoveSet("allow"))
	rules.want("")
	require.NoError(t, loop.Send(ctx, "kick"))
	require.Eventually(t, func() bool { return len(k.Names()) == 0 }, 5*time.Second, time.Millisecond)
	assert.False(t, rules.sawMissing(), "the rule writer never referenced a missing set")
	cancel()
	<-done
}

// ruleWriter stands for iptables: in PhaseTables it references the set it
// wants (through the fake's reference count) and drops the others.
type ruleWriter struct {
	k       *ipsetsfake.Kernel
	mu      sync.Mutex
	wanted  string
	current string
	missing bool
}

func (r *ruleWriter) want(set string) { r.mu.Lock(); r.wanted = set; r.mu.Unlock() }
func (r *ruleWriter) has(set string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current == set
}
func (r *ruleWriter) sawMissing() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.missing }

func (r *ruleWriter) Apply(context.Context) (dataplane.ApplyResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current == r.wanted {
		return dataplane.ApplyResult{}, nil
	}
	if r.current != "" {
		_ = r.k.SetReferences(r.current, 0)
	}
	if r.wanted != "" {
		if err := r.k.SetReferences(r.wanted, 1); err != nil {
			r.missing = true
			return dataplane.ApplyResult{}, err
		}
	}
	r.current = r.wanted
	return dataplane.ApplyResult{}, nil
}
func (r *ruleWriter) QueueResync()           {}
func (r *ruleWriter) Phase() dataplane.Phase { return dataplane.PhaseTables }

// TestLoopCarriesOnPastABadSet runs the driver under a dataplane.Loop with
// a set the kernel refuses: the loop counts it as a failing object, not a
// failing driver, the other set is written, and the bad one is written by
// the driver's own retries once the kernel takes it.
func TestLoopCarriesOnPastABadSet(t *testing.T) {
	d, k := newFake(t, ipsets.IPv4, func(o *ipsets.Options) { o.RetryInterval = time.Millisecond })
	k.SetUnsupported(netfilter.HashNetNet)
	var mu sync.Mutex
	var last dataplane.Health
	loop, err := dataplane.New(dataplane.Options{Coalesce: -1, OnHealth: func(h dataplane.Health) { mu.Lock(); last = h; mu.Unlock() }})
	require.NoError(t, err)
	require.NoError(t, loop.AddDriver(d))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	loop.DatastoreInSync()
	loop.InterfacesInSync()

	p := netip.MustParsePrefix("10.0.0.0/8")
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "nn", Type: netfilter.HashNetNet}, []netfilter.Member{netfilter.NetNetMember(p, p)}))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "good", Type: netfilter.HashIP}, manyIPs(ipsets.IPv4, 2)))
	require.NoError(t, loop.Send(ctx, "kick"))
	health := func() dataplane.Health { mu.Lock(); defer mu.Unlock(); return last }
	require.Eventually(t, func() bool {
		h := health()
		return h.Ready && h.FailingObjects == 1 && slices.Contains(k.Names(), "np4-good")
	}, 10*time.Second, time.Millisecond)
	h := health()
	assert.Empty(t, h.FailingDrivers, "the driver is not backed off")
	require.ErrorIs(t, h.LastError, ipsets.ErrRestore)
	assert.Contains(t, h.LastError.Error(), "set np4-nn: ")

	k.SetUnsupported()
	require.Eventually(t, func() bool {
		return slices.Contains(k.Names(), "np4-nn") && health().FailingObjects == 0
	}, 10*time.Second, time.Millisecond, "retried by the driver's own RetryAfter, without a new message")
	cancel()
	<-done
}

// A runner that fails without ipset's own exit status (here the fake
// namespace's injected failure: a *command.Error with ExitCode -1) is no
// set's failure: the restore fails the Apply as a whole, and the next
// Apply re-reads the kernel and converges.
func TestRunnerFailureIsTheDrivers(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	k := ns.IPSets()
	d, err := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: ns})
	require.NoError(t, err)
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, manyIPs(ipsets.IPv4, 2)))
	apply(t, d)

	require.NoError(t, d.AddMembers("s", manyIPs(ipsets.IPv4, 3)))
	before := ns.Calls(kernelfake.OpRun)
	ns.Fail(kernelfake.OpRun, 1, nil)
	_, err = d.Apply(context.Background())
	require.ErrorIs(t, err, ipsets.ErrRestore)
	require.ErrorIs(t, err, kernelfake.ErrInjected)
	require.NotErrorIs(t, err, dataplane.ErrPartial)
	var ce *command.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, -1, ce.ExitCode)
	assert.Equal(t, 1, ns.Calls(kernelfake.OpRun)-before, "one restore, not retried within the Apply")

	k.ResetCalls()
	apply(t, d)
	assert.Equal(t, 1, k.CountCalls("list"), "the failure forced a full resync")
	got, _ := k.Members("np4-s")
	assert.Len(t, got, 3)
}

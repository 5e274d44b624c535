package ipsets_test

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/ipsetsfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// parseEntries reads the "Number of entries" of `ipset list -t` output.
func parseEntries(t *testing.T, out string) int {
	t.Helper()
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(line, "Number of entries:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no entry count in %q", out)
	return 0
}

// replay runs script one line at a time on k and calls check after each.
func replay(t *testing.T, k *ipsetsfake.Kernel, script string, check func(line string)) {
	t.Helper()
	for line := range strings.Lines(script) {
		_, err := k.Run(context.Background(), strings.NewReader(line), "ipset", "restore")
		require.NoError(t, err, line)
		check(strings.TrimSpace(line))
	}
}

// ipRange returns n IPv4 members 10.b.x.y from index first.
func ipRange(b byte, first, n int) []netfilter.Member {
	out := make([]netfilter.Member, n)
	for i := range n {
		j := first + i
		out[i] = netfilter.IPMember(netip.AddrFrom4([4]byte{10, b, byte(j >> 8), byte(j)}))
	}
	return out
}

// TestUpdateNeverShrinksBelowOldAndNew replays each update the driver
// writes one line at a time, as rules matching the set see it: a member
// that stays desired is never missing, and the set never holds fewer
// members than both its old and its new contents (the old way, every
// delete before every add, emptied it on the way). Replacing most of a
// set is a swap; a small change is written in place, adds first; an
// update that adding first would overfill is a swap.
func TestUpdateNeverShrinksBelowOldAndNew(t *testing.T) {
	const n = 2000
	old := ipRange(1, 0, n)
	cases := []struct {
		name    string
		maxSize int
		next    []netfilter.Member
		swap    bool
	}{
		{"replace most", 0, append(ipRange(1, 0, 100), ipRange(2, 0, n-100)...), true},
		{"replace all", 0, ipRange(2, 0, n), true},
		{"replace a few", 0, append(ipRange(1, 10, n-10), ipRange(2, 0, 10)...), false},
		{"replace below the swap minimum", 0, append(ipRange(1, 60, n-60), ipRange(2, 0, 60)...), false},
		{"replace a third", 0, append(ipRange(1, 700, n-700), ipRange(2, 0, 700)...), true},
		{"replace a quarter", 0, append(ipRange(1, 500, n-500), ipRange(2, 0, 500)...), false},
		{"full set, replace one", n, append(ipRange(1, 1, n-1), ipRange(2, 0, 1)...), true},
		{"grow by a few", 0, append(ipRange(1, 0, n), ipRange(2, 0, 50)...), false},
		{"shrink by a few", 0, ipRange(1, 0, n-50), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			meta := netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: tc.maxSize}
			d, k := newFake(t, ipsets.IPv4)
			require.NoError(t, d.AddOrReplaceSet(meta, old))
			apply(t, d)
			before := k.Save()
			require.NoError(t, d.AddOrReplaceSet(meta, tc.next))
			k.ResetCalls()
			apply(t, d)
			require.Equal(t, 1, k.CountCalls("restore"))
			script := k.Calls()[0].Stdin
			if tc.swap {
				assert.Contains(t, script, "\nswap np4-s np4-~0\n")
			} else {
				assert.NotContains(t, script, "swap")
				assert.NotContains(t, script, "create")
			}
			got, _ := k.Members("np4-s")
			require.Len(t, got, len(tc.next))

			// Replay the same input on the old state, line by line.
			r := ipsetsfake.New()
			_, err := r.Run(context.Background(), strings.NewReader(before), "ipset", "restore")
			require.NoError(t, err)
			kept := map[string]bool{}
			for _, m := range tc.next {
				kept[m.String()] = true
			}
			var keptSample []string
			for _, m := range old {
				if kept[m.String()] && len(keptSample) < 3 {
					keptSample = append(keptSample, m.String())
				}
			}
			floor := min(len(old), len(tc.next))
			replay(t, r, script, func(line string) {
				out, err := r.Run(context.Background(), nil, "ipset", "list", "-t", "np4-s")
				require.NoError(t, err)
				require.GreaterOrEqual(t, parseEntries(t, string(out)), floor, "after %q", line)
				for _, m := range keptSample {
					require.NoError(t, r.Exec("test", "np4-s", m), "a kept member is missing after %q", line)
				}
			})
		})
	}
}

// failRestoreAt returns a runner that passes every command to ns's, except
// that the next restore (while *at is not 0) fails at its line *at: that
// line is armed with FailLine on ns's ipset fake for the one restore
// (ClearFailures follows it), so the fake refuses it as the kernel
// refuses an add. The lines before it stay written, and the rest are not
// run. The driver writes a set's adds in map order, so which member a
// line adds is not known in advance, only where the restore stops.
func failRestoreAt(ns *kernelfake.Namespace, at *int) command.Runner {
	k, r := ns.IPSets(), ns.Runner()
	return command.RunnerFunc(func(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
		if *at == 0 || len(args) == 0 || args[0] != "restore" {
			return r.Run(ctx, stdin, name, args...)
		}
		in, err := io.ReadAll(stdin)
		if err != nil {
			return nil, err
		}
		lines := strings.Split(string(in), "\n")
		if *at <= len(lines) && lines[*at-1] != "" {
			k.FailLine(lines[*at-1], "")
			defer k.ClearFailures()
		}
		*at = 0
		return r.Run(ctx, bytes.NewReader(in), name, args...)
	})
}

// addedOn returns the members that lines first to last (1-based) of
// script add; each of them must be an add of a hash:ip member.
func addedOn(t *testing.T, script string, first, last int) []netfilter.Member {
	t.Helper()
	lines := strings.Split(script, "\n")
	require.GreaterOrEqual(t, len(lines), last, "script %q", script)
	var out []netfilter.Member
	for _, line := range lines[first-1 : last] {
		f := strings.Fields(line)
		require.True(t, len(f) >= 3 && f[0] == "add", "line %q", line)
		m, err := netfilter.ParseMember(netfilter.HashIP, f[2])
		require.NoError(t, err)
		out = append(out, m)
	}
	return out
}

func added(set string, ms []netfilter.Member) []netfilter.MemberChange {
	out := make([]netfilter.MemberChange, len(ms))
	for i, m := range ms {
		out[i] = netfilter.MemberChange{Set: set, Member: m, Added: true}
	}
	return out
}

func memberTexts(ms []netfilter.Member) []string {
	ms = slices.Clone(ms)
	slices.SortFunc(ms, netfilter.Member.Compare)
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.String()
	}
	return out
}

// failedUpdate adds ms[1:] to a set holding ms[0] in a restore that fails
// at line at, then retries it. It checks that the adds written before the
// failing line are read back and reported, the failing one and those
// after it once the retry writes them: each member once, and the driver's
// view of the kernel is the kernel's (nothing is left to write).
func failedUpdate(t *testing.T, ms []netfilter.Member, at int) (*ipsets.IPSets, *ipsetsfake.Kernel, *clock.Fake, *[]netfilter.MemberChange) {
	t.Helper()
	clk := clock.NewFake(time.Unix(0, 0))
	got := new([]netfilter.MemberChange)
	ns := kernelfake.New(kernelfake.Options{})
	k := ns.IPSets()
	failAt := 0
	d, err := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: commands(failRestoreAt(ns, &failAt)), Clock: clk,
		OnMemberChange: func(c netfilter.MemberChange) { *got = append(*got, c) }})
	require.NoError(t, err)
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: 10}, ms[:1]))
	apply(t, d)
	*got = nil

	require.NoError(t, d.AddMembers("s", ms[1:]))
	k.ResetCalls()
	failAt = at
	res, err := d.Apply(context.Background())
	require.ErrorIs(t, err, dataplane.ErrPartial)
	require.Equal(t, 1, k.CountCalls("restore"), "the failed set waits for its retry")
	script := k.Calls()[0].Stdin
	require.Equal(t, len(ms)-1, strings.Count(script, "\n"), "one add per new member: %q", script)
	written := addedOn(t, script, 1, at-1)
	rest := addedOn(t, script, at, len(ms)-1)
	kernel, _ := k.Members("np4-s")
	require.Equal(t, memberTexts(append(slices.Clone(ms[:1]), written...)), kernel, "the restore stopped at line %d", at)
	assert.ElementsMatch(t, added("s", written), *got, "the adds before line %d are reported", at)
	first := slices.Clone(*got)

	clk.Advance(res.RetryAfter)
	*got = nil
	k.ResetCalls()
	apply(t, d)
	assert.ElementsMatch(t, added("s", rest), *got, "the retry reports the adds it wrote")
	assert.ElementsMatch(t, added("s", ms[1:]), append(first, *got...), "each change is reported once")
	require.Equal(t, 1, k.CountCalls("restore"))
	retry := lastScript(k)
	assert.ElementsMatch(t, rest, addedOn(t, retry, 1, strings.Count(retry, "\n")),
		"the retry writes the failing line and those after it, nothing more")
	kernel, _ = k.Members("np4-s")
	require.Equal(t, memberTexts(ms), kernel)

	// The driver's view is the kernel's: re-reading it finds nothing to
	// write or report.
	d.QueueResync()
	*got = nil
	k.ResetCalls()
	apply(t, d)
	assert.Zero(t, k.CountCalls("restore"))
	assert.Empty(t, *got)
	return d, k, clk, got
}

// TestFailedRestoreReportsWhatItWrote: the member changes a failed restore
// wrote before it stopped are read back and reported, the rest once
// written; a temporary set a failed swap left behind is destroyed without
// being reported, and the next swap takes another name meanwhile.
//
// The adds of an update come in map order, so the restore is made to fail
// at a given line rather than at a given member's add: failing at ms[3]'s
// add wrote two, one or no adds before it, depending on the order.
func TestFailedRestoreReportsWhatItWrote(t *testing.T) {
	ms := ipRange(1, 0, 4)
	for _, at := range []int{1, 2} {
		t.Run("line "+strconv.Itoa(at), func(t *testing.T) { failedUpdate(t, ms, at) })
	}
	// The third line of the update fails: two adds were written.
	d, k, clk, got := failedUpdate(t, ms, 3)

	// A swap whose temporary set cannot be destroyed: the set itself is
	// written (nothing left to retry), the leftover waits for its destroy.
	*got = nil
	k.FailLine("destroy np4-~0", "")
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: 20}, ms[:2]))
	_, err := d.Apply(context.Background())
	require.NoError(t, err, "the set was written before the failing line")
	assert.ElementsMatch(t, []netfilter.MemberChange{{Set: "s", Member: ms[2], Added: false}, {Set: "s", Member: ms[3], Added: false}}, *got)
	assert.Contains(t, k.Names(), "np4-~0")
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: 30}, ms[:2]))
	_, err = d.Apply(context.Background())
	require.NoError(t, err)
	assert.Contains(t, lastScript(k), "swap np4-s np4-~1\n", "the leftover's name is taken")
	res, err := d.ApplyDeletions(context.Background())
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.Contains(t, err.Error(), "set np4-~0: ")
	k.ClearFailures()
	clk.Advance(res.RetryAfter)
	*got = nil
	res, err = d.ApplyDeletions(context.Background())
	require.NoError(t, err)
	assert.Zero(t, res.RetryAfter)
	assert.Equal(t, []string{"np4-s"}, k.Names())
	assert.Empty(t, *got, "a temporary set's members are not reported")
}

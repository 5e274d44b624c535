package ipsets_test

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/ipsets/ipsetsfake"
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
func ipRange(b byte, first, n int) []ipsets.Member {
	out := make([]ipsets.Member, n)
	for i := range n {
		j := first + i
		out[i] = ipsets.IPMember(netip.AddrFrom4([4]byte{10, b, byte(j >> 8), byte(j)}))
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
		next    []ipsets.Member
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
			meta := ipsets.SetMetadata{Name: "s", Type: ipsets.HashIP, MaxSize: tc.maxSize}
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

// TestFailedRestoreReportsWhatItWrote: the member changes a failed restore
// wrote before it stopped are read back and reported, the rest once
// written; a temporary set a failed swap left behind is destroyed without
// being reported, and the next swap takes another name meanwhile.
func TestFailedRestoreReportsWhatItWrote(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	var got []ipsets.MemberChange
	d, k := newFake(t, ipsets.IPv4, func(o *ipsets.Options) {
		o.Clock = clk
		o.OnMemberChange = func(c ipsets.MemberChange) { got = append(got, c) }
	})
	ms := ipRange(1, 0, 4)
	require.NoError(t, d.AddOrReplaceSet(ipsets.SetMetadata{Name: "s", Type: ipsets.HashIP, MaxSize: 10}, ms[:1]))
	apply(t, d)
	got = nil

	// The third line of the update fails: two adds were written.
	require.NoError(t, d.AddMembers("s", ms[1:]))
	k.FailLine("add np4-s "+ms[3].String(), "")
	res, err := d.Apply(context.Background())
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.ElementsMatch(t, []ipsets.MemberChange{{Set: "s", Member: ms[1], Added: true}, {Set: "s", Member: ms[2], Added: true}}, got)
	k.ClearFailures()
	clk.Advance(res.RetryAfter)
	got = nil
	apply(t, d)
	assert.Equal(t, []ipsets.MemberChange{{Set: "s", Member: ms[3], Added: true}}, got)

	// A swap whose temporary set cannot be destroyed: the set itself is
	// written (nothing left to retry), the leftover waits for its destroy.
	got = nil
	k.FailLine("destroy np4-~0", "")
	require.NoError(t, d.AddOrReplaceSet(ipsets.SetMetadata{Name: "s", Type: ipsets.HashIP, MaxSize: 20}, ms[:2]))
	_, err = d.Apply(context.Background())
	require.NoError(t, err, "the set was written before the failing line")
	assert.ElementsMatch(t, []ipsets.MemberChange{{Set: "s", Member: ms[2], Added: false}, {Set: "s", Member: ms[3], Added: false}}, got)
	assert.Contains(t, k.Names(), "np4-~0")
	require.NoError(t, d.AddOrReplaceSet(ipsets.SetMetadata{Name: "s", Type: ipsets.HashIP, MaxSize: 30}, ms[:2]))
	_, err = d.Apply(context.Background())
	require.NoError(t, err)
	assert.Contains(t, lastScript(k), "swap np4-s np4-~1\n", "the leftover's name is taken")
	res, err = d.ApplyDeletions(context.Background())
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.Contains(t, err.Error(), "set np4-~0: ")
	k.ClearFailures()
	clk.Advance(res.RetryAfter)
	got = nil
	res, err = d.ApplyDeletions(context.Background())
	require.NoError(t, err)
	assert.Zero(t, res.RetryAfter)
	assert.Equal(t, []string{"np4-s"}, k.Names())
	assert.Empty(t, got, "a temporary set's members are not reported")
}

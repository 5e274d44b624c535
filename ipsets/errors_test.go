package ipsets_test

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/netfilter"
)

// requirePrefixedOnce checks that err's text starts with the package's
// prefix, names it once, and that errors.Is matches every sentinel.
func requirePrefixedOnce(t *testing.T, err error, sentinels ...error) {
	t.Helper()
	require.Error(t, err)
	text := err.Error()
	assert.True(t, strings.HasPrefix(text, "ipsets: "), "prefix: %s", text)
	assert.Equal(t, 1, strings.Count(text, "ipsets: "), "prefix once: %s", text)
	assert.NotContains(t, text, "ipfamily: ", "one package prefix: %s", text)
	for _, s := range sentinels {
		assert.ErrorIs(t, err, s, text)
	}
}

// TestBadInputErrors checks the errors of bad input at every entry point:
// one "ipsets: " prefix at the start, errors.Is matching every sentinel the
// text speaks of, and nothing run.
func TestBadInputErrors(t *testing.T) {
	ma, mp := netip.MustParseAddr, netip.MustParsePrefix
	ip := func(s string) netfilter.Member { return netfilter.IPMember(ma(s)) }
	hashIP := netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}
	hashNet := netfilter.SetMetadata{Name: "n", Type: netfilter.HashNet}
	cases := []struct {
		name      string
		call      func(d *ipsets.IPSets) error
		sentinels []error
		names     string // a part of the text that says what was wrong
	}{
		{"host bits", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(hashNet, []netfilter.Member{netfilter.NetMember(mp("10.0.0.1/24"))})
		}, []error{netfilter.ErrInvalidMember, ipfamily.ErrHostBits}, "10.0.0.1/24 has host bits set (the network is 10.0.0.0/24)"},
		{"host bits added", func(d *ipsets.IPSets) error {
			return d.AddMembers("n", []netfilter.Member{netfilter.NetMember(mp("10.9.9.9/16"))})
		}, []error{netfilter.ErrInvalidMember, ipfamily.ErrHostBits}, "10.9.9.9/16"},
		{"host bits removed", func(d *ipsets.IPSets) error {
			return d.RemoveMembers("n", []netfilter.Member{netfilter.NetNetMember(mp("10.0.0.0/8"), mp("10.0.0.1/8"))})
		}, []error{netfilter.ErrInvalidMember, ipfamily.ErrHostBits}, "10.0.0.1/8"},
		{"wrong family member", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(hashIP, []netfilter.Member{ip("10.0.0.1"), ip("fd00::1")})
		}, []error{netfilter.ErrWrongFamily, ipfamily.ErrWrongFamily}, `fd00::1 is IPv6, the set is IPv4 (set "s", member 1)`},
		{"wrong family set", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, Family: ipsets.IPv6}, nil)
		}, []error{netfilter.ErrWrongFamily, ipfamily.ErrWrongFamily}, "the backend is IPv4"},
		{"unspecified address", func(d *ipsets.IPSets) error {
			return d.AddMembers("s", []netfilter.Member{ip("0.0.0.0")})
		}, []error{netfilter.ErrInvalidMember}, "unspecified address"},
		{"zone", func(d *ipsets.IPSets) error {
			return d.AddMembers("s", []netfilter.Member{netfilter.IPMember(ma("fe80::1%eth0"))})
		}, []error{netfilter.ErrInvalidMember}, "zone"},
		{"zero member", func(d *ipsets.IPSets) error {
			return d.AddMembers("s", []netfilter.Member{{}})
		}, []error{netfilter.ErrInvalidMember}, "zero Member"},
		{"unknown type", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: "hash:mac"}, nil)
		}, []error{netfilter.ErrUnknownSetType}, `"hash:mac"`},
		{"bad metadata", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.BitmapPort, MaxSize: 3}, nil)
		}, []error{netfilter.ErrInvalidSetMetadata}, "MaxSize must be zero"},
		{"too many", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: 1}, []netfilter.Member{ip("10.0.0.1"), ip("10.0.0.2")})
		}, []error{netfilter.ErrTooManyMembers}, "MaxSize is 1"},
		{"unknown set", func(d *ipsets.IPSets) error {
			return d.AddMembers("nope", []netfilter.Member{ip("10.0.0.1")})
		}, []error{netfilter.ErrUnknownSet}, `"nope"`},
		{"bad name", func(d *ipsets.IPSets) error {
			return d.RemoveMembers("a b", nil)
		}, []error{netfilter.ErrInvalidSetName}, `"a b"`},
		{"name too long", func(d *ipsets.IPSets) error {
			return d.RemoveSet(strings.Repeat("x", 28))
		}, []error{netfilter.ErrSetNameTooLong}, "the kernel allows 31"},
		{"kernel name", func(d *ipsets.IPSets) error {
			_, err := d.KernelName("~0")
			return err
		}, []error{netfilter.ErrInvalidSetName}, `"~0"`},
		{"options", func(*ipsets.IPSets) error {
			_, err := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4~"})
			return err
		}, []error{ipsets.ErrInvalidOptions}, `"np4~"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, k := newFake(t, ipsets.IPv4)
			require.NoError(t, d.AddOrReplaceSet(hashIP, []netfilter.Member{ip("10.0.0.1")}))
			require.NoError(t, d.AddOrReplaceSet(hashNet, []netfilter.Member{netfilter.NetMember(mp("10.0.0.0/8"))}))
			apply(t, d)
			before := len(k.Calls())
			err := tc.call(d)
			requirePrefixedOnce(t, err, tc.sentinels...)
			assert.Contains(t, err.Error(), tc.names)
			assert.Len(t, k.Calls(), before, "nothing run")
			apply(t, d)
			assert.Zero(t, k.CountCalls("restore")-1, "nothing written after the bad input")
		})
	}
}

// TestPartialErrorText checks the error of an Apply in which several sets
// failed: one prefix, every set named, every sentinel matched.
func TestPartialErrorText(t *testing.T) {
	d, k := newFake(t, ipsets.IPv4)
	k.SetUnsupported(netfilter.HashNetNet)
	p := mp("10.0.0.0/8")
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "a", Type: netfilter.HashNetNet}, []netfilter.Member{netfilter.NetNetMember(p, p)}))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "b", Type: netfilter.HashNetNet}, nil))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "c", Type: netfilter.HashNet}, []netfilter.Member{netfilter.NetMember(p)}))
	_, err := d.Apply(context.Background())
	requirePrefixedOnce(t, err, ipsets.ErrRestore)
	assert.Contains(t, err.Error(), "2 object(s) failed; write set np4-a: ipset restore failed: line 1 ")
	assert.Contains(t, err.Error(), "; write set np4-b: ipset restore failed: line 1 ")
	assert.Contains(t, err.Error(), "set type not supported")
	var rerr *command.RestoreError
	require.True(t, errors.As(err, &rerr))
	assert.Equal(t, 1, rerr.Line)
	members, _ := k.Members("np4-c")
	assert.Equal(t, []string{"10.0.0.0/8"}, members, "the good set is written")
}

func mp(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// TestNilContext: a nil context is context.Background(), as in dataplane.
func TestNilContext(t *testing.T) {
	d, k := newFake(t, ipsets.IPv6)
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, manyIPs(ipsets.IPv6, 2)))
	//lint:ignore SA1012 a nil context must not panic
	_, err := d.Apply(nil)
	require.NoError(t, err)
	require.NoError(t, d.RemoveSet("s"))
	//lint:ignore SA1012 a nil context must not panic
	_, err = d.ApplyDeletions(nil)
	require.NoError(t, err)
	assert.Empty(t, k.Names())
	//lint:ignore SA1012 the fake takes a nil context too
	_, err = k.Run(nil, nil, "ipset", "list", "-name")
	require.NoError(t, err)
}

// TestSetBackoff: a set that keeps failing waits twice as long after each
// failure, up to MaxSetBackoff; a changed declaration is tried at once, an
// identical one is not.
func TestSetBackoff(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	d, k := newFake(t, ipsets.IPv4, func(o *ipsets.Options) { o.Clock = clk })
	k.FailLine("create np4-bad ", "Kernel error received: Cannot allocate memory")
	meta := netfilter.SetMetadata{Name: "bad", Type: netfilter.HashIP}
	require.NoError(t, d.AddOrReplaceSet(meta, manyIPs(ipsets.IPv4, 2)))
	ctx := context.Background()
	var waits []time.Duration
	for i := range 12 {
		if i > 0 {
			clk.Advance(waits[i-1])
		}
		res, err := d.Apply(ctx)
		require.ErrorIs(t, err, dataplane.ErrPartial)
		waits = append(waits, res.RetryAfter)
	}
	r := ipsets.DefaultRetryInterval
	var want []time.Duration
	for i := range 12 {
		want = append(want, min(r<<i, ipsets.MaxSetBackoff))
	}
	assert.Equal(t, want, waits)
	assert.Equal(t, ipsets.MaxSetBackoff, waits[11], "bounded")

	// The same declaration again does not reset the backoff.
	k.ResetCalls()
	require.NoError(t, d.AddOrReplaceSet(meta, manyIPs(ipsets.IPv4, 2)))
	require.NoError(t, d.AddMembers("bad", manyIPs(ipsets.IPv4, 1)))
	require.NoError(t, d.RemoveMembers("bad", manyIPs(ipsets.IPv4, 3)[2:]))
	res, err := d.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.Zero(t, k.CountCalls("restore"), "still waiting")
	assert.Equal(t, ipsets.MaxSetBackoff, res.RetryAfter)

	// A new member is a new declaration: tried at once, backoff from the start.
	require.NoError(t, d.AddMembers("bad", manyIPs(ipsets.IPv4, 3)))
	res, err = d.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.Equal(t, 1, k.CountCalls("restore"))
	assert.Equal(t, r, res.RetryAfter)

	// Fixed: converges when due.
	k.ClearFailures()
	clk.Advance(r)
	apply(t, d)
	members, _ := k.Members("np4-bad")
	assert.Len(t, members, 3)
}

// TestManyFailingSets: each Apply takes a bounded number of restores; sets
// that failed wait on their own, so later Applies reach the rest, and a
// good set is written once the bad ones have been set aside.
func TestManyFailingSets(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	d, k := newFake(t, ipsets.IPv4, func(o *ipsets.Options) { o.Clock = clk })
	k.FailLine("create np4-bad", "")
	for i := range 10 {
		require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "bad" + strconv.Itoa(i), Type: netfilter.HashIP}, nil))
	}
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "good", Type: netfilter.HashIP}, manyIPs(ipsets.IPv4, 1)))
	ctx := context.Background()
	_, err := d.Apply(ctx)
	require.ErrorIs(t, err, ipsets.ErrRestore)
	require.NotErrorIs(t, err, dataplane.ErrPartial, "too many sets failed in one Apply: not theirs alone")
	assert.Equal(t, 8, k.CountCalls("restore"))

	k.ResetCalls()
	_, err = d.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 3, pe.Failed, "the sets tried in this Apply")
	assert.Equal(t, 7, pe.Waiting, "the sets set aside by the first, waiting for their retry")
	assert.True(t, strings.HasPrefix(err.Error(), "ipsets: 10 object(s) failed; "), err.Error())
	members, ok := k.Members("np4-good")
	require.True(t, ok)
	assert.Len(t, members, 1)
}

func TestFamilyName(t *testing.T) {
	assert.Equal(t, "inet", ipsets.FamilyName(ipsets.IPv4))
	assert.Equal(t, "inet6", ipsets.FamilyName(ipsets.IPv6))
	assert.Equal(t, "Family(5)", ipsets.FamilyName(ipsets.Family(5)))
}

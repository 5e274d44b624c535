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
	ip := func(s string) ipsets.Member { return ipsets.IPMember(ma(s)) }
	hashIP := ipsets.SetMetadata{Name: "s", Type: ipsets.HashIP}
	hashNet := ipsets.SetMetadata{Name: "n", Type: ipsets.HashNet}
	cases := []struct {
		name      string
		call      func(d *ipsets.IPSets) error
		sentinels []error
		names     string // a part of the text that says what was wrong
	}{
		{"host bits", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(hashNet, []ipsets.Member{ipsets.NetMember(mp("10.0.0.1/24"))})
		}, []error{ipsets.ErrInvalidMember, ipfamily.ErrHostBits}, "10.0.0.1/24 has host bits set (the network is 10.0.0.0/24)"},
		{"host bits added", func(d *ipsets.IPSets) error {
			return d.AddMembers("n", []ipsets.Member{ipsets.NetMember(mp("10.9.9.9/16"))})
		}, []error{ipsets.ErrInvalidMember, ipfamily.ErrHostBits}, "10.9.9.9/16"},
		{"host bits removed", func(d *ipsets.IPSets) error {
			return d.RemoveMembers("n", []ipsets.Member{ipsets.NetNetMember(mp("10.0.0.0/8"), mp("10.0.0.1/8"))})
		}, []error{ipsets.ErrInvalidMember, ipfamily.ErrHostBits}, "10.0.0.1/8"},
		{"wrong family member", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(hashIP, []ipsets.Member{ip("10.0.0.1"), ip("fd00::1")})
		}, []error{ipsets.ErrWrongFamily, ipfamily.ErrWrongFamily}, `fd00::1 is IPv6, the set is IPv4 (set "s", member 1)`},
		{"wrong family set", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(ipsets.SetMetadata{Name: "s", Type: ipsets.HashIP, Family: ipsets.IPv6}, nil)
		}, []error{ipsets.ErrWrongFamily, ipfamily.ErrWrongFamily}, "the driver is IPv4"},
		{"unspecified address", func(d *ipsets.IPSets) error {
			return d.AddMembers("s", []ipsets.Member{ip("0.0.0.0")})
		}, []error{ipsets.ErrInvalidMember}, "unspecified address"},
		{"zone", func(d *ipsets.IPSets) error {
			return d.AddMembers("s", []ipsets.Member{ipsets.IPMember(ma("fe80::1%eth0"))})
		}, []error{ipsets.ErrInvalidMember}, "zone"},
		{"zero member", func(d *ipsets.IPSets) error {
			return d.AddMembers("s", []ipsets.Member{{}})
		}, []error{ipsets.ErrInvalidMember}, "zero Member"},
		{"unknown type", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(ipsets.SetMetadata{Name: "s", Type: "hash:mac"}, nil)
		}, []error{ipsets.ErrUnknownType}, `"hash:mac"`},
		{"bad metadata", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(ipsets.SetMetadata{Name: "s", Type: ipsets.BitmapPort, MaxSize: 3}, nil)
		}, []error{ipsets.ErrInvalidMetadata}, "MaxSize must be zero"},
		{"too many", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(ipsets.SetMetadata{Name: "s", Type: ipsets.HashIP, MaxSize: 1}, []ipsets.Member{ip("10.0.0.1"), ip("10.0.0.2")})
		}, []error{ipsets.ErrTooManyMembers}, "MaxSize is 1"},
		{"unknown set", func(d *ipsets.IPSets) error {
			return d.AddMembers("nope", []ipsets.Member{ip("10.0.0.1")})
		}, []error{ipsets.ErrUnknownSet}, `"nope"`},
		{"bad name", func(d *ipsets.IPSets) error {
			return d.RemoveMembers("a b", nil)
		}, []error{ipsets.ErrInvalidName}, `"a b"`},
		{"name too long", func(d *ipsets.IPSets) error {
			return d.RemoveSet(strings.Repeat("x", 28))
		}, []error{ipsets.ErrNameTooLong}, "the kernel allows 31"},
		{"kernel name", func(d *ipsets.IPSets) error {
			_, err := d.KernelName("~0")
			return err
		}, []error{ipsets.ErrInvalidName}, `"~0"`},
		{"parse host bits", func(*ipsets.IPSets) error {
			_, err := ipsets.ParseMember(ipsets.HashNet, "fd00::1/64")
			return err
		}, []error{ipsets.ErrInvalidMember, ipfamily.ErrHostBits}, "fd00::1/64 has host bits"},
		{"parse syntax", func(*ipsets.IPSets) error {
			_, err := ipsets.ParseMember(ipsets.HashIPPort, "10.0.0.1,tcp:")
			return err
		}, []error{ipsets.ErrInvalidMember}, "malformed member"},
		{"parse type", func(*ipsets.IPSets) error {
			_, err := ipsets.ParseMember("list:set", "a")
			return err
		}, []error{ipsets.ErrUnknownType}, `"list:set"`},
		{"options", func(*ipsets.IPSets) error {
			_, err := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4~"})
			return err
		}, []error{ipsets.ErrInvalidOptions}, `"np4~"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, k := newFake(t, ipsets.IPv4)
			require.NoError(t, d.AddOrReplaceSet(hashIP, []ipsets.Member{ip("10.0.0.1")}))
			require.NoError(t, d.AddOrReplaceSet(hashNet, []ipsets.Member{ipsets.NetMember(mp("10.0.0.0/8"))}))
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
	k.SetUnsupported(ipsets.HashNetNet)
	p := mp("10.0.0.0/8")
	require.NoError(t, d.AddOrReplaceSet(ipsets.SetMetadata{Name: "a", Type: ipsets.HashNetNet}, []ipsets.Member{ipsets.NetNetMember(p, p)}))
	require.NoError(t, d.AddOrReplaceSet(ipsets.SetMetadata{Name: "b", Type: ipsets.HashNetNet}, nil))
	require.NoError(t, d.AddOrReplaceSet(ipsets.SetMetadata{Name: "c", Type: ipsets.HashNet}, []ipsets.Member{ipsets.NetMember(p)}))
	_, err := d.Apply(context.Background())
	requirePrefixedOnce(t, err, ipsets.ErrRestore)
	assert.Contains(t, err.Error(), "2 object(s) failed; set np4-a: ipset restore failed: line 1 ")
	assert.Contains(t, err.Error(), "; set np4-b: ipset restore failed: line 1 ")
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
	require.NoError(t, d.AddOrReplaceSet(ipsets.SetMetadata{Name: "s", Type: ipsets.HashIP}, manyIPs(ipsets.IPv6, 2)))
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
	meta := ipsets.SetMetadata{Name: "bad", Type: ipsets.HashIP}
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
		require.NoError(t, d.AddOrReplaceSet(ipsets.SetMetadata{Name: "bad" + strconv.Itoa(i), Type: ipsets.HashIP}, nil))
	}
	require.NoError(t, d.AddOrReplaceSet(ipsets.SetMetadata{Name: "good", Type: ipsets.HashIP}, manyIPs(ipsets.IPv4, 1)))
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

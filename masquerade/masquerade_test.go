package masquerade_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/masquerade"
	"github.com/nodeplane/nodeplane/netfilter"
)

// rig is one family's Manager on real drivers over a fake namespace.
type rig struct {
	t    *testing.T
	ns   *kernelfake.Namespace
	f    ipfamily.Family
	sets *ipsets.IPSets
	nat  *iptables.Table
	m    *masquerade.Manager
}

func newRig(t *testing.T, f ipfamily.Family, mutate func(*masquerade.Options)) *rig {
	t.Helper()
	ns := kernelfake.New(kernelfake.Options{})
	return newRigOn(t, ns, f, mutate)
}

func newRigOn(t *testing.T, ns *kernelfake.Namespace, f ipfamily.Family, mutate func(*masquerade.Options)) *rig {
	t.Helper()
	sets := managertest.FakeSets(t, ns, f, fmt.Sprintf("np%d-", f))
	nat := managertest.FakeTable(t, ns, "nat", f, "npm-")
	m := managertest.NewManager(t, masquerade.New, masquerade.Options{Family: f, Sets: sets, Table: nat, Chain: "npm-masq"}, mutate)
	return &rig{t: t, ns: ns, f: f, sets: sets, nat: nat, m: m}
}

func (r *rig) send(msgs ...any) { managertest.Update(r.m, msgs...) }

func (r *rig) pass() error {
	r.t.Helper()
	_, err := managertest.Pass(context.Background(), []dataplane.Manager{r.m}, r.sets, r.nat)
	return err
}

func (r *rig) members(set string) []string {
	r.t.Helper()
	m, ok := r.ns.IPSets().Members(fmt.Sprintf("np%d-%s", r.f, set))
	require.True(r.t, ok, "set %s exists", set)
	return m
}

func (r *rig) rules(chain string) []string {
	return r.ns.IPTables().Rules(iptablesfake.BackendNFT, r.f, "nat", chain)
}

var (
	pool4  = netip.MustParsePrefix("10.244.0.0/16")
	other4 = netip.MustParsePrefix("10.96.0.0/24")
	pool6  = netip.MustParsePrefix("fd00:10:244::/48")
)

func TestPoolsAndRule(t *testing.T) {
	for _, f := range ipfamily.All {
		t.Run(f.String(), func(t *testing.T) {
			r := newRig(t, f, nil)
			r.send(
				cluster.Pool{ID: "pods4", CIDR: pool4, Masquerade: true},
				cluster.Pool{ID: "svc4", CIDR: other4},
				cluster.Pool{ID: "pods6", CIDR: pool6, Masquerade: true},
			)
			require.NoError(t, r.pass())
			want, wantMasq := []string{"10.244.0.0/16", "10.96.0.0/24"}, []string{"10.244.0.0/16"}
			if f == ipfamily.IPv6 {
				want, wantMasq = []string{"fd00:10:244::/48"}, []string{"fd00:10:244::/48"}
			}
			assert.ElementsMatch(t, want, r.members("all-pools"))
			assert.ElementsMatch(t, wantMasq, r.members("masq-pools"))
			rules := r.rules("npm-masq")
			require.Len(t, rules, 1)
			assert.Contains(t, rules[0], fmt.Sprintf("-m set --match-set np%d-masq-pools src -m set ! --match-set np%d-all-pools dst", f, f))
			assert.Contains(t, rules[0], "-j MASQUERADE --random-fully")
			post := r.rules("POSTROUTING")
			require.Len(t, post, 1)
			assert.True(t, strings.HasSuffix(post[0], "-j npm-masq"), post[0])
			assert.Equal(t, r.m.AllPoolsSet(), fmt.Sprintf("np%d-all-pools", f))
			assert.Equal(t, r.m.MasqPoolsSet(), fmt.Sprintf("np%d-masq-pools", f))

			// Nothing changed: nothing is written, not even a save.
			calls := len(r.ns.IPTables().Calls())
			setCalls := len(r.ns.IPSets().Calls())
			require.NoError(t, r.pass())
			assert.Len(t, r.ns.IPTables().Calls(), calls)
			assert.Len(t, r.ns.IPSets().Calls(), setCalls)
		})
	}
}

// A pool of every address (a /0, which a hash:net set cannot hold) is
// declared as its two halves, in both families, and the other pools'
// changes go on being written.
func TestPoolOfEveryAddress(t *testing.T) {
	for _, tc := range []struct {
		f           ipfamily.Family
		every, more string
		halves      []string
	}{
		{ipfamily.IPv4, "0.0.0.0/0", "10.200.0.0/16", []string{"0.0.0.0/1", "128.0.0.0/1"}},
		{ipfamily.IPv6, "::/0", "fd00:200::/64", []string{"::/1", "8000::/1"}},
	} {
		r := newRig(t, tc.f, nil)
		r.send(cluster.Pool{ID: "every", CIDR: netip.MustParsePrefix(tc.every), Masquerade: true})
		require.NoError(t, r.pass(), tc.every)
		assert.ElementsMatch(t, tc.halves, r.members("all-pools"))
		assert.ElementsMatch(t, tc.halves, r.members("masq-pools"))
		r.send(cluster.Pool{ID: "more", CIDR: netip.MustParsePrefix(tc.more)}, cluster.PoolRemove{ID: "every"})
		require.NoError(t, r.pass(), tc.every)
		assert.Equal(t, []string{tc.more}, r.members("all-pools"))
		assert.Empty(t, r.members("masq-pools"))
	}
}

func TestPoolChangesAndRemoval(t *testing.T) {
	r := newRig(t, ipfamily.IPv4, nil)
	r.send(cluster.Pool{ID: "a", CIDR: pool4, Masquerade: true}, cluster.Pool{ID: "b", CIDR: other4})
	require.NoError(t, r.pass())

	// b starts masquerading; a stops; nothing else moves.
	r.send(cluster.Pool{ID: "b", CIDR: other4, Masquerade: true}, cluster.Pool{ID: "a", CIDR: pool4})
	require.NoError(t, r.pass())
	assert.Equal(t, []string{"10.96.0.0/24"}, r.members("masq-pools"))
	assert.ElementsMatch(t, []string{"10.244.0.0/16", "10.96.0.0/24"}, r.members("all-pools"))

	// a moves to IPv6: the IPv4 manager forgets it.
	r.send(cluster.Pool{ID: "a", CIDR: pool6})
	require.NoError(t, r.pass())
	assert.Equal(t, []string{"10.96.0.0/24"}, r.members("all-pools"))

	// Removing b empties both sets; the rule and sets stay, matching
	// nothing.
	r.send(cluster.PoolRemove{ID: "b"}, cluster.PoolRemove{ID: "never-declared"})
	require.NoError(t, r.pass())
	assert.Empty(t, r.members("all-pools"))
	assert.Empty(t, r.members("masq-pools"))
	assert.Len(t, r.rules("npm-masq"), 1)
	assert.Empty(t, r.m.Pools())
}

func TestInvalidMessagesChangeNothing(t *testing.T) {
	r := newRig(t, ipfamily.IPv4, nil)
	r.send(cluster.Pool{ID: "a", CIDR: pool4, Masquerade: true})
	require.NoError(t, r.pass())
	for _, msg := range []any{
		cluster.Pool{ID: "a", CIDR: netip.MustParsePrefix("10.244.0.1/16"), Masquerade: true},
		cluster.Pool{CIDR: other4},
		cluster.Pool{ID: "z"},
		cluster.PoolRemove{},
	} {
		r.send(msg)
		err := r.m.CompleteDeferredWork(context.Background())
		require.ErrorIs(t, err, masquerade.ErrInvalidPool, "%+v", msg)
		require.ErrorIs(t, err, cluster.ErrInvalid, "%+v", msg)
		onePrefix(t, err)
		assert.Equal(t, []string{"10.244.0.0/16"}, r.members("masq-pools"))
		require.NoError(t, r.pass(), "reported once")
	}
}

func TestOptions(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	sets4 := managertest.FakeSets(t, ns, ipfamily.IPv4, "np4-")
	nat := managertest.FakeTable(t, ns, "nat", ipfamily.IPv4, "npm-")
	good := masquerade.Options{Family: ipfamily.IPv4, Sets: sets4, Table: nat, Chain: "npm-masq"}
	var nilSets *ipsets.IPSets
	for name, mutate := range map[string]func(*masquerade.Options){
		"no family":         func(o *masquerade.Options) { o.Family = 0 },
		"no sets":           func(o *masquerade.Options) { o.Sets = nil },
		"nil sets pointer":  func(o *masquerade.Options) { o.Sets = nilSets },
		"sets of IPv4":      func(o *masquerade.Options) { o.Family = ipfamily.IPv6 },
		"no table":          func(o *masquerade.Options) { o.Table = nil },
		"no chain":          func(o *masquerade.Options) { o.Chain = "" },
		"bad chain":         func(o *masquerade.Options) { o.Chain = "-x" },
		"bad jump":          func(o *masquerade.Options) { o.Jump = 7 },
		"same sets":         func(o *masquerade.Options) { o.AllPoolsSet, o.MasqPoolsSet = "x", "x" },
		"set name too long": func(o *masquerade.Options) { o.AllPoolsSet = strings.Repeat("x", 40) },
		"bad set name":      func(o *masquerade.Options) { o.MasqPoolsSet = "a b" },
		"mark outside mask": func(o *masquerade.Options) { o.Marks = []netfilter.MatchMark{{Mark: 0x3, Mask: 0x1}} },
		"mark without mask": func(o *masquerade.Options) { o.Marks = []netfilter.MatchMark{{Mark: 0, Mask: 0}} },
	} {
		o := good
		mutate(&o)
		_, err := masquerade.New(o)
		require.ErrorIs(t, err, masquerade.ErrInvalidOptions, name)
		onePrefix(t, err)
	}
	// A placement past netfilter.JumpNone is refused with the rule model's
	// sentinel.
	bad := good
	bad.Jump = netfilter.JumpNone + 1
	_, err := masquerade.New(bad)
	require.ErrorIs(t, err, netfilter.ErrUnknownJumpPlacement)
	require.EqualError(t, err, "masquerade: invalid options: Jump: unknown jump placement 3")
	m, err := masquerade.New(good)
	require.NoError(t, err)
	assert.Equal(t, "masquerade-v4", m.Name())
}

func TestJumpPlacementAndNoRandomFully(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	ipt := ns.IPTables()
	require.NoError(t, ipt.Exec(iptablesfake.BackendNFT, ipfamily.IPv4, "-t", "nat", "-A", "POSTROUTING", "-o", "eth9", "-j", "ACCEPT"))

	r := newRigOn(t, ns, ipfamily.IPv4, func(o *masquerade.Options) { o.Jump = netfilter.JumpAppend; o.NoRandomFully = true })
	r.send(cluster.Pool{ID: "a", CIDR: pool4, Masquerade: true})
	require.NoError(t, r.pass())
	post := r.rules("POSTROUTING")
	require.Len(t, post, 2)
	assert.Equal(t, "-o eth9 -j ACCEPT", post[0], "the foreign rule stays first")
	assert.True(t, strings.HasSuffix(post[1], "-j npm-masq"))
	rule := r.rules("npm-masq")
	require.Len(t, rule, 1)
	assert.NotContains(t, rule[0], "random-fully")
	assert.True(t, strings.HasSuffix(rule[0], "-j MASQUERADE"), rule[0])

	// JumpNone: the chain is the caller's to jump to; until something does,
	// the Table leaves it out of the kernel.
	ns2 := kernelfake.New(kernelfake.Options{})
	r2 := newRigOn(t, ns2, ipfamily.IPv4, func(o *masquerade.Options) { o.Jump = netfilter.JumpNone })
	r2.send(cluster.Pool{ID: "a", CIDR: pool4, Masquerade: true})
	require.NoError(t, r2.pass())
	assert.Empty(t, r2.rules("POSTROUTING"))
	assert.Nil(t, r2.rules("npm-masq"))
	require.NoError(t, r2.nat.SetChains(netfilter.Chain{Name: "npm-post", Rules: []netfilter.Rule{{Action: netfilter.Jump("npm-masq")}}}))
	require.NoError(t, r2.nat.InsertRules("test", netfilter.HookPostrouting, []netfilter.Rule{{Action: netfilter.Jump("npm-post")}}))
	require.NoError(t, r2.pass())
	assert.Len(t, r2.rules("npm-masq"), 1)
	assert.Equal(t, r2.m.Rule().Action, netfilter.ActionMasquerade{RandomFully: true})
}

// Options.Marks: what carries a mark is masqueraded too, after the pool
// rule.
func TestMarks(t *testing.T) {
	r := newRig(t, ipfamily.IPv4, func(o *masquerade.Options) {
		o.Marks = []netfilter.MatchMark{{Mark: 0x40000, Mask: 0x40000}}
	})
	r.send(cluster.Pool{ID: "a", CIDR: pool4, Masquerade: true})
	require.NoError(t, r.pass())
	rules := r.rules("npm-masq")
	require.Len(t, rules, 2)
	assert.Contains(t, rules[0], "--match-set np4-masq-pools src")
	assert.Contains(t, rules[1], "-m mark --mark 0x40000/0x40000")
	assert.Contains(t, rules[1], "-j MASQUERADE --random-fully")
	assert.Len(t, r.m.Rules(), 2)
}

// A restore failure is the Table's; the loop retries it and it converges.
func TestFailedWriteConverges(t *testing.T) {
	r := newRig(t, ipfamily.IPv4, nil)
	r.ns.IPTables().FailNext(iptablesfake.OpRestore, 1)
	r.send(cluster.Pool{ID: "a", CIDR: pool4, Masquerade: true})
	require.Error(t, r.pass())
	r.nat.QueueResync()
	require.NoError(t, r.pass())
	assert.Len(t, r.rules("npm-masq"), 1)
	assert.Len(t, r.rules("POSTROUTING"), 1)
}

// onePrefix checks that err names this package, once, and no other.
func onePrefix(t *testing.T, err error) {
	t.Helper()
	assert.True(t, strings.HasPrefix(err.Error(), "masquerade: "), err.Error())
	for _, p := range []string{"masquerade: ", "cluster: ", "netfilter: ", "ipsets: ", "ipfamily: ", "iptables: "} {
		want := 0
		if p == "masquerade: " {
			want = 1
		}
		assert.Equal(t, want, strings.Count(err.Error(), p), err.Error())
	}
}

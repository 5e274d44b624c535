package serviceloop_test

import (
	"context"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/serviceloop"
)

type rig struct {
	t      *testing.T
	ns     *kernelfake.Namespace
	f      ipfamily.Family
	filter *iptables.Table
	m      *serviceloop.Manager
}

func newRig(t *testing.T, ns *kernelfake.Namespace, f ipfamily.Family, mutate func(*serviceloop.Options)) *rig {
	t.Helper()
	filter := managertest.FakeTable(t, ns, "filter", f, "nps-")
	m := managertest.NewManager(t, serviceloop.New, serviceloop.Options{Family: f, Table: filter, Chain: "nps-loop"}, mutate)
	return &rig{t: t, ns: ns, f: f, filter: filter, m: m}
}

func (r *rig) pass(msgs ...any) error { return managertest.UpdatePass(r.m, msgs, r.filter) }

func (r *rig) rules(chain string) []string {
	return r.ns.IPTables().Rules(iptablesfake.BackendNFT, r.f, "filter", chain)
}

var svc = serviceloop.ServiceCIDRs{CIDRs: []netip.Prefix{
	netip.MustParsePrefix("10.96.0.0/12"),
	netip.MustParsePrefix("fd00:96::/112"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("10.96.0.0/12"), // twice
}}

func TestRulesPerFamily(t *testing.T) {
	for _, f := range ipfamily.All {
		t.Run(f.String(), func(t *testing.T) {
			r := newRig(t, kernelfake.New(kernelfake.Options{}), f, nil)
			require.NoError(t, r.pass(svc))
			want := []string{
				`-d 10.96.0.0/12 -m comment --comment "service range reached the forward path unhandled" -j DROP`,
				`-d 192.0.2.0/24 -m comment --comment "service range reached the forward path unhandled" -j DROP`,
			}
			if f == ipfamily.IPv6 {
				want = []string{`-d fd00:96::/112 -m comment --comment "service range reached the forward path unhandled" -j DROP`}
			}
			got := r.rules("nps-loop")
			require.Len(t, got, len(want))
			for i := range want {
				assert.Equal(t, want[i], unhashed(got[i]))
			}
			fwd := r.rules("FORWARD")
			require.Len(t, fwd, 1)
			assert.True(t, strings.HasSuffix(fwd[0], "-j nps-loop"))

			// The same ranges again, in another order: nothing is written.
			calls := len(r.ns.IPTables().Calls())
			require.NoError(t, r.pass(serviceloop.ServiceCIDRs{CIDRs: []netip.Prefix{svc.CIDRs[2], svc.CIDRs[1], svc.CIDRs[0]}}))
			assert.Len(t, r.ns.IPTables().Calls(), calls)
		})
	}
}

func TestChangesRejectAndEmpty(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	r := newRig(t, ns, ipfamily.IPv4, func(o *serviceloop.Options) { o.Verdict = serviceloop.Reject; o.Jump = netfilter.JumpAppend })
	require.NoError(t, ns.IPTables().Exec(iptablesfake.BackendNFT, ipfamily.IPv4, "-A", "FORWARD", "-i", "eth9", "-j", "ACCEPT"))
	require.NoError(t, r.pass(svc))
	got := r.rules("nps-loop")
	require.Len(t, got, 2)
	assert.True(t, strings.HasSuffix(got[0], "-j REJECT --reject-with icmp-admin-prohibited"), got[0])
	fwd := r.rules("FORWARD")
	require.Len(t, fwd, 2)
	assert.Equal(t, "-i eth9 -j ACCEPT", fwd[0], "appended after the foreign rule")

	require.NoError(t, r.pass(serviceloop.ServiceCIDRs{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.100.0.0/16")}}))
	got = r.rules("nps-loop")
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "-d 10.100.0.0/16")
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.100.0.0/16")}, r.m.CIDRs())

	require.NoError(t, r.pass(serviceloop.ServiceCIDRs{}))
	assert.Empty(t, r.rules("nps-loop"), "no range: an empty chain, still jumped to")
	assert.Len(t, r.rules("FORWARD"), 2)
}

func TestInvalidMessageChangesNothing(t *testing.T) {
	r := newRig(t, kernelfake.New(kernelfake.Options{}), ipfamily.IPv4, nil)
	require.NoError(t, r.pass(svc))
	r.m.OnUpdate(serviceloop.ServiceCIDRs{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("10.96.0.1/12")}})
	err := r.m.CompleteDeferredWork(context.Background())
	require.ErrorIs(t, err, serviceloop.ErrInvalidCIDR)
	require.ErrorIs(t, err, ipfamily.ErrHostBits)
	assert.Equal(t, "serviceloop: invalid service CIDR: 10.96.0.1/12 has host bits set (the network is 10.96.0.0/12)", err.Error())
	require.NoError(t, r.m.CompleteDeferredWork(context.Background()), "reported once")
	require.NoError(t, r.pass())
	assert.Len(t, r.rules("nps-loop"), 2)
	require.ErrorIs(t, serviceloop.ServiceCIDRs{CIDRs: []netip.Prefix{{}}}.Validate(), serviceloop.ErrInvalidCIDR)
	// Every address (its drop would take every forwarded packet), or IPv4
	// written as IPv6: refused, and nothing changes.
	for _, bad := range []string{"0.0.0.0/0", "::/0", "::ffff:10.96.0.0/108"} {
		r.m.OnUpdate(serviceloop.ServiceCIDRs{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix(bad)}})
		require.ErrorIs(t, r.m.CompleteDeferredWork(context.Background()), serviceloop.ErrInvalidCIDR, bad)
		require.NoError(t, r.pass())
		assert.Len(t, r.rules("nps-loop"), 2, bad)
	}
}

func TestOptions(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	filter := managertest.FakeTable(t, ns, "filter", ipfamily.IPv4, "nps-")
	good := serviceloop.Options{Family: ipfamily.IPv4, Table: filter, Chain: "nps-loop"}
	var nilTable *iptables.Table
	for name, mutate := range map[string]func(*serviceloop.Options){
		"no family": func(o *serviceloop.Options) { o.Family = 9 },
		"no table":  func(o *serviceloop.Options) { o.Table = nil },
		"nil table": func(o *serviceloop.Options) { o.Table = nilTable },
		"no chain":  func(o *serviceloop.Options) { o.Chain = "" },
		// What the Table says of itself (netfilter.TableInfo): refused
		// here, not at every pass.
		"chain not the table's":   func(o *serviceloop.Options) { o.Chain = "other-loop" },
		"table of another family": func(o *serviceloop.Options) { o.Family = ipfamily.IPv6 },
		"bad jump":                func(o *serviceloop.Options) { o.Jump = 3 },
		"bad verdict":             func(o *serviceloop.Options) { o.Verdict = 2 },
		"zero mark":               func(o *serviceloop.Options) { o.RejectMarks = []netfilter.MatchMark{{Mask: 0x100}} },
		"mark outside its mask": func(o *serviceloop.Options) {
			o.RejectMarks = []netfilter.MatchMark{{Mark: 0x300, Mask: 0x100}}
		},
	} {
		o := good
		mutate(&o)
		_, err := serviceloop.New(o)
		require.ErrorIs(t, err, serviceloop.ErrInvalidOptions, name)
		assert.Equal(t, 1, strings.Count(err.Error(), "serviceloop: "), err.Error())
		assert.NotContains(t, err.Error(), "netfilter: ")
	}
	// A placement past netfilter.JumpNone is refused with the rule model's
	// sentinel.
	bad := good
	bad.Jump = netfilter.JumpNone + 1
	_, err := serviceloop.New(bad)
	require.ErrorIs(t, err, netfilter.ErrUnknownJumpPlacement)
	require.EqualError(t, err, "serviceloop: invalid options: Jump: unknown jump placement 3")
	m, err := serviceloop.New(good)
	require.NoError(t, err)
	assert.Equal(t, "serviceloop-v4", m.Name())
}

// netfilter.JumpNone leaves the jump to the caller; the chain is programmed once
// something jumps to it.
func TestJumpNone(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	r := newRig(t, ns, ipfamily.IPv6, func(o *serviceloop.Options) { o.Jump = netfilter.JumpNone })
	require.NoError(t, r.pass(svc))
	assert.Empty(t, r.rules("FORWARD"))
	assert.Nil(t, r.rules("nps-loop"), "not programmed until something jumps to it")
	require.NoError(t, r.filter.InsertRules("test", netfilter.HookForward, []netfilter.Rule{{Action: netfilter.Jump("nps-loop")}}))
	require.NoError(t, r.pass())
	assert.Len(t, r.rules("nps-loop"), 1)
}

// unhashed drops the Table's hash comment from a rule as iptables-save
// prints it.
func unhashed(rule string) string {
	return hashComment.ReplaceAllString(rule, "")
}

var hashComment = regexp.MustCompile(`-m comment --comment "nps:[A-Za-z0-9_-]{16}" `)

// A proxy's reject mark is answered first, whatever the destination, as
// kube-proxy answers a service without endpoints: TCP with a reset, the
// rest with port unreachable; in both families; even with no range known.
func TestRejectMarks(t *testing.T) {
	for _, f := range ipfamily.All {
		ns := kernelfake.New(kernelfake.Options{})
		r := newRig(t, ns, f, func(o *serviceloop.Options) {
			o.RejectMarks = []netfilter.MatchMark{{Mark: 0x80000, Mask: 0x80000}}
		})
		require.NoError(t, r.pass())
		got := r.rules("nps-loop")
		require.Len(t, got, 2, "%v", f)
		unreachable := "icmp-port-unreachable"
		if f == ipfamily.IPv6 {
			unreachable = "icmp6-port-unreachable"
		}
		assert.Regexp(t, `^-p tcp .*-m mark --mark 0x80000/0x80000 .*-j REJECT --reject-with tcp-reset$`, got[0])
		assert.Regexp(t, `^(-m comment --comment "[^"]*" )?-m mark --mark 0x80000/0x80000 .*-j REJECT --reject-with `+unreachable+`$`, got[1])
		require.NoError(t, r.pass(svc))
		assert.Len(t, r.rules("nps-loop"), 2+map[ipfamily.Family]int{ipfamily.IPv4: 2, ipfamily.IPv6: 1}[f], "the ranges after")
	}
}

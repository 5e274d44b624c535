//go:build linux

package netfiltertest_test

import (
	"bufio"
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/floatingips"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/masquerade"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
	"github.com/nodeplane/nodeplane/serviceloop"
)

// sharedBackend builds, for the shared-hook scenario, the nat and filter
// Tables of one backend and family (new ones at each call, as a restarted
// agent does) and reads the jumps at a hook.
type sharedBackend struct {
	name string
	// tables returns the nat and filter Tables and, for masquerade, the
	// ip sets beside them (a driver to apply, and the sets).
	tables func(t *testing.T, f ipfamily.Family) (nat, filter netfilter.Table, sets netfilter.Sets, setsDriver dataplane.Driver)
	// jumps returns the targets of the jumps at hook of the table of
	// role ("nat" or "filter"), in their order.
	jumps func(t *testing.T, f ipfamily.Family, role string, hook netfilter.Hook) []string
	// foreign adds a foreign rule at POSTROUTING (add), or reports
	// whether it is still there: in the nat table on iptables, in a
	// foreign table's base chain on nftables (a Table owns its whole
	// table there).
	foreign func(t *testing.T, f ipfamily.Family, add bool) bool
}

// The managers of the scenario, by name, and the hooks their jumps stand
// at. Their chains carry the Tables' prefix "np-".
var sharedJumps = map[string][]struct {
	role  string
	hook  netfilter.Hook
	chain string
}{
	"masquerade":  {{"nat", netfilter.HookPostrouting, "np-masq"}},
	"floatingips": {{"nat", netfilter.HookPrerouting, "np-fip-dnat"}, {"nat", netfilter.HookOutput, "np-fip-dnat"}, {"nat", netfilter.HookPostrouting, "np-fip-snat"}},
	"serviceloop": {{"filter", netfilter.HookForward, "np-loop"}},
	"policy":      {{"filter", netfilter.HookForward, "np-policy"}},
}

// nfHookPostrouting is the kernel's number of the postrouting hook.
const nfHookPostrouting = 4

var sharedOrder = []string{"masquerade", "floatingips", "serviceloop", "policy"}

// sharedRig is one agent: its Tables and the managers added to them.
type sharedRig struct {
	f           ipfamily.Family
	nat, filter netfilter.Table
	sets        netfilter.Sets
	setsDriver  dataplane.Driver
	managers    []dataplane.Manager
}

// newSharedRig returns an agent of new Tables with the managers names.
func newSharedRig(t *testing.T, b sharedBackend, f ipfamily.Family, names ...string) *sharedRig {
	t.Helper()
	r := &sharedRig{f: f}
	r.nat, r.filter, r.sets, r.setsDriver = b.tables(t, f)
	for _, n := range names {
		r.add(t, n)
	}
	return r
}

// add builds manager n on the rig's Tables.
func (r *sharedRig) add(t *testing.T, n string) {
	t.Helper()
	var m dataplane.Manager
	var err error
	switch n {
	case "masquerade":
		m, err = masquerade.New(masquerade.Options{Family: r.f, Sets: r.sets, Table: r.nat, Chain: "np-masq"})
	case "floatingips":
		m, err = floatingips.New(floatingips.Options{Family: r.f, Table: r.nat, DNATChain: "np-fip-dnat", SNATChain: "np-fip-snat"})
	case "serviceloop":
		m, err = serviceloop.New(serviceloop.Options{Family: r.f, Table: r.filter, Chain: "np-loop"})
	case "policy":
		// An owner that is not a manager: a caller of the Table itself.
		require.NoError(t, r.filter.SetChains(netfilter.Chain{Name: "np-policy", Rules: []netfilter.Rule{{Action: netfilter.Accept()}}}))
		require.NoError(t, r.filter.InsertRules("np-policy", netfilter.HookForward, []netfilter.Rule{{Action: netfilter.Jump("np-policy")}}))
		return
	}
	require.NoError(t, err)
	r.managers = append(r.managers, m)
}

// pass runs the managers and applies the drivers once.
func (r *sharedRig) pass(t *testing.T) {
	t.Helper()
	drivers := []dataplane.Driver{r.nat, r.filter}
	if r.setsDriver != nil {
		drivers = append(drivers, r.setsDriver)
	}
	_, err := managertest.Pass(context.Background(), r.managers, drivers...)
	require.NoError(t, err)
}

// checkJumps checks that the jumps of exactly the managers in names stand
// at their hooks, in the order of their owners' names (a manager's owner
// is its chain; floatingips' is its DNAT chain).
func checkJumps(t *testing.T, b sharedBackend, f ipfamily.Family, names ...string) {
	t.Helper()
	type at struct {
		role string
		hook netfilter.Hook
	}
	owner := map[string]string{"np-masq": "np-masq", "np-fip-dnat": "np-fip-dnat", "np-fip-snat": "np-fip-dnat", "np-loop": "np-loop", "np-policy": "np-policy"}
	want := map[at][]string{}
	for _, n := range names {
		for _, j := range sharedJumps[n] {
			want[at{j.role, j.hook}] = append(want[at{j.role, j.hook}], j.chain)
		}
	}
	for _, h := range []at{{"nat", netfilter.HookPrerouting}, {"nat", netfilter.HookOutput}, {"nat", netfilter.HookPostrouting}, {"filter", netfilter.HookForward}} {
		w := want[h]
		slices.SortStableFunc(w, func(a, b string) int { return strings.Compare(owner[a], owner[b]) })
		require.Equal(t, w, b.jumps(t, f, h.role, h.hook), "%s %v: jumps at %s %s with %v", b.name, f, h.role, h.hook, names)
	}
}

// runSharedHooks is the scenario: masquerade and floatingips share one nat
// Table (both jump from POSTROUTING), serviceloop and a plain owner share
// one filter Table (both jump from FORWARD; serviceloop's hook and
// verdicts exist only in filter). Each manager joins the agent's Tables
// in turn, and each Apply leaves the others' jumps in place; then each is
// removed in turn (the agent restarted without it), which deletes its
// jumps and nothing else. A foreign rule at POSTROUTING survives it all.
func runSharedHooks(t *testing.T, b sharedBackend) {
	for _, f := range ipfamily.All {
		r := newSharedRig(t, b, f)
		for i, n := range sharedOrder {
			r.add(t, n)
			r.pass(t)
			if i == 0 {
				b.foreign(t, f, true)
			}
			checkJumps(t, b, f, sharedOrder[:i+1]...)
		}
		for _, gone := range sharedOrder {
			rest := slices.DeleteFunc(slices.Clone(sharedOrder), func(n string) bool { return n == gone })
			newSharedRig(t, b, f, rest...).pass(t)
			checkJumps(t, b, f, rest...)
			newSharedRig(t, b, f, sharedOrder...).pass(t)
			checkJumps(t, b, f, sharedOrder...)
		}
		require.True(t, b.foreign(t, f, false), "%s %v: the foreign rule at POSTROUTING survives", b.name, f)
	}
}

// saveJumps returns the targets of the rules at chain in an iptables-save
// output, in order, that jump to a chain of prefix "np-".
func saveJumps(save []byte, chain string) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(save))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "-A" || fields[1] != chain {
			continue
		}
		for i := 2; i+1 < len(fields); i++ {
			if fields[i] == "-j" && strings.HasPrefix(fields[i+1], "np-") {
				out = append(out, fields[i+1])
			}
		}
	}
	return out
}

// nftJumps returns the targets of the "jump np-…" verdicts in an
// "nft list chain" output, in order.
func nftJumps(list []byte) []string {
	var out []string
	fields := strings.Fields(string(list))
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == "jump" && strings.HasPrefix(fields[i+1], "np-") {
			out = append(out, fields[i+1])
		}
	}
	return out
}

// iptSharedBackend is package iptables' backend b on k: kernelfake's or a
// real namespace's binaries.
func iptSharedBackend(b iptables.Backend, k kernel.Commands) sharedBackend {
	run := func(t *testing.T, name string, args ...string) []byte {
		t.Helper()
		out, err := k.Runner().Run(context.Background(), nil, name, args...)
		require.NoError(t, err, "%s %v", name, args)
		return out
	}
	ipt := func(f ipfamily.Family) string {
		if f == ipfamily.IPv6 {
			return "ip6tables-" + b.String()
		}
		return "iptables-" + b.String()
	}
	return sharedBackend{
		name: "iptables-" + b.String(),
		tables: func(t *testing.T, f ipfamily.Family) (netfilter.Table, netfilter.Table, netfilter.Sets, dataplane.Driver) {
			tbl := func(table string) *iptables.Table {
				x, err := iptables.New(iptables.Options{Table: table, Family: f, Backend: b, ChainPrefix: "np-", Kernel: k, PostWriteRecheck: []time.Duration{}})
				require.NoError(t, err)
				return x
			}
			sets, err := ipsets.New(ipsets.Options{Family: f, Prefix: "np" + f.String()[3:] + "-", Kernel: k})
			require.NoError(t, err)
			return tbl("nat"), tbl("filter"), sets, sets
		},
		jumps: func(t *testing.T, f ipfamily.Family, role string, hook netfilter.Hook) []string {
			return saveJumps(run(t, ipt(f)+"-save", "-t", role), string(hook))
		},
		foreign: func(t *testing.T, f ipfamily.Family, add bool) bool {
			if add {
				run(t, ipt(f), "-t", "nat", "-A", "POSTROUTING", "-o", "foreign0", "-j", "RETURN")
				return true
			}
			return strings.Contains(string(run(t, ipt(f)+"-save", "-t", "nat")), "-A POSTROUTING -o foreign0 -j RETURN")
		},
	}
}

// nftSharedBackend is package nftables on k, with list reading the jumps
// of a chain ("nft list chain" on the kernel, the fake's Chains on
// nftablesfake) and foreign as sharedBackend.foreign.
func nftSharedBackend(k kernel.NFTables, list func(t *testing.T, f ipfamily.Family, table, chain string) []string, foreign func(t *testing.T, f ipfamily.Family, add bool) bool) sharedBackend {
	return sharedBackend{
		name: "nftables",
		tables: func(t *testing.T, f ipfamily.Family) (netfilter.Table, netfilter.Table, netfilter.Sets, dataplane.Driver) {
			tbl := func(name string, role nftables.Role) *nftables.Table {
				x, err := nftables.New(nftables.Options{Name: name, Family: f, Role: role, ChainPrefix: "np-", Kernel: k, PostWriteRecheck: []time.Duration{}})
				require.NoError(t, err)
				t.Cleanup(func() { _ = x.Close() })
				return x
			}
			nat := tbl("np-nat", nftables.NAT)
			sets, err := nftables.NewIPSets(nat, nftables.IPSetsOptions{})
			require.NoError(t, err)
			return nat, tbl("np-filter", nftables.Filter), sets, sets
		},
		jumps: func(t *testing.T, f ipfamily.Family, role string, hook netfilter.Hook) []string {
			return list(t, f, "np-"+role, nftables.BaseChain(hook))
		},
		foreign: foreign,
	}
}

// TestSharedHooks runs the shared-hook scenario on the fakes: package
// iptables (both backends) on kernelfake, package nftables on
// nftablesfake.
func TestSharedHooks(t *testing.T) {
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		t.Run("iptables-"+b.String(), func(t *testing.T) {
			ns := kernelfake.New(kernelfake.Options{})
			runSharedHooks(t, iptSharedBackend(b, ns))
		})
	}
	t.Run("nftables", func(t *testing.T) {
		ns := nftablesfake.New()
		fam := func(f ipfamily.Family) uint8 {
			if f == ipfamily.IPv6 {
				return nftablesfake.IPv6
			}
			return nftablesfake.IPv4
		}
		list := func(t *testing.T, f ipfamily.Family, table, chain string) []string {
			var out []string
			for _, c := range ns.Chains(fam(f), table) {
				if c.Name == chain {
					for _, r := range c.Rules {
						out = append(out, r.Jumps...)
					}
				}
			}
			return out
		}
		foreign := func(t *testing.T, f ipfamily.Family, add bool) bool {
			if add {
				require.NoError(t, ns.Admin().AddTable(fam(f), "foreign"))
				require.NoError(t, ns.Admin().AddBaseChain(fam(f), "foreign", "POSTROUTING", "nat", nfHookPostrouting, 100))
				require.NoError(t, ns.Admin().AddRule(fam(f), "foreign", "POSTROUTING", "foreign"))
				return true
			}
			for _, c := range ns.Chains(fam(f), "foreign") {
				if c.Name == "POSTROUTING" && slices.ContainsFunc(c.Rules, func(r nftablesfake.Rule) bool { return r.Comment == "foreign" }) {
					return true
				}
			}
			return false
		}
		runSharedHooks(t, nftSharedBackend(ns, list, foreign))
	})
}

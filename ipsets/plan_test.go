package ipsets_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/ipsetsfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// kernelSets is the fake's sets: each set's create line and members.
type kernelSets struct {
	header  map[string]string
	members map[string]map[string]bool
}

func snapshotSets(k *ipsetsfake.Kernel) kernelSets {
	ks := kernelSets{header: map[string]string{}, members: map[string]map[string]bool{}}
	for _, name := range k.Names() {
		ks.header[name], _ = k.Header(name)
		ms, _ := k.Members(name)
		ks.members[name] = map[string]bool{}
		for _, m := range ms {
			ks.members[name][goForm(m)] = true
		}
	}
	return ks
}

// goForm returns an ipset member with its addresses in Go's form, which
// Member's text uses: ipset prints an IPv4-compatible IPv6 address as
// glibc does ("::1.2.3.4").
func goForm(m string) string {
	parts := strings.Split(m, ",")
	for i, p := range parts {
		a, bits, masked := strings.Cut(p, "/")
		if addr, err := netip.ParseAddr(a); err == nil {
			parts[i] = addr.String()
			if masked {
				parts[i] += "/" + bits
			}
		}
	}
	return strings.Join(parts, ",")
}

// minus returns the keys of a that b lacks, sorted.
func minus(a, b map[string]bool) []string {
	var out []string
	for k := range a {
		if !b[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// splitPlan sorts the writes of p by op and kind: the set names of set
// writes, and per set the members of its element writes.
type planned struct {
	sets    map[dataplane.WriteOp][]string
	members map[dataplane.WriteOp]map[string][]string
}

func splitPlan(p dataplane.Plan) planned {
	pl := planned{sets: map[dataplane.WriteOp][]string{}, members: map[dataplane.WriteOp]map[string][]string{
		dataplane.WriteAdd: {}, dataplane.WriteDelete: {}}}
	for _, w := range p.Writes {
		name, rest, _ := strings.Cut(w.Object, " ")
		switch w.Kind {
		case "set":
			pl.sets[w.Op] = append(pl.sets[w.Op], name)
		case "element":
			pl.members[w.Op][name] = append(pl.members[w.Op][name], rest)
		}
	}
	for _, m := range pl.members {
		for _, ms := range m {
			slices.Sort(ms)
		}
	}
	return pl
}

// checkPlanned checks that the kernel changed from before to after by the
// writes of p: the sets it adds are the new ones, those it deletes are
// gone, every set whose header changed is replaced, and each set's
// members changed by the planned element writes (a created or recreated
// set: its members are the planned adds).
func checkPlanned(t *testing.T, p dataplane.Plan, before, after kernelSets) {
	t.Helper()
	pl := splitPlan(p)
	var added, gone, changed []string
	for name := range after.header {
		if _, ok := before.header[name]; !ok {
			added = append(added, name)
		} else if before.header[name] != after.header[name] {
			changed = append(changed, name)
		}
	}
	for name := range before.header {
		if _, ok := after.header[name]; !ok {
			gone = append(gone, name)
		}
	}
	slices.Sort(added)
	slices.Sort(gone)
	assert.Equal(t, added, slices.Sorted(slices.Values(pl.sets[dataplane.WriteAdd])), "sets created")
	assert.Equal(t, gone, slices.Sorted(slices.Values(pl.sets[dataplane.WriteDelete])), "sets destroyed")
	replaced := pl.sets[dataplane.WriteReplace]
	for _, name := range changed {
		assert.Contains(t, replaced, name, "a set whose header changed is replaced")
	}
	for name, ms := range after.members {
		adds, dels := pl.members[dataplane.WriteAdd][name], pl.members[dataplane.WriteDelete][name]
		if _, ok := before.header[name]; !ok || strings.Contains(planDetail(p, name), "destroyed and created") {
			assert.Equal(t, slices.Sorted(maps.Keys(ms)), adds, "the members of the new set %s", name)
			assert.Empty(t, dels)
			continue
		}
		assert.Equal(t, minus(ms, before.members[name]), adds, "members added to %s", name)
		assert.Equal(t, minus(before.members[name], ms), dels, "members deleted from %s", name)
	}
}

// planDetail returns the Detail of p's replace of set name.
func planDetail(p dataplane.Plan, name string) string {
	for _, w := range p.Writes {
		if w.Kind == "set" && w.Op == dataplane.WriteReplace && strings.HasPrefix(w.Object, name+" ") {
			return w.Detail
		}
	}
	return ""
}

// For random declarations and changes (members added and removed, sets
// swapped, resized, removed), and writes behind the driver's back found by
// a resync: Plan writes nothing, the next Apply and ApplyDeletions change
// the kernel by exactly the planned writes (and count as many in Stats),
// and then Plan is empty and State in sync.
func TestPlanProperties(t *testing.T) {
	planned := 0
	for _, fam := range []ipsets.Family{ipsets.IPv4, ipsets.IPv6} {
		for seed := range uint64(15) {
			t.Run(fmt.Sprintf("%v/%d", fam, seed), func(t *testing.T) {
				ns := kernelfake.New(kernelfake.Options{})
				k := ns.IPSets()
				rec := drivertest.Record(ns)
				d, err := ipsets.New(ipsets.Options{Family: fam, Prefix: prefixOf(fam), Kernel: rec})
				require.NoError(t, err)
				planned += planRounds(t, rand.New(rand.NewPCG(seed, 21)), d, rec, true, 6, func() kernelSets { return snapshotSets(k) },
					func(args ...string) {
						_, err := k.Run(context.Background(), nil, "ipset", args...)
						require.NoError(t, err)
					})
			})
		}
	}
	assert.Greater(t, planned, 1000, "the draw makes writes to plan")
}

// planRounds declares random sets on d (whose kernel goes through rec;
// hash:net,net ones with netnet),
// then for rounds rounds changes them (or the kernel, through run, an
// ipset command line, behind d's back; or removes a set) and checks Plan,
// State, Apply and ApplyDeletions against each other and against the
// kernel (snap reads it). It returns the writes planned.
func planRounds(t *testing.T, r *rand.Rand, d *ipsets.IPSets, rec *drivertest.Recorder, netnet bool, rounds int, snap func() kernelSets, run func(args ...string)) int {
	t.Helper()
	ctx := context.Background()
	planned := 0
	names := genDeclare(t, r, d, netnet)
	for round := range rounds {
		switch {
		case round == 0:
		case round%3 == 2 && len(names) > 1:
			i := r.IntN(len(names))
			require.NoError(t, d.RemoveSet(names[i]))
			names = slices.Delete(names, i, i+1)
		case round%2 == 1:
			// Behind the driver's back: members deleted, a leftover set
			// of ours created.
			ks := snap()
			for _, name := range slices.Sorted(maps.Keys(ks.members)) {
				for _, m := range slices.Sorted(maps.Keys(ks.members[name])) {
					if r.IntN(4) == 0 {
						run("del", name, m)
					}
				}
			}
			run("create", d.Prefix()+fmt.Sprint("old", round), "hash:ip", "family", ipsets.FamilyName(d.Family()))
			d.QueueResync()
		default:
			genChange(t, r, d, names)
		}
		before := snap()
		rec.ResetCounts()
		p, err := d.Plan(ctx)
		require.NoError(t, err)
		assert.Equal(t, before, snap(), "Plan writes nothing")
		assert.Zero(t, rec.Writes(), "Plan writes nothing")
		assert.Equal(t, d.Name(), p.Driver)
		planned += len(p.Writes)
		st, err := d.State(ctx)
		require.NoError(t, err)
		assert.Equal(t, p.Empty(), st.InSync(), "State drifts where Plan writes: %v\n%v", st, p)
		owned := len(before.header)
		for _, ms := range before.members {
			owned += len(ms)
		}
		assert.Len(t, st.Owned, owned, "every set and member of ours")
		assert.Equal(t, before, snap(), "State writes nothing")
		assert.Zero(t, rec.Writes(), "State writes nothing")

		stats := d.Stats()
		_, err = d.Apply(ctx)
		require.NoError(t, err)
		_, err = d.ApplyDeletions(ctx)
		require.NoError(t, err)
		checkPlanned(t, p, before, snap())
		after := d.Stats()
		assert.Equal(t, uint64(len(p.Writes)), after.Writes-stats.Writes, "Stats count the planned writes")
		assert.Equal(t, p.Empty(), rec.Writes() == 0, "an empty Plan, no write: %v", p)
		assert.Equal(t, dataplane.DriverStats{Desired: after.Desired, InKernel: after.Desired, Writes: after.Writes}, after, "settled")

		p, err = d.Plan(ctx)
		require.NoError(t, err)
		assert.True(t, p.Empty(), "%v", p)
		st, err = d.State(ctx)
		require.NoError(t, err)
		assert.True(t, st.InSync(), "%v", st)
	}
	return planned
}

// Plan's text for each kind of write, and what Plan and State say of sets
// the driver cannot write: a type change that a kernel reference blocks
// (not planned, failing after Apply) and an unwanted set still referenced
// (planned for destruction, failing after ApplyDeletions, planned again
// once due).
func TestPlanAndStateOfBlockedSets(t *testing.T) {
	ctx := context.Background()
	d, k := newFake(t, ipsets.IPv4)
	ip := func(s string) netfilter.Member { return netfilter.IPMember(netip.MustParseAddr(s)) }
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "a", Type: netfilter.HashIP, MaxSize: 16}, []netfilter.Member{ip("10.0.0.1")}))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "b", Type: netfilter.HashIP, MaxSize: 16}, nil))
	p, err := d.Plan(ctx)
	require.NoError(t, err)
	assert.Equal(t, "ipsets-np4-: 3 writes\n"+
		"+ set np4-a hash:ip family inet maxelem 16\n"+
		"+ element np4-a 10.0.0.1\n"+
		"+ set np4-b hash:ip family inet maxelem 16", p.String())
	_, err = d.Apply(ctx)
	require.NoError(t, err)

	require.NoError(t, k.SetReferences("np4-a", 1))
	require.NoError(t, k.SetReferences("np4-b", 1))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "a", Type: netfilter.HashNet, MaxSize: 16}, []netfilter.Member{ip("10.0.0.1")}))
	require.NoError(t, d.RemoveSet("b"))
	p, err = d.Plan(ctx)
	require.NoError(t, err)
	assert.Equal(t, []dataplane.Write{{Op: dataplane.WriteDelete, Kind: "set", Object: "np4-b hash:ip family inet maxelem 16"}}, p.Writes,
		"the type change of a referenced set is not written")
	_, err = d.Apply(ctx)
	require.ErrorIs(t, err, netfilter.ErrSetInUse)
	_, err = d.ApplyDeletions(ctx)
	require.ErrorIs(t, err, netfilter.ErrSetInUse)

	st, err := d.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, []dataplane.Drift{
		{Kind: "set", Name: "np4-a", Want: "np4-a hash:net family inet maxelem 16", Have: "np4-a hash:ip family inet maxelem 16"},
		{Kind: "set", Name: "np4-b", Have: "np4-b hash:ip family inet maxelem 16"},
	}, st.Drift)
	require.Len(t, st.Failing, 2)
	assert.Equal(t, "np4-a", st.Failing[0].Name)
	assert.Equal(t, "write", st.Failing[0].Op)
	assert.Equal(t, "np4-b", st.Failing[1].Name)
	assert.Equal(t, "destroy", st.Failing[1].Op)
	for _, e := range st.Failing {
		assert.ErrorIs(t, e, netfilter.ErrSetInUse)
		assert.Equal(t, 1, e.Attempts)
	}
	p, err = d.Plan(ctx)
	require.NoError(t, err)
	assert.True(t, p.Empty(), "both wait for their retry: %v", p)
}

// A loop that has not run yet collects the driver's Plan and State: the
// dry run of what it would write.
func TestLoopCollectsPlanAndState(t *testing.T) {
	ctx := context.Background()
	d, k := newFake(t, ipsets.IPv6)
	loop, err := dataplane.New(dataplane.Options{})
	require.NoError(t, err)
	require.NoError(t, loop.AddDriver(d))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "a", Type: netfilter.HashNet, MaxSize: 8},
		[]netfilter.Member{netfilter.NetMember(netip.MustParsePrefix("fd00::/64"))}))
	plans, err := loop.Plan(ctx)
	require.NoError(t, err)
	require.Len(t, plans, 1)
	assert.Equal(t, "ipsets-np6-: 2 writes\n+ set np6-a hash:net family inet6 maxelem 8\n+ element np6-a fd00::/64", plans[0].String())
	states, err := loop.State(ctx)
	require.NoError(t, err)
	require.Len(t, states, 1)
	assert.Equal(t, []dataplane.Drift{
		{Kind: "element", Name: "np6-a fd00::/64", Want: "np6-a fd00::/64"},
		{Kind: "set", Name: "np6-a", Want: "np6-a hash:net family inet6 maxelem 8"},
	}, states[0].Drift)
	assert.Empty(t, k.Names(), "neither writes")
}

package ipsets_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
)

// A set of ours that has options the driver never sets (a timeout, which
// the fake does not emulate) is replaced, and the Plan's text says why;
// the Apply then makes that write, and the Plan is empty.
func TestKernelPlanNamesExtraOptions(t *testing.T) {
	kerneltest.RequireCommands(t, "ipset")
	ctx := context.Background()
	ns := kerneltest.NewNS(t)
	_, err := ns.Exec(ctx, "ipset", "create", "np4-a", "hash:ip", "family", "inet", "maxelem", "8", "timeout", "30")
	require.NoError(t, err)
	d, err := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: openKernel(t, ns)})
	require.NoError(t, err)
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "a", Type: netfilter.HashIP, MaxSize: 8}, nil))
	p, err := d.Plan(ctx)
	require.NoError(t, err)
	assert.Equal(t, []dataplane.Write{{Op: dataplane.WriteReplace, Kind: "set", Object: "np4-a hash:ip family inet maxelem 8",
		Detail: "swapped in, was np4-a hash:ip family inet maxelem 8 +options"}}, p.Writes)
	st, err := d.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, []dataplane.Drift{{Kind: "set", Name: "np4-a", Want: "np4-a hash:ip family inet maxelem 8",
		Have: "np4-a hash:ip family inet maxelem 8 +options"}}, st.Drift)
	_, err = d.Apply(ctx)
	require.NoError(t, err)
	out, err := ns.Exec(ctx, "ipset", "list", "-t", "np4-a")
	require.NoError(t, err)
	assert.NotContains(t, string(out), "timeout")
	p, err = d.Plan(ctx)
	require.NoError(t, err)
	assert.True(t, p.Empty(), "%v", p)
}

// The Plan properties of TestPlanProperties, on the kernel: a few rounds
// of random declarations (no hash:net,net, which this kernel may lack), changes and writes behind the driver's back, for
// each family. Plan writes nothing, Apply and ApplyDeletions make exactly
// its writes, and then Plan is empty.
func TestKernelPlanProperties(t *testing.T) {
	kerneltest.RequireCommands(t, "ipset")
	for _, fam := range []ipsets.Family{ipsets.IPv4, ipsets.IPv6} {
		for seed := range uint64(2) {
			t.Run(fmt.Sprintf("%v/%d", fam, seed), func(t *testing.T) {
				ctx := context.Background()
				ns := kerneltest.NewNS(t)
				rec := drivertest.Record(openKernel(t, ns))
				d, err := ipsets.New(ipsets.Options{Family: fam, Prefix: prefixOf(fam), Kernel: rec})
				require.NoError(t, err)
				run := func(args ...string) {
					_, err := ns.Exec(ctx, "ipset", args...)
					require.NoError(t, err)
				}
				planned := planRounds(t, rand.New(rand.NewPCG(seed, 21)), d, rec, false, 4, func() kernelSets { return kernelSetsOf(t, ns) }, run)
				assert.Positive(t, planned)
			})
		}
	}
}

// kernelSetsOf reads the sets of ns (`ipset save`): each set's create line
// without its random hash seed, and its members in Go's address form.
func kernelSetsOf(t *testing.T, ns *kerneltest.NS) kernelSets {
	t.Helper()
	out, err := ns.Exec(context.Background(), "ipset", "save")
	require.NoError(t, err)
	ks := kernelSets{header: map[string]string{}, members: map[string]map[string]bool{}}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		switch f[0] {
		case "create":
			ks.header[f[1]] = confInitval.ReplaceAllString(strings.Join(f[2:], " "), "")
			ks.members[f[1]] = map[string]bool{}
		case "add":
			ks.members[f[1]][goForm(f[2])] = true
		}
	}
	return ks
}

// BenchmarkKernelPlanVsApply compares Plan with Apply on the kernel: a
// set of 10k members of which each op replaces 100 (100 added, 100
// deleted). "plan" times the Plan alone (the Apply that follows it is not
// timed), "apply" the Apply alone; both read nothing but what the change
// needs.
func BenchmarkKernelPlanVsApply(b *testing.B) {
	kerneltest.RequireCommands(b, "ipset")
	const n, changed = 10_000, 100
	for _, mode := range []string{"plan", "apply"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			ns := kerneltest.NewNS(b)
			k, err := kernel.Open(ns.Path())
			require.NoError(b, err)
			b.Cleanup(func() { _ = k.Close() })
			d, err := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: k})
			require.NoError(b, err)
			members := benchMembers(ipsets.IPv4, n)
			require.NoError(b, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "big", Type: netfilter.HashIP}, members))
			_, err = d.Apply(ctx)
			require.NoError(b, err)
			i := 0
			for b.Loop() {
				b.StopTimer()
				// The oldest changed members go, changed new ones come:
				// the set keeps its size.
				in := make([]netfilter.Member, changed)
				for j := range in {
					x := i + j
					in[j] = netfilter.IPMember(netip.AddrFrom4([4]byte{11, byte(x >> 16), byte(x >> 8), byte(x)}))
				}
				require.NoError(b, d.RemoveMembers("big", members[:changed]))
				require.NoError(b, d.AddMembers("big", in))
				members = append(slices.Clone(members[changed:]), in...)
				b.StartTimer()
				if mode == "plan" {
					p, err := d.Plan(ctx)
					b.StopTimer()
					require.NoError(b, err)
					require.Len(b, p.Writes, 2*changed)
					_, err = d.Apply(ctx)
					require.NoError(b, err)
					b.StartTimer()
				} else {
					_, err := d.Apply(ctx)
					require.NoError(b, err)
				}
				i += changed
			}
		})
	}
}

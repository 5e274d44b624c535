//go:build linux

package scenarios

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"strconv"

	"github.com/nodeplane/nodeplane/bench/internal/harness"
	"github.com/nodeplane/nodeplane/internal/testkit/benchutil"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
)

// The ipsets scenarios:
//
//   - ipsets/initial/N: load a new hash:ip set of N members. Ours declares
//     the set and applies it (one `ipset list -name` to adopt, then one
//     `ipset restore`); the floor is one hand-written `ipset restore` of the
//     same create and add lines; the peer runs `ipset create` and then one
//     `ipset add` per member, as agents that wrap the binary by hand do
//     (capped at 10k members).
//   - ipsets/change1/N: add one member to a set of N members that is
//     already in the kernel and in sync. Ours is AddMembers + Apply; the
//     floor is a restore of the one add line; the peer one `ipset add`.
//   - ipsets/replace/100000: replace all but 500 members of a set of 100k
//     (ipsets_replace.go). Ours swaps a new set in; the peer is the
//     in-place restore nodeplane wrote before (every del, then every add);
//     the floor a hand-written restore that fills a new set and swaps it.
//   - ipsets/heap/100000: the heap the driver keeps for a 100k-member set
//     once applied (desired and kernel views), reported as heapB/member.
//
// Ours reaches the trial's namespace through a kernel.Namespace (the one
// kernel option), opened in Setup and closed by Run.
const (
	ipsetsPrefix = "np4-"
	ipsetsName   = "bench"
	ipsetsKernel = ipsetsPrefix + ipsetsName
	// ipsetsPeerCap is the largest size the one-exec-per-member peer runs
	// at: at 100k members a trial would take minutes.
	ipsetsPeerCap = 10_000
)

func init() {
	for _, n := range []int{100, 1_000, 10_000, 100_000} {
		harness.Register(ipsetsInitial(n))
	}
	harness.Register(ipsetsChange1(100), ipsetsChange1(100_000), ipsetsReplace(100_000), ipsetsHeap(100_000))
}

func ipsetsMembers(n int) []netfilter.Member {
	out := make([]netfilter.Member, n)
	for i := range n {
		out[i] = netfilter.IPMember(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	return out
}

// ipsetsScript is the hand-written restore input for members: the create
// line ours writes (without -exist) and one add line per member.
func ipsetsScript(members []netfilter.Member) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "create %s hash:ip family inet maxelem %d\n", ipsetsKernel, netfilter.DefaultMaxSize)
	for _, m := range members {
		b.WriteString("add " + ipsetsKernel + " " + m.String() + "\n")
	}
	return b.Bytes()
}

var ipsetsMeta = netfilter.SetMetadata{Name: ipsetsName, Type: netfilter.HashIP}

// ipsetsOurs is what an ours variant's Setup hands to its Run: the trial's
// namespace (closed by Run), and the driver or the members to load.
type ipsetsOurs struct {
	k       *kernel.Namespace
	d       *ipsets.IPSets
	members []netfilter.Member
}

// ipsetsOpen opens the trial's namespace for ours, with members to load.
func ipsetsOpen(env *harness.Env, members []netfilter.Member) error {
	k, err := kernel.Open(env.NS.Path())
	if err != nil {
		return err
	}
	env.State = &ipsetsOurs{k: k, members: members}
	return nil
}

// ipsetsOpenLoaded opens the trial's namespace for ours and loads members
// with a new driver, which Run then changes; settle follows.
func ipsetsOpenLoaded(ctx context.Context, env *harness.Env, members []netfilter.Member) error {
	if err := ipsetsOpen(env, nil); err != nil {
		return err
	}
	o := env.State.(*ipsetsOurs)
	d, err := ipsetsLoad(ctx, o.k, members)
	if err != nil {
		o.k.Close()
		return err
	}
	o.d = d
	if err := settle(ctx); err != nil {
		o.k.Close()
		return err
	}
	return nil
}

// ipsetsLoad declares members and applies them with a new driver on k.
func ipsetsLoad(ctx context.Context, k kernel.Commands, members []netfilter.Member) (*ipsets.IPSets, error) {
	d, err := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: ipsetsPrefix, Kernel: k})
	if err != nil {
		return nil, err
	}
	if err := d.AddOrReplaceSet(ipsetsMeta, members); err != nil {
		return nil, err
	}
	_, err = d.Apply(ctx)
	return d, err
}

// ipsetsRestore runs a hand-written restore in the trial's namespace.
func ipsetsRestore(ctx context.Context, env *harness.Env, script []byte) error {
	_, err := env.NS.Run(ctx, bytes.NewReader(script), "ipset", "restore")
	return err
}

func ipsetsInitial(n int) harness.Scenario {
	s := harness.Scenario{
		Name: "ipsets/initial/" + strconv.Itoa(n),
		Size: n,
		Variants: []harness.Variant{
			{
				Name: "nodeplane ipsets", Role: harness.Ours,
				Setup: func(_ context.Context, env *harness.Env) error { return ipsetsOpen(env, ipsetsMembers(n)) },
				Run: func(ctx context.Context, env *harness.Env) error {
					o := env.State.(*ipsetsOurs)
					defer o.k.Close()
					_, err := ipsetsLoad(ctx, o.k, o.members)
					return err
				},
			},
			{
				Name: "ipset restore (hand-written)", Role: harness.Floor,
				Setup: func(_ context.Context, env *harness.Env) error {
					env.State = ipsetsScript(ipsetsMembers(n))
					return nil
				},
				Run: ipsetsRestoreState,
			},
		},
	}
	if n <= ipsetsPeerCap {
		s.Variants = append(s.Variants, harness.Variant{
			Name: "ipset add per member (exec)", Role: harness.Peer,
			Setup: func(_ context.Context, env *harness.Env) error {
				members := ipsetsMembers(n)
				strs := make([]string, len(members))
				for i, m := range members {
					strs[i] = m.String()
				}
				env.State = strs
				return nil
			},
			Run: func(ctx context.Context, env *harness.Env) error {
				if _, err := env.NS.Run(ctx, nil, "ipset", "create", ipsetsKernel, "hash:ip", "family", "inet",
					"maxelem", strconv.Itoa(netfilter.DefaultMaxSize)); err != nil {
					return err
				}
				for _, m := range env.State.([]string) {
					if _, err := env.NS.Run(ctx, nil, "ipset", "add", ipsetsKernel, m); err != nil {
						return err
					}
				}
				return nil
			},
		})
	} else {
		s.Note = fmt.Sprintf("peer (one `ipset add` exec per member) capped at %d members: at this size it would take minutes per trial; see ipsets/initial/%d for its ratio", ipsetsPeerCap, ipsetsPeerCap)
	}
	if n == ipsetsPeerCap {
		s.Note = "peer runs one `ipset create` and one `ipset add` exec per member (what hand-rolled agents do); this is the largest size it runs at"
	}
	return s
}

// ipsetsExtra is the member the change1 scenarios add.
const ipsetsExtra = "192.0.2.1"

// ipsetsLoadThen is a Setup for floors and peers: it loads the set of n
// members by a hand-written restore, hands state(n) to Run (when state is
// set) and settles.
func ipsetsLoadThen(n int, state func(int) []byte) setupFunc {
	return func(ctx context.Context, env *harness.Env) error {
		if err := ipsetsRestore(ctx, env, ipsetsScript(ipsetsMembers(n))); err != nil {
			return err
		}
		if state != nil {
			env.State = state(n)
		}
		return settle(ctx)
	}
}

// ipsetsRestoreState is a Run that restores the input Setup handed it.
func ipsetsRestoreState(ctx context.Context, env *harness.Env) error {
	return ipsetsRestore(ctx, env, env.State.([]byte))
}

func ipsetsChange1(n int) harness.Scenario {
	return harness.Scenario{
		Name: "ipsets/change1/" + strconv.Itoa(n),
		Size: 1,
		Note: "one member added to a set of " + strconv.Itoa(n) + " members already in the kernel and in sync; compare ours across sizes",
		Variants: []harness.Variant{
			{
				Name: "nodeplane ipsets", Role: harness.Ours,
				Setup: func(ctx context.Context, env *harness.Env) error {
					return ipsetsOpenLoaded(ctx, env, ipsetsMembers(n))
				},
				Run: func(ctx context.Context, env *harness.Env) error {
					o := env.State.(*ipsetsOurs)
					defer o.k.Close()
					if err := o.d.AddMembers(ipsetsName, []netfilter.Member{netfilter.IPMember(netip.MustParseAddr(ipsetsExtra))}); err != nil {
						return err
					}
					_, err := o.d.Apply(ctx)
					return err
				},
			},
			{
				Name: "ipset restore (hand-written)", Role: harness.Floor,
				Setup: ipsetsLoadThen(n, nil),
				Run: func(ctx context.Context, env *harness.Env) error {
					return ipsetsRestore(ctx, env, []byte("add "+ipsetsKernel+" "+ipsetsExtra+"\n"))
				},
			},
			{
				Name: "ipset add (exec)", Role: harness.Peer,
				Setup: ipsetsLoadThen(n, nil),
				Run: func(ctx context.Context, env *harness.Env) error {
					_, err := env.NS.Run(ctx, nil, "ipset", "add", ipsetsKernel, ipsetsExtra)
					return err
				},
			},
		},
	}
}

func ipsetsHeap(n int) harness.Scenario {
	return harness.Scenario{
		Name: "ipsets/heap/" + strconv.Itoa(n),
		Size: n,
		Note: "heapB/member: heap kept by the driver per member of an applied set (desired + kernel views); times include two forced GCs",
		Variants: []harness.Variant{{
			Name: "nodeplane ipsets", Role: harness.Ours,
			Setup: func(_ context.Context, env *harness.Env) error { return ipsetsOpen(env, ipsetsMembers(n)) },
			Run: func(ctx context.Context, env *harness.Env) error {
				o := env.State.(*ipsetsOurs)
				defer o.k.Close()
				members := o.members
				before := benchutil.HeapInUse()
				d, err := ipsetsLoad(ctx, o.k, members)
				if err != nil {
					return err
				}
				env.Report("heapB/member", heapPer(before, n))
				runtime.KeepAlive(d)
				runtime.KeepAlive(members)
				return nil
			},
		}},
	}
}

//go:build linux

package scenarios

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/nodeplane/nodeplane/bench/internal/harness"
	"github.com/nodeplane/nodeplane/netfilter"
)

// ipsetsKept is how many members the replace scenario keeps: a few
// hundred, as when a policy's peers are replaced wholesale.
const ipsetsKept = 500

// ipsetsReplacement returns the members that replace those of
// ipsetsMembers(n): its first ipsetsKept, then n-ipsetsKept new ones.
func ipsetsReplacement(n int) []netfilter.Member {
	out := ipsetsMembers(n)[:ipsetsKept:ipsetsKept]
	for i := range n - ipsetsKept {
		out = append(out, netfilter.IPMember(netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)})))
	}
	return out
}

// ipsetsInPlace is the restore input of an update in place as nodeplane
// wrote it before it learnt to swap: every delete, then every add.
func ipsetsInPlace(n int) []byte {
	next := ipsetsReplacement(n)
	var b bytes.Buffer
	for _, m := range ipsetsMembers(n)[ipsetsKept:] {
		b.WriteString("del " + ipsetsKernel + " " + m.String() + " -exist\n")
	}
	for _, m := range next[ipsetsKept:] {
		b.WriteString("add " + ipsetsKernel + " " + m.String() + " -exist\n")
	}
	return b.Bytes()
}

// ipsetsSwapScript is the hand-written swap: fill a new set, swap it in,
// destroy the old one, in one restore.
func ipsetsSwapScript(n int) []byte {
	const temp = ipsetsPrefix + "~0"
	var b bytes.Buffer
	fmt.Fprintf(&b, "create %s hash:ip family inet maxelem %d\n", temp, netfilter.DefaultMaxSize)
	for _, m := range ipsetsReplacement(n) {
		b.WriteString("add " + temp + " " + m.String() + "\n")
	}
	b.WriteString("swap " + ipsetsKernel + " " + temp + "\ndestroy " + temp + "\n")
	return b.Bytes()
}

// ipsetsReplace is ipsets/replace/N: all but ipsetsKept members of a set of
// N members, already in the kernel and in sync, are replaced (the size
// stays N). Ours is AddOrReplaceSet + Apply, which swaps a new set in; the
// peer is the restore nodeplane wrote before (every delete, then every
// add, in place: the set is nearly empty in between); the floor one
// hand-written restore that fills a new set and swaps it in.
func ipsetsReplace(n int) harness.Scenario {
	return harness.Scenario{
		Name: "ipsets/replace/" + strconv.Itoa(n),
		Size: n - ipsetsKept,
		Note: "all but " + strconv.Itoa(ipsetsKept) + " members of a " + strconv.Itoa(n) + "-member set replaced; peer = every del then every add in place (nodeplane before this change), floor = one hand-written restore that fills a new set and swaps it in",
		Variants: []harness.Variant{
			{
				Name: "nodeplane ipsets", Role: harness.Ours,
				Setup: func(ctx context.Context, env *harness.Env) error {
					if err := ipsetsOpenLoaded(ctx, env, ipsetsMembers(n)); err != nil {
						return err
					}
					env.State.(*ipsetsOurs).members = ipsetsReplacement(n)
					return nil
				},
				Run: func(ctx context.Context, env *harness.Env) error {
					o := env.State.(*ipsetsOurs)
					defer o.k.Close()
					if err := o.d.AddOrReplaceSet(ipsetsMeta, o.members); err != nil {
						return err
					}
					_, err := o.d.Apply(ctx)
					return err
				},
			},
			{
				Name: "ipset restore del then add (in place)", Role: harness.Peer,
				Setup: ipsetsLoadThen(n, ipsetsInPlace),
				Run:   ipsetsRestoreState,
			},
			{
				Name: "ipset restore swap (hand-written)", Role: harness.Floor,
				Setup: ipsetsLoadThen(n, ipsetsSwapScript),
				Run:   ipsetsRestoreState,
			},
		},
	}
}

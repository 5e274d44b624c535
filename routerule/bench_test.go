//go:build linux

package routerule_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/routerule"
)

// benchRules returns n IPv4 rules spread over prios priorities (each rule a
// distinct /32 source), and the owned priorities.
func benchRules(n, prios int) ([]routerule.Rule, []uint32) {
	owned := make([]uint32, prios)
	for i := range owned {
		owned[i] = uint32(1000 + i)
	}
	rules := make([]routerule.Rule, n)
	for i := range rules {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		rules[i] = routerule.Rule{
			Priority: owned[i%prios],
			Src:      netip.PrefixFrom(a, 32),
			Action:   routerule.ActionLookup{Table: 100},
		}
	}
	return rules, owned
}

func benchNew(b *testing.B, k kernel.Rules, owned []uint32) *routerule.Rules {
	r, err := routerule.New(routerule.Options{Family: routerule.IPv4, Kernel: k, Priorities: owned, Tables: []uint32{100}})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

func benchApply(b *testing.B, r *routerule.Rules) {
	if _, err := r.Apply(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkApply1kRules programs 1000 rules into a fresh fake namespace:
// validation, one dump and 1000 adds (the fake's cost included).
func BenchmarkApply1kRules(b *testing.B) {
	for _, prios := range []int{10, 1} {
		b.Run(map[int]string{10: "10-priorities", 1: "1-priority"}[prios], func(b *testing.B) {
			rules, owned := benchRules(1000, prios)
			b.ReportAllocs()
			for b.Loop() {
				r := benchNew(b, kernelfake.New(kernelfake.Options{}), owned)
				if err := r.SetRules(rules); err != nil {
					b.Fatal(err)
				}
				benchApply(b, r)
			}
		})
	}
}

// BenchmarkNoOpApply is an Apply with nothing changed and no resync queued
// over 1000 programmed rules: no kernel I/O.
func BenchmarkNoOpApply(b *testing.B) {
	rules, owned := benchRules(1000, 10)
	k := kernelfake.New(kernelfake.Options{})
	r := benchNew(b, k, owned)
	if err := r.SetRules(rules); err != nil {
		b.Fatal(err)
	}
	benchApply(b, r)
	k.ResetCounts()
	b.ReportAllocs()
	for b.Loop() {
		benchApply(b, r)
	}
	if k.Calls(kernelfake.OpRules)+k.Writes() != 0 {
		b.Fatal("a no-op Apply touched the kernel")
	}
}

// BenchmarkKernelApply1kRules programs 1000 rules into a real namespace
// (timed), then removes them (not timed).
func BenchmarkKernelApply1kRules(b *testing.B) {
	rules, owned := benchRules(1000, 10)
	r := benchNew(b, openKernel(b), owned)
	b.ReportAllocs()
	for b.Loop() {
		if err := r.SetRules(rules); err != nil {
			b.Fatal(err)
		}
		benchApply(b, r)
		b.StopTimer()
		if err := r.SetRules(nil); err != nil {
			b.Fatal(err)
		}
		benchApply(b, r)
		b.StartTimer()
	}
}

// BenchmarkKernelResync1kRules re-reads a namespace holding 1000 of our
// rules that match the desired set: one dump, no writes.
func BenchmarkKernelResync1kRules(b *testing.B) {
	rules, owned := benchRules(1000, 10)
	r := benchNew(b, openKernel(b), owned)
	if err := r.SetRules(rules); err != nil {
		b.Fatal(err)
	}
	benchApply(b, r)
	b.ReportAllocs()
	for b.Loop() {
		r.QueueResync()
		benchApply(b, r)
	}
}

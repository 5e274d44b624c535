package ipsets_test

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"runtime"
	"strconv"
	"testing"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/internal/testkit/benchutil"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/netfilter"
)

// nullKernel accepts every restore and reports no sets: the userspace cost
// of the driver alone. A save returns the prepared output.
type nullKernel struct{ save []byte }

func (n nullKernel) Run(_ context.Context, stdin io.Reader, _ string, args ...string) ([]byte, error) {
	switch args[0] {
	case "restore":
		_, err := io.Copy(io.Discard, stdin)
		return nil, err
	case "save":
		return n.save, nil
	case "list":
		if n.save != nil {
			return []byte("np4-big\n"), nil
		}
	}
	return nil, nil
}

func benchMembers(fam ipsets.Family, n int) []netfilter.Member {
	out := make([]netfilter.Member, n)
	for i := range n {
		if fam == ipsets.IPv6 {
			out[i] = netfilter.IPMember(netip.AddrFrom16([16]byte{0: 0xfd, 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}))
		} else {
			out[i] = netfilter.IPMember(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
		}
	}
	return out
}

func loaded(b *testing.B, fam ipsets.Family, r command.Runner, members []netfilter.Member) *ipsets.IPSets {
	d, err := ipsets.New(ipsets.Options{Family: fam, Prefix: prefixOf(fam), Kernel: commands(r)})
	if err != nil {
		b.Fatal(err)
	}
	if err := d.AddOrReplaceSet(netfilter.SetMetadata{Name: "big", Type: netfilter.HashIP}, members); err != nil {
		b.Fatal(err)
	}
	if _, err := d.Apply(context.Background()); err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkHeapPerMember reports the heap the driver keeps per member of a
// 100k set once it is in the kernel (desired and dataplane views).
func BenchmarkHeapPerMember(b *testing.B) {
	const n = 100_000
	for _, fam := range families {
		b.Run(fam.String(), func(b *testing.B) {
			var perMember float64
			for b.Loop() {
				members := benchMembers(fam, n)
				before := benchutil.HeapInUse()
				d := loaded(b, fam, nullKernel{}, members)
				after := benchutil.HeapInUse()
				runtime.KeepAlive(d)
				runtime.KeepAlive(members)
				perMember = float64(int64(after)-int64(before)) / n
			}
			b.ReportMetric(perMember, "heapB/member")
		})
	}
}

// BenchmarkInitialLoad is the userspace cost of declaring and writing a
// set of 100k members (the restore is discarded).
func BenchmarkInitialLoad(b *testing.B) {
	members := benchMembers(ipsets.IPv4, 100_000)
	for b.Loop() {
		loaded(b, ipsets.IPv4, nullKernel{}, members)
	}
}

// BenchmarkOneMemberChange is the userspace cost of adding and removing
// one member of a set of 100 and of 100k members: it must not depend on
// the set's size.
func BenchmarkOneMemberChange(b *testing.B) {
	for _, n := range []int{100, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			d := loaded(b, ipsets.IPv4, nullKernel{}, benchMembers(ipsets.IPv4, n))
			extra := []netfilter.Member{netfilter.IPMember(netip.MustParseAddr("192.0.2.1"))}
			ctx := context.Background()
			for b.Loop() {
				if err := d.AddMembers("big", extra); err != nil {
					b.Fatal(err)
				}
				if _, err := d.Apply(ctx); err != nil {
					b.Fatal(err)
				}
				if err := d.RemoveMembers("big", extra); err != nil {
					b.Fatal(err)
				}
				if _, err := d.Apply(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkResync is the cost of re-reading a 100k-member set from `ipset
// save` output (a full resync that finds the kernel in sync).
func BenchmarkResync(b *testing.B) {
	const n = 100_000
	members := benchMembers(ipsets.IPv4, n)
	var save bytes.Buffer
	save.WriteString("create np4-big hash:ip family inet hashsize 32768 maxelem 1048576 bucketsize 12 initval 0x12345678\n")
	for _, m := range members {
		save.WriteString("add np4-big " + m.String() + "\n")
	}
	d := loaded(b, ipsets.IPv4, nullKernel{save: save.Bytes()}, members)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		d.QueueResync()
		if _, err := d.Apply(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplaceMost is the userspace cost of replacing all but 500
// members of a 100k-member set (declared, diffed, rendered as a swap; the
// restore is discarded).
func BenchmarkReplaceMost(b *testing.B) {
	const n, kept = 100_000, 500
	old := benchMembers(ipsets.IPv4, n)
	next := append(old[:kept:kept], benchMembers(ipsets.IPv6, n-kept)...)
	for i := kept; i < n; i++ {
		next[i] = netfilter.IPMember(netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	meta := netfilter.SetMetadata{Name: "big", Type: netfilter.HashIP}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		d := loaded(b, ipsets.IPv4, nullKernel{}, old)
		b.StartTimer()
		if err := d.AddOrReplaceSet(meta, next); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Apply(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

//go:build linux

package nftables_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// nullKernel is a kernel that takes every transaction and holds nothing:
// the Table's own cost, without the kernel's.
type nullKernel struct{}

func (nullKernel) Do(fn func() error) error                           { return fn() }
func (nullKernel) OpenNFTablesSocket() (kernel.NFTablesSocket, error) { return &nullSocket{}, nil }

type nullSocket struct {
	gen uint32
	q   [][]byte
}

func (s *nullSocket) Send(b []byte) error {
	return nfnl.ForEachMsg(b, func(m *nfnl.Msg) error {
		var w nfnl.Writer
		switch m.Type {
		case nfnl.BatchEnd:
			s.gen++
			return nil
		case nfnl.Type(nfnl.MsgGetGen):
			st := w.Begin(nfnl.Type(nfnl.MsgNewGen), 0, m.Seq, 0, 0)
			w.U32(nfnl.GenID, s.gen)
			w.End(st)
		case nfnl.Type(nfnl.MsgGetTable):
			w.AppendError(m.Raw, 0, -2, 0) // ENOENT
		case nfnl.Type(nfnl.MsgGetRule): // a chain's rules: none
			st := w.BeginRaw(nfnl.MsgDone, 0, m.Seq, 0)
			w.B = append(w.B, 0, 0, 0, 0)
			w.End(st)
		default:
			return nil
		}
		s.q = append(s.q, w.B)
		return nil
	})
}

func (s *nullSocket) Receive(b []byte, block bool) (int, error) {
	if len(s.q) == 0 {
		return 0, nil
	}
	n := copy(b, s.q[0])
	s.q = s.q[1:]
	return n, nil
}

func (s *nullSocket) Close() error { return nil }

// services declares a kube-proxy-style table of n services on tbl.
func services(tbl *nftables.Table, from, n int) error {
	vm := nftables.Set{Name: "service-ips", Key: svcKey, Verdict: true}
	var chains []netfilter.Chain
	var elems []nftables.Element
	for i := from; i < from+n; i++ {
		vip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		name := fmt.Sprintf("svc-%05d", i)
		chains = append(chains, netfilter.Chain{Name: name, Rules: []netfilter.Rule{
			{Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP)}, Action: netfilter.SetMaskedMark(0x4000, 0x4000)},
			{Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP)}, Action: netfilter.DNAT(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}), 8080))},
		}})
		elems = append(elems, svcElem(vip.String(), 80, name))
	}
	if from == 0 {
		vm.Elements = elems
		if err := tbl.SetSets(vm); err != nil {
			return err
		}
	} else if err := tbl.AddElements("service-ips", elems...); err != nil {
		return err
	}
	if err := tbl.SetChains(chains...); err != nil {
		return err
	}
	return tbl.InsertRules("test", netfilter.HookPrerouting, []netfilter.Rule{{Action: netfilter.VerdictMap("service-ips", netfilter.Dst, netfilter.Dst)}})
}

func natTable(b *testing.B) *nftables.Table {
	tbl, err := nftables.New(nftables.Options{Name: "kp", Family: ipfamily.IPv4, Role: nftables.NAT, Kernel: nullKernel{}})
	if err != nil {
		b.Fatal(err)
	}
	return tbl
}

// BenchmarkAddService is the Table's cost of adding one service to a
// table of 10k (the kernel's excluded).
func BenchmarkAddService(b *testing.B) {
	tbl := natTable(b)
	if err := services(tbl, 0, 10_000); err != nil {
		b.Fatal(err)
	}
	if _, err := tbl.Apply(context.Background()); err != nil {
		b.Fatal(err)
	}
	i := 10_000
	b.ReportAllocs()
	for b.Loop() {
		if err := services(tbl, i, 1); err != nil {
			b.Fatal(err)
		}
		if _, err := tbl.Apply(context.Background()); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkLoadElements is the Table's cost of loading a set of 100k
// addresses (the kernel's excluded).
func BenchmarkLoadElements(b *testing.B) {
	s := nftables.Set{Name: "addrs", Key: []nftables.KeyType{nftables.TypeAddr}}
	for i := range 100_000 {
		s.Elements = append(s.Elements, nftables.Elem(nftables.Addr(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))))
	}
	b.ReportAllocs()
	for b.Loop() {
		tbl, _ := nftables.New(nftables.Options{Name: "np", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: nullKernel{}})
		if err := tbl.SetSets(s); err != nil {
			b.Fatal(err)
		}
		if _, err := tbl.Apply(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChangeEndpoints is the Table's cost of replacing one service's
// endpoint chain in a table of 10k services with an endpoint chain each
// (the kernel's excluded): a change of what is programmed.
func BenchmarkChangeEndpoints(b *testing.B) {
	tbl := natTable(b)
	tcp := netfilter.Protocol(netfilter.ProtoTCP)
	svc := func(i, g int) []netfilter.Chain {
		ep := fmt.Sprintf("ep-%05d-%d", i, g)
		return []netfilter.Chain{
			{Name: fmt.Sprintf("svc-%05d", i), Rules: []netfilter.Rule{
				{Matches: []netfilter.Match{tcp}, Action: netfilter.SetMaskedMark(0x4000, 0x4000)}, {Action: netfilter.Jump(ep)}}},
			{Name: ep, Rules: []netfilter.Rule{{Matches: []netfilter.Match{tcp},
				Action: netfilter.DNAT(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244 + byte(g), byte(i >> 8), byte(i)}), 8080))}}},
		}
	}
	vm := nftables.Set{Name: "service-ips", Key: svcKey, Verdict: true}
	var chains []netfilter.Chain
	for i := range benchServices {
		chains = append(chains, svc(i, 0)...)
		vm.Elements = append(vm.Elements, svcElem(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}).String(), 80, fmt.Sprintf("svc-%05d", i)))
	}
	if err := tbl.SetSets(vm); err != nil {
		b.Fatal(err)
	}
	if err := tbl.SetChains(chains...); err != nil {
		b.Fatal(err)
	}
	if err := tbl.InsertRules("test", netfilter.HookPrerouting, []netfilter.Rule{{Action: netfilter.VerdictMap("service-ips", netfilter.Dst, netfilter.Dst)}}); err != nil {
		b.Fatal(err)
	}
	if _, err := tbl.Apply(context.Background()); err != nil {
		b.Fatal(err)
	}
	g := 0
	b.ReportAllocs()
	for b.Loop() {
		g++
		if err := tbl.SetChains(svc(benchServices/2, g%2)...); err != nil {
			b.Fatal(err)
		}
		if err := tbl.RemoveChains(fmt.Sprintf("ep-%05d-%d", benchServices/2, (g+1)%2)); err != nil {
			b.Fatal(err)
		}
		if _, err := tbl.Apply(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// benchServices is the size of BenchmarkChangeEndpoints' table.
var benchServices = 10_000

// BenchmarkPlanAgainstApply is the Table's cost of planning (Plan, the
// dry run that lists every write) and of applying (Apply) a kube-proxy
// table of 10k services on an empty kernel (the kernel's excluded): the
// same read and decisions, Plan listing the writes instead of encoding
// and sending them.
func BenchmarkPlanAgainstApply(b *testing.B) {
	for _, name := range []string{"Plan", "Apply"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				b.StopTimer()
				tbl := natTable(b)
				if err := services(tbl, 0, 10_000); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				var err error
				if name == "Plan" {
					var p dataplane.Plan
					if p, err = tbl.Plan(context.Background()); err == nil && len(p.Writes) < 30_000 {
						err = fmt.Errorf("a plan of %d writes", len(p.Writes))
					}
				} else {
					_, err = tbl.Apply(context.Background())
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package ipsets_test

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
)

// TestConformance runs the driver conformance suite on a fake namespace.
func TestConformance(t *testing.T) { drivertest.Run(t, drivertest.Fake, confSubject) }

// TestKernelConformance runs the driver conformance suite in fresh network
// namespaces of the running kernel.
func TestKernelConformance(t *testing.T) { drivertest.Run(t, drivertest.Kernel, confSubject) }

// confVariant is one IPSets identity: a family and its prefix.
type confVariant ipsets.Family

func (c confVariant) String() string { return ipsets.Family(c).String() }

func (c confVariant) prefix() string {
	if ipsets.Family(c) == ipsets.IPv6 {
		return "np6-"
	}
	return "np4-"
}

// ip returns 10.<a>.<b>.<d> or fd00::<a>:<b>:<d>.
func (c confVariant) ip(a, b, d int) netip.Addr {
	if ipsets.Family(c) == ipsets.IPv6 {
		return netip.AddrFrom16([16]byte{0: 0xfd, 11: byte(a), 13: byte(b), 15: byte(d)})
	}
	return netip.AddrFrom4([4]byte{10, byte(a), byte(b), byte(d)})
}

func (c confVariant) net(a, b int) netip.Prefix {
	bits := 24
	if ipsets.Family(c) == ipsets.IPv6 {
		bits = 120
	}
	return netip.PrefixFrom(c.ip(a, b, 0), bits)
}

// confSet is one declared set.
type confSet struct {
	meta    netfilter.SetMetadata
	members []netfilter.Member
}

// sets is the representative state: every type the test kernel has
// (hash:net,net is missing there), 80 members.
func (c confVariant) sets() []confSet {
	var pods, nets, svc, ports, big []netfilter.Member
	for i := range 20 {
		pods = append(pods, netfilter.IPMember(c.ip(1, 0, i+1)))
	}
	for i := range 10 {
		nets = append(nets, netfilter.NetMember(c.net(2, i)))
	}
	nets = append(nets, netfilter.NetMember(netip.PrefixFrom(c.ip(2, 99, 1), c.ip(2, 99, 1).BitLen())))
	protos := []netfilter.Proto{netfilter.ProtoTCP, netfilter.ProtoUDP, netfilter.ProtoSCTP}
	for i := range 12 {
		svc = append(svc, netfilter.IPPortMember(c.ip(3, 0, i+1), protos[i%3], uint16(8000+i)))
	}
	for i := range 8 {
		ports = append(ports, netfilter.PortMember(uint16(1000+i*7)))
	}
	for i := range 30 {
		big = append(big, netfilter.IPMember(c.ip(4, i/10, i%10+1)))
	}
	return []confSet{
		{netfilter.SetMetadata{Name: "pods", Type: netfilter.HashIP}, pods},
		{netfilter.SetMetadata{Name: "nets", Type: netfilter.HashNet}, nets},
		{netfilter.SetMetadata{Name: "svc", Type: netfilter.HashIPPort}, svc},
		{netfilter.SetMetadata{Name: "ports", Type: netfilter.BitmapPort, Range: netfilter.PortRange{First: 1000, Last: 2000}}, ports},
		{netfilter.SetMetadata{Name: "big", Type: netfilter.HashIP, MaxSize: 1024}, big},
		{netfilter.SetMetadata{Name: "empty", Type: netfilter.HashNet}, nil},
	}
}

var confSubject = drivertest.Subject[*ipsets.IPSets, confVariant]{
	Variants: []confVariant{confVariant(ipsets.IPv4), confVariant(ipsets.IPv6)},
	Binaries: []string{"ipset"},
	New: func(k kernel.Kernel, clk clock.Clock, c confVariant) (*ipsets.IPSets, error) {
		return ipsets.New(ipsets.Options{Family: ipsets.Family(c), Prefix: c.prefix(), Kernel: k, Clock: clk})
	},
	Declare: func(s *ipsets.IPSets, c confVariant) error {
		for _, set := range c.sets() {
			if err := s.AddOrReplaceSet(set.meta, set.members); err != nil {
				return err
			}
		}
		return nil
	},
	Withdraw: func(s *ipsets.IPSets, c confVariant) error {
		for _, set := range c.sets() {
			if err := s.RemoveSet(set.meta.Name); err != nil {
				return err
			}
		}
		return nil
	},
	Check: func(t testing.TB, k kernel.Kernel, c confVariant) {
		var want, got []string
		for _, set := range c.sets() {
			maxelem := set.meta.MaxSize
			if maxelem == 0 {
				maxelem = netfilter.DefaultMaxSize
			}
			header := fmt.Sprintf("%s%s %s maxelem %d", c.prefix(), set.meta.Name, set.meta.Type, maxelem)
			if set.meta.Type == netfilter.BitmapPort {
				header = fmt.Sprintf("%s%s %s range %d-%d", c.prefix(), set.meta.Name, set.meta.Type, set.meta.Range.First, set.meta.Range.Last)
			}
			want = append(want, header)
			for _, m := range set.members {
				want = append(want, fmt.Sprintf("add %s%s %v", c.prefix(), set.meta.Name, m))
			}
		}
		for _, line := range confDump(t, k, c) {
			name := strings.Fields(line)[1]
			if !strings.HasPrefix(name, c.prefix()) {
				continue
			}
			if strings.HasPrefix(line, "create ") {
				// Name, type and the options the driver sets.
				f := strings.Fields(line)
				h := name + " " + f[2]
				for i := 3; i+1 < len(f); i++ {
					if f[i] == "maxelem" || f[i] == "range" {
						h += " " + f[i] + " " + f[i+1]
					}
				}
				line = h
			}
			got = append(got, line)
		}
		drivertest.SameLines(t, "our sets and members", got, want)
	},
	Dump: confDump,
	Foreign: func(t testing.TB, k kernel.Kernel, c confVariant, at drivertest.Stage) {
		fam, other := "inet", "inet6"
		if ipsets.Family(c) == ipsets.IPv6 {
			fam, other = other, fam
		}
		up := strings.ToUpper(c.prefix())
		var cmds [][]string
		switch at {
		case drivertest.BeforeApply:
			// Our prefix in another case, without its dash, not at the
			// start; the other family's prefix; our set names.
			cmds = [][]string{
				{"create", up + "pods", "hash:ip", "family", fam}, {"add", up + "pods", c.ip(1, 0, 1).String()},
				{"create", strings.TrimSuffix(c.prefix(), "-") + "pods", "hash:ip", "family", fam},
				{"create", "x" + c.prefix() + "nets", "hash:net", "family", fam}, {"add", "x" + c.prefix() + "nets", c.net(2, 0).String()},
				{"create", "np" + map[string]string{"inet": "6", "inet6": "4"}[fam] + "-svc", "hash:ip", "family", other},
				{"create", "pods", "hash:ip", "family", fam, "maxelem", "64"},
			}
		case drivertest.AfterApply:
			cmds = [][]string{
				{"create", up + "late", "hash:net", "family", fam}, {"add", up + "late", c.net(9, 9).String()},
				{"create", "ports", "bitmap:port", "range", "1-100"}, {"add", "ports", "7"},
			}
		case drivertest.InPlace:
			cmds = [][]string{{"create", up + "nets", "hash:net", "family", fam}, {"add", up + "nets", c.net(2, 1).String()}}
		}
		confRun(t, k, cmds...)
	},
	Delete: func(t testing.TB, k kernel.Kernel, c confVariant) {
		confRun(t, k, []string{"destroy", c.prefix() + "nets"},
			[]string{"del", c.prefix() + "pods", c.ip(1, 0, 3).String()},
			[]string{"add", c.prefix() + "svc", c.ip(3, 9, 9).String() + ",tcp:1"})
	},
	BadInputs: []drivertest.BadInput[*ipsets.IPSets, confVariant]{
		{Name: "name too long", Declare: func(s *ipsets.IPSets, _ confVariant) error {
			return s.AddOrReplaceSet(netfilter.SetMetadata{Name: strings.Repeat("n", 28), Type: netfilter.HashIP}, nil)
		}},
		{Name: "name with a space", Declare: func(s *ipsets.IPSets, _ confVariant) error {
			return s.AddOrReplaceSet(netfilter.SetMetadata{Name: "a b", Type: netfilter.HashIP}, nil)
		}},
		{Name: "empty name", Declare: func(s *ipsets.IPSets, _ confVariant) error {
			return s.AddOrReplaceSet(netfilter.SetMetadata{Type: netfilter.HashIP}, nil)
		}},
		{Name: "unknown type", Declare: func(s *ipsets.IPSets, _ confVariant) error {
			return s.AddOrReplaceSet(netfilter.SetMetadata{Name: "x", Type: "hash:mac"}, nil)
		}},
		{Name: "other family", Declare: func(s *ipsets.IPSets, c confVariant) error {
			other := ipsets.IPv6
			if ipsets.Family(c) == ipsets.IPv6 {
				other = ipsets.IPv4
			}
			return s.AddOrReplaceSet(netfilter.SetMetadata{Name: "x", Type: netfilter.HashIP, Family: other}, nil)
		}},
		{Name: "member of the other family", Declare: func(s *ipsets.IPSets, c confVariant) error {
			other := confVariant(ipsets.IPv6)
			if ipsets.Family(c) == ipsets.IPv6 {
				other = confVariant(ipsets.IPv4)
			}
			return s.AddMembers("pods", []netfilter.Member{netfilter.IPMember(other.ip(1, 0, 99))})
		}},
		{Name: "host bits", Declare: func(s *ipsets.IPSets, c confVariant) error {
			p := c.net(2, 50)
			return s.AddMembers("nets", []netfilter.Member{netfilter.NetMember(netip.PrefixFrom(p.Addr().Next(), p.Bits()))})
		}},
		{Name: "unspecified address in hash:ip", Declare: func(s *ipsets.IPSets, c confVariant) error {
			unspecified := netip.IPv4Unspecified()
			if ipsets.Family(c) == ipsets.IPv6 {
				unspecified = netip.IPv6Unspecified()
			}
			return s.AddMembers("pods", []netfilter.Member{netfilter.IPMember(unspecified)})
		}},
		{Name: "zero member", Declare: func(s *ipsets.IPSets, _ confVariant) error {
			return s.AddMembers("pods", []netfilter.Member{{}})
		}},
		{Name: "member of another type", Declare: func(s *ipsets.IPSets, _ confVariant) error {
			return s.AddMembers("pods", []netfilter.Member{netfilter.PortMember(80)})
		}},
		{Name: "port outside the range", Declare: func(s *ipsets.IPSets, _ confVariant) error {
			return s.AddMembers("ports", []netfilter.Member{netfilter.PortMember(3000)})
		}},
		{Name: "bad protocol", Declare: func(s *ipsets.IPSets, c confVariant) error {
			return s.AddMembers("svc", []netfilter.Member{netfilter.IPPortMember(c.ip(3, 0, 1), 99, 80)})
		}},
		{Name: "MaxSize on bitmap:port", Declare: func(s *ipsets.IPSets, _ confVariant) error {
			return s.AddOrReplaceSet(netfilter.SetMetadata{Name: "ports", Type: netfilter.BitmapPort, MaxSize: 10}, nil)
		}},
		{Name: "Range on hash:ip", Declare: func(s *ipsets.IPSets, _ confVariant) error {
			return s.AddOrReplaceSet(netfilter.SetMetadata{Name: "pods", Type: netfilter.HashIP, Range: netfilter.PortRange{First: 1, Last: 2}}, nil)
		}},
		{Name: "good members with a bad one", Declare: func(s *ipsets.IPSets, c confVariant) error {
			return s.AddOrReplaceSet(netfilter.SetMetadata{Name: "pods", Type: netfilter.HashIP}, []netfilter.Member{netfilter.IPMember(c.ip(1, 0, 1)), {}})
		}},
		{Name: "removing an invalid member", Declare: func(s *ipsets.IPSets, _ confVariant) error {
			return s.RemoveMembers("pods", []netfilter.Member{netfilter.PortMember(80)})
		}},
	},
}

// confInitval matches the random hash seed ipset save prints.
var confInitval = regexp.MustCompile(` initval 0x[0-9a-f]+`)

// confDump renders every set of the namespace: its create line without
// the random hash seed, then its members sorted (a hash set lists them in
// the seed's order).
func confDump(t testing.TB, k kernel.Kernel, _ confVariant) []string {
	out := drivertest.Exec(t, k, "ipset", "save")
	var lines, members []string
	flush := func() {
		slices.Sort(members)
		lines, members = append(lines, members...), nil
	}
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "create "):
			flush()
			lines = append(lines, confInitval.ReplaceAllString(l, ""))
		case strings.HasPrefix(l, "add "):
			members = append(members, l)
		}
	}
	flush()
	return lines
}

// confRun runs ipset commands, as an administrator would.
func confRun(t testing.TB, k kernel.Kernel, cmds ...[]string) {
	for _, cmd := range cmds {
		drivertest.Exec(t, k, "ipset", cmd...)
	}
}

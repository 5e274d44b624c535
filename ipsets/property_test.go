package ipsets_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/netfilter"
)

// The property: for any input the driver accepts, Apply succeeds, the
// kernel then holds exactly what was declared, and neither a periodic
// resync nor a restarted driver writes anything. Inputs are generated from
// a seed: every supported type, both families, edge addresses (zero, all
// ones, IPv4-mapped and IPv4-compatible IPv6), prefixes of every length
// with and without host bits, every protocol, ports at the ends of the
// range, bitmap ranges, sizes, and random changes after the first write
// (small ones written in place, large ones swapped in). Inputs the API
// refuses are dropped: refusing them is the API's job, checked elsewhere.

// genAddr returns an address of fam, often an edge case.
func genAddr(r *rand.Rand, fam ipsets.Family) netip.Addr {
	var b [16]byte
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	switch r.IntN(10) {
	case 0:
		b = [16]byte{}
	case 1:
		for i := range b {
			b[i] = 0xff
		}
	case 2: // a small pool, so that members repeat
		b = [16]byte{0: 10, 15: byte(r.IntN(4))}
		if fam == ipsets.IPv6 {
			b[0] = 0xfd
		}
	case 3:
		if fam == ipsets.IPv6 { // IPv4-mapped
			return netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: b[0], 13: b[1], 14: b[2], 15: b[3]})
		}
	case 4:
		if fam == ipsets.IPv6 { // IPv4-compatible: glibc prints ::a.b.c.d
			return netip.AddrFrom16([16]byte{12: b[0], 13: b[1], 14: b[2], 15: b[3]})
		}
	}
	if fam == ipsets.IPv4 {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16(b)
}

// genPrefix returns a prefix of fam, most often masked.
func genPrefix(r *rand.Rand, fam ipsets.Family) netip.Prefix {
	a := genAddr(r, fam)
	bits := r.IntN(a.BitLen() + 1)
	if r.IntN(4) == 0 {
		bits = a.BitLen()
	}
	p := netip.PrefixFrom(a, bits)
	if r.IntN(5) != 0 {
		p = p.Masked()
	}
	return p
}

var protocols = []netfilter.Proto{netfilter.ProtoTCP, netfilter.ProtoUDP, netfilter.ProtoSCTP}

func genPort(r *rand.Rand) uint16 {
	switch r.IntN(4) {
	case 0:
		return 0
	case 1:
		return math.MaxUint16
	}
	return uint16(r.UintN(1 << 16))
}

// genMember returns a member for a set of type t (and sometimes one that
// does not fit it), built directly or parsed from its text.
func genMember(r *rand.Rand, t netfilter.SetType, fam ipsets.Family, rng netfilter.PortRange) netfilter.Member {
	var m netfilter.Member
	switch t {
	case netfilter.HashIP:
		m = netfilter.IPMember(genAddr(r, fam))
	case netfilter.HashNet:
		m = netfilter.NetMember(genPrefix(r, fam))
	case netfilter.HashIPPort:
		m = netfilter.IPPortMember(genAddr(r, fam), protocols[r.IntN(len(protocols))], genPort(r))
	case netfilter.HashNetNet:
		m = netfilter.NetNetMember(genPrefix(r, fam), genPrefix(r, fam))
	case netfilter.BitmapPort:
		port := int(rng.First) + r.IntN(int(rng.Last)-int(rng.First)+3) - 1
		m = netfilter.PortMember(uint16(max(0, min(port, math.MaxUint16))))
	}
	if r.IntN(4) == 0 && m.Valid() {
		if p, err := netfilter.ParseMember(t, m.String()); err == nil {
			m = p
		}
	}
	return m
}

var allTypes = []netfilter.SetType{netfilter.HashIP, netfilter.HashNet, netfilter.HashIPPort, netfilter.HashNetNet, netfilter.BitmapPort}

// genDeclare declares a few random sets on d, keeping only what the API
// accepts, and returns their names.
func genDeclare(t *testing.T, r *rand.Rand, d *ipsets.IPSets, netnet bool) []string {
	t.Helper()
	fam := d.Family()
	var names []string
	for i := range 1 + r.IntN(4) {
		typ := allTypes[r.IntN(len(allTypes))]
		if typ == netfilter.HashNetNet && !netnet {
			typ = netfilter.HashNet
		}
		meta := netfilter.SetMetadata{Name: "s" + strconv.Itoa(i), Type: typ}
		n := r.IntN(40)
		if r.IntN(8) == 0 {
			n = 200 + r.IntN(300)
		}
		if typ == netfilter.BitmapPort {
			first := genPort(r)
			last := first + uint16(r.IntN(int(math.MaxUint16-first)+1))
			if r.IntN(3) == 0 {
				last = first + uint16(min(r.IntN(64), int(math.MaxUint16-first)))
			}
			meta.Range = netfilter.PortRange{First: first, Last: last}
		} else {
			switch r.IntN(4) {
			case 0:
				meta.MaxSize = n + r.IntN(50) + 1
			case 1:
				meta.MaxSize = math.MaxUint32
			}
		}
		require.NoError(t, d.AddOrReplaceSet(meta, nil))
		for range n {
			_ = d.AddMembers(meta.Name, []netfilter.Member{genMember(r, typ, fam, meta.Range)})
		}
		names = append(names, meta.Name)
	}
	return names
}

// genChange changes the declared sets at random: members added and
// removed, a set replaced by most of a new one, a size changed.
func genChange(t *testing.T, r *rand.Rand, d *ipsets.IPSets, names []string) {
	t.Helper()
	for _, name := range names {
		meta, _ := d.Metadata(name)
		members, _ := d.Members(name)
		switch r.IntN(4) {
		case 0: // remove some, add some
			for _, m := range members {
				if r.IntN(3) == 0 {
					require.NoError(t, d.RemoveMembers(name, []netfilter.Member{m}))
				}
			}
			for range r.IntN(10) {
				_ = d.AddMembers(name, []netfilter.Member{genMember(r, meta.Type, d.Family(), meta.Range)})
			}
		case 1: // keep a few, replace the rest
			keep := members[:len(members)/10]
			fresh := slices.Clone(keep)
			for range len(members) + r.IntN(20) {
				m := genMember(r, meta.Type, d.Family(), meta.Range)
				if d.AddMembers(name, []netfilter.Member{m}) == nil {
					fresh = append(fresh, m)
				}
			}
			if meta.Type != netfilter.BitmapPort && len(fresh) > meta.MaxSize {
				fresh = fresh[:meta.MaxSize]
			}
			require.NoError(t, d.AddOrReplaceSet(meta, fresh))
		case 2: // resize
			if meta.Type != netfilter.BitmapPort {
				meta.MaxSize = max(len(members), 1) + r.IntN(1000)
				require.NoError(t, d.AddOrReplaceSet(meta, members))
			}
		}
	}
}

// checkConverged checks that the kernel holds what d declares, and that a
// resync and a restarted driver write nothing.
func checkConverged(t *testing.T, e env, d *ipsets.IPSets, rec *recorder, names []string) {
	t.Helper()
	for _, name := range names {
		kname, _ := d.KernelName(name)
		meta, _ := d.Metadata(name)
		ks, ok := e.read(t, kname)
		require.True(t, ok, kname)
		var got []netfilter.Member
		for _, text := range ks.members {
			m, err := netfilter.ParseMember(meta.Type, text)
			require.NoError(t, err, "%s: the kernel's %q", kname, text)
			got = append(got, m)
		}
		slices.SortFunc(got, netfilter.Member.Compare)
		want, _ := d.Members(name)
		require.Equal(t, fmt.Sprint(want), fmt.Sprint(got), kname)
		if meta.Type == netfilter.BitmapPort {
			require.Equal(t, fmt.Sprintf("%d-%d", meta.Range.First, meta.Range.Last), ks.rng, kname)
		} else {
			require.Equal(t, strconv.Itoa(meta.MaxSize), ks.maxelem, kname)
		}
	}

	rec.reset()
	d.QueueResync()
	for range 20 {
		res, err := d.Apply(context.Background())
		require.NoError(t, err)
		if res.RetryAfter == 0 {
			break
		}
	}
	require.Zero(t, rec.count("restore"), "a resync after Apply writes nothing: %q", rec.last("restore"))

	again, rec2 := newDriver(t, e, d.Family(), func(o *ipsets.Options) { o.Prefix = d.Prefix() })
	for _, name := range names {
		meta, _ := d.Metadata(name)
		members, _ := d.Members(name)
		require.NoError(t, again.AddOrReplaceSet(meta, members))
	}
	_, err := again.Apply(context.Background())
	require.NoError(t, err)
	require.Zero(t, rec2.count("restore"), "a restarted driver writes nothing: %q", rec2.last("restore"))
}

// runProperty checks the property for one seed on e, for both families.
func runProperty(t *testing.T, e env, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for _, fam := range families {
		prefix := fmt.Sprintf("p%d-%s-", seed, fam)
		d, rec := newDriver(t, e, fam, func(o *ipsets.Options) { o.Prefix = prefix })
		names := genDeclare(t, r, d, e.netnet)
		_, err := d.Apply(context.Background())
		require.NoError(t, err, "seed %d: an accepted input is written", seed)
		checkConverged(t, e, d, rec, names)

		genChange(t, r, d, names)
		_, err = d.Apply(context.Background())
		require.NoError(t, err, "seed %d: an accepted change is written", seed)
		checkConverged(t, e, d, rec, names)
	}
}

// TestApplyThenResyncWritesNothing checks the property on the fake for
// many seeds.
func TestApplyThenResyncWritesNothing(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 30
	}
	for seed := range uint64(seeds) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			runProperty(t, fakeEnv(seed%2 == 0), seed)
		})
	}
}

// FuzzApplyThenResync checks the property on the fake for seeds chosen by
// the fuzzer (go test -fuzz FuzzApplyThenResync ./ipsets).
func FuzzApplyThenResync(f *testing.F) {
	for _, seed := range []uint64{0, 1, 42, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		runProperty(t, fakeEnv(seed%2 == 0), seed)
	})
}

// TestPropertyGeneratorCoversEdges makes sure the generator produces what the property is about:
// accepted sets of every type with edge members, and refused input.
func TestPropertyGeneratorCoversEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	for range 5000 {
		for _, fam := range families {
			typ := allTypes[r.IntN(len(allTypes))]
			m := genMember(r, typ, fam, netfilter.PortRange{First: 10, Last: 20})
			switch {
			case !m.Valid():
				seen["invalid"] = true
			case m.Addr().IsUnspecified():
				seen["zero"] = true
			case m.Addr().Is4In6():
				seen["4in6"] = true
			case m.Prefix().IsValid() && m.Prefix().Bits() < m.Prefix().Addr().BitLen():
				seen["prefix"] = true
			case m.Port() == math.MaxUint16:
				seen["port 65535"] = true
			}
		}
	}
	assert.Len(t, seen, 5, "%v", seen)
}

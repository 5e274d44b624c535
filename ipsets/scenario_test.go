package ipsets_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
)

// env is where a scenario runs: a kernelfake namespace in unit tests, a
// fresh network namespace opened with kernel.Open in kernel tests. Every
// scenario runs against both.
type env struct {
	// kernel is the namespace, as a driver is given it.
	kernel kernel.Commands
	// reference makes a kernel component (an iptables rule, or the fake's
	// reference count) hold the set; the returned func releases it.
	reference func(t *testing.T, kname string, fam ipsets.Family, typ netfilter.SetType) (release func())
	// netnet reports whether the kernel has hash:net,net.
	netnet bool
}

// ipset runs ipset with args in the namespace.
func (e env) ipset(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	return e.kernel.Runner().Run(ctx, stdin, "ipset", args...)
}

// cli runs one ipset command as an administrator would.
func (e env) cli(t *testing.T, args ...string) {
	t.Helper()
	_, err := e.ipset(context.Background(), nil, args...)
	require.NoError(t, err, "ipset %v", args)
}

// kset is a set as read back from the kernel with `ipset save NAME`.
type kset struct {
	typ     string
	family  string
	maxelem string
	rng     string
	members []string
}

func (e env) read(t *testing.T, kname string) (kset, bool) {
	t.Helper()
	out, err := e.ipset(context.Background(), nil, "save", kname)
	if err != nil {
		require.Contains(t, err.Error(), "does not exist")
		return kset{}, false
	}
	var ks kset
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != kname {
			continue
		}
		switch f[0] {
		case "create":
			ks.typ = f[2]
			for i := 3; i+1 < len(f); i++ {
				switch f[i] {
				case "family":
					ks.family = f[i+1]
				case "maxelem":
					ks.maxelem = f[i+1]
				case "range":
					ks.rng = f[i+1]
				}
			}
		case "add":
			ks.members = append(ks.members, f[2])
		}
	}
	slices.Sort(ks.members)
	return ks, true
}

func (e env) names(t *testing.T) []string {
	t.Helper()
	out, err := e.ipset(context.Background(), nil, "list", "-name")
	require.NoError(t, err)
	names := strings.Fields(string(out))
	slices.Sort(names)
	return names
}

// recorder is a namespace (kernel.Commands) whose runner wraps another
// namespace's: it records every call and can break the next restore: it
// feeds the kernel the first half of the script and then fails as a
// killed ipset would, naming no line, so the failure happens mid-apply and
// belongs to no set.
type recorder struct {
	r      command.Runner
	mu     sync.Mutex
	calls  []recCall
	break1 bool
}

type recCall struct {
	args  []string
	stdin string
}

// Runner returns the recorder itself.
func (r *recorder) Runner() command.Runner { return r }

func (r *recorder) Run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	var in []byte
	if stdin != nil {
		in, _ = io.ReadAll(stdin)
	}
	r.mu.Lock()
	r.calls = append(r.calls, recCall{args: slices.Clone(args), stdin: string(in)})
	breakIt := r.break1 && len(args) > 0 && args[0] == "restore"
	if breakIt {
		r.break1 = false
	}
	r.mu.Unlock()
	if breakIt {
		lines := strings.SplitAfter(string(in), "\n")
		half := strings.Join(lines[:len(lines)/2], "")
		if _, err := r.r.Run(ctx, strings.NewReader(half), name, args...); err != nil {
			return nil, err
		}
		return nil, &command.Error{Argv: append([]string{name}, args...), ExitCode: -1, Err: errors.New("signal: killed")}
	}
	var rd io.Reader
	if stdin != nil {
		rd = bytes.NewReader(in)
	}
	return r.r.Run(ctx, rd, name, args...)
}

func (r *recorder) count(sub string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		if len(c.args) > 0 && c.args[0] == sub {
			n++
		}
	}
	return n
}

func (r *recorder) last(sub string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.calls) - 1; i >= 0; i-- {
		if c := r.calls[i]; len(c.args) > 0 && c.args[0] == sub {
			return c.stdin
		}
	}
	return ""
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

// newDriver returns a driver of family fam with prefix "np4-"/"np6-" on
// e, behind a recorder.
func newDriver(t *testing.T, e env, fam ipsets.Family, opts ...func(*ipsets.Options)) (*ipsets.IPSets, *recorder) {
	t.Helper()
	rec := &recorder{r: e.kernel.Runner()}
	o := ipsets.Options{Family: fam, Prefix: prefixOf(fam), Kernel: rec}
	for _, f := range opts {
		f(&o)
	}
	d, err := ipsets.New(o)
	require.NoError(t, err)
	return d, rec
}

func prefixOf(fam ipsets.Family) string {
	if fam == ipsets.IPv6 {
		return "np6-"
	}
	return "np4-"
}

func apply(t *testing.T, d *ipsets.IPSets) {
	t.Helper()
	_, err := d.Apply(context.Background())
	require.NoError(t, err)
	_, err = d.ApplyDeletions(context.Background())
	require.NoError(t, err)
}

var families = []ipsets.Family{ipsets.IPv4, ipsets.IPv6}

// typeCase is one set type with members for each family: the members
// given to the driver (some not in canonical form), what the kernel must
// then hold, and a change (adds, removes) with its expected result.
type typeCase struct {
	typ     netfilter.SetType
	rng     netfilter.PortRange
	initial func(fam ipsets.Family) []netfilter.Member
	want    func(fam ipsets.Family) []string
	add     func(fam ipsets.Family) []netfilter.Member
	remove  func(fam ipsets.Family) []netfilter.Member
	after   func(fam ipsets.Family) []string
}

func addr(fam ipsets.Family, v4, v6 string) netip.Addr {
	if fam == ipsets.IPv6 {
		return netip.MustParseAddr(v6)
	}
	return netip.MustParseAddr(v4)
}

func pfx(fam ipsets.Family, v4, v6 string) netip.Prefix {
	if fam == ipsets.IPv6 {
		return netip.MustParsePrefix(v6)
	}
	return netip.MustParsePrefix(v4)
}

func pick(fam ipsets.Family, v4, v6 []string) []string {
	out := v4
	if fam == ipsets.IPv6 {
		out = v6
	}
	out = slices.Clone(out)
	slices.Sort(out)
	return out
}

var typeCases = []typeCase{
	{
		typ: netfilter.HashIP,
		initial: func(f ipsets.Family) []netfilter.Member {
			return []netfilter.Member{
				netfilter.IPMember(addr(f, "10.0.0.1", "fd00::1")),
				netfilter.IPMember(addr(f, "10.0.0.2", "fd00::2")),
				netfilter.NetMember(pfx(f, "10.0.0.3/32", "fd00::3/128")),
			}
		},
		want: func(f ipsets.Family) []string {
			return pick(f, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, []string{"fd00::1", "fd00::2", "fd00::3"})
		},
		add: func(f ipsets.Family) []netfilter.Member {
			return []netfilter.Member{netfilter.IPMember(addr(f, "10.0.0.9", "fd00::9"))}
		},
		remove: func(f ipsets.Family) []netfilter.Member {
			return []netfilter.Member{netfilter.IPMember(addr(f, "10.0.0.1", "fd00::1"))}
		},
		after: func(f ipsets.Family) []string {
			return pick(f, []string{"10.0.0.2", "10.0.0.3", "10.0.0.9"}, []string{"fd00::2", "fd00::3", "fd00::9"})
		},
	},
	{
		typ: netfilter.HashNet,
		initial: func(f ipsets.Family) []netfilter.Member {
			return []netfilter.Member{
				netfilter.NetMember(pfx(f, "10.0.0.1/32", "fd00::1/128")),
				netfilter.NetMember(pfx(f, "10.1.0.0/16", "fd00:1:2::/48")),
				netfilter.NetMember(pfx(f, "10.2.0.0/24", "fd00:2::/64")),
			}
		},
		want: func(f ipsets.Family) []string {
			return pick(f, []string{"10.0.0.1", "10.1.0.0/16", "10.2.0.0/24"}, []string{"fd00::1", "fd00:1:2::/48", "fd00:2::/64"})
		},
		add: func(f ipsets.Family) []netfilter.Member {
			return []netfilter.Member{netfilter.NetMember(pfx(f, "192.168.0.0/16", "fd09::/32"))}
		},
		remove: func(f ipsets.Family) []netfilter.Member {
			return []netfilter.Member{netfilter.IPMember(addr(f, "10.0.0.1", "fd00::1"))}
		},
		after: func(f ipsets.Family) []string {
			return pick(f, []string{"10.1.0.0/16", "10.2.0.0/24", "192.168.0.0/16"}, []string{"fd00:1:2::/48", "fd00:2::/64", "fd09::/32"})
		},
	},
	{
		typ: netfilter.HashIPPort,
		initial: func(f ipsets.Family) []netfilter.Member {
			a := addr(f, "10.0.0.1", "fd00::1")
			return []netfilter.Member{
				netfilter.IPPortMember(a, netfilter.ProtoTCP, 80),
				netfilter.IPPortMember(a, netfilter.ProtoUDP, 53),
				netfilter.IPPortMember(a, netfilter.ProtoSCTP, 9),
			}
		},
		want: func(f ipsets.Family) []string {
			return pick(f, []string{"10.0.0.1,sctp:9", "10.0.0.1,tcp:80", "10.0.0.1,udp:53"}, []string{"fd00::1,sctp:9", "fd00::1,tcp:80", "fd00::1,udp:53"})
		},
		add: func(f ipsets.Family) []netfilter.Member {
			return []netfilter.Member{netfilter.IPPortMember(addr(f, "10.0.0.2", "fd00::2"), netfilter.ProtoTCP, 443)}
		},
		remove: func(f ipsets.Family) []netfilter.Member {
			return []netfilter.Member{netfilter.IPPortMember(addr(f, "10.0.0.1", "fd00::1"), netfilter.ProtoUDP, 53)}
		},
		after: func(f ipsets.Family) []string {
			return pick(f, []string{"10.0.0.1,sctp:9", "10.0.0.1,tcp:80", "10.0.0.2,tcp:443"}, []string{"fd00::1,sctp:9", "fd00::1,tcp:80", "fd00::2,tcp:443"})
		},
	},
	{
		typ: netfilter.HashNetNet,
		initial: func(f ipsets.Family) []netfilter.Member {
			return []netfilter.Member{
				netfilter.NetNetMember(pfx(f, "10.0.0.0/8", "fd00::/16"), pfx(f, "192.168.0.0/16", "fd01::/32")),
				netfilter.NetNetMember(pfx(f, "10.0.0.1/32", "fd00::1/128"), pfx(f, "10.0.0.2/32", "fd00::2/128")),
			}
		},
		want: func(f ipsets.Family) []string {
			return pick(f, []string{"10.0.0.0/8,192.168.0.0/16", "10.0.0.1,10.0.0.2"}, []string{"fd00::/16,fd01::/32", "fd00::1,fd00::2"})
		},
		add: func(f ipsets.Family) []netfilter.Member {
			return []netfilter.Member{netfilter.NetNetMember(pfx(f, "172.16.0.0/12", "fd02::/24"), pfx(f, "172.16.0.0/12", "fd02::/24"))}
		},
		remove: func(f ipsets.Family) []netfilter.Member {
			return []netfilter.Member{netfilter.NetNetMember(pfx(f, "10.0.0.1/32", "fd00::1/128"), pfx(f, "10.0.0.2/32", "fd00::2/128"))}
		},
		after: func(f ipsets.Family) []string {
			return pick(f, []string{"10.0.0.0/8,192.168.0.0/16", "172.16.0.0/12,172.16.0.0/12"}, []string{"fd00::/16,fd01::/32", "fd02::/24,fd02::/24"})
		},
	},
	{
		typ: netfilter.BitmapPort,
		rng: netfilter.PortRange{First: 1, Last: 1024},
		initial: func(ipsets.Family) []netfilter.Member {
			return []netfilter.Member{netfilter.PortMember(22), netfilter.PortMember(80), netfilter.PortMember(443)}
		},
		want:   func(ipsets.Family) []string { return pick(0, []string{"22", "443", "80"}, nil) },
		add:    func(ipsets.Family) []netfilter.Member { return []netfilter.Member{netfilter.PortMember(1024)} },
		remove: func(ipsets.Family) []netfilter.Member { return []netfilter.Member{netfilter.PortMember(22)} },
		after:  func(ipsets.Family) []string { return pick(0, []string{"1024", "443", "80"}, nil) },
	},
}

// unsupported reports whether typ is missing from e's kernel. It says so in
// the test output and checks that the driver reports the absence as a clear
// error, so the subtest still verifies something real; the type's behaviour
// is covered by the fake (which runs as a kernel with every type).
func unsupported(t *testing.T, e env, typ netfilter.SetType) bool {
	t.Helper()
	if typ != netfilter.HashNetNet || e.netnet {
		return false
	}
	t.Log("this kernel has no hash:net,net (CONFIG_IP_SET_HASH_NETNET is not set): checking the clear error; the type's behaviour is covered by the fake")
	scenarioUnsupportedType(t, e)
	return true
}

// scenarios is the suite run against the fake and the real kernel.
var scenarios = []struct {
	name string
	run  func(t *testing.T, e env)
}{
	{"EveryType", scenarioEveryType},
	{"SwapOnResize", scenarioSwapOnResize},
	{"TypeChange", scenarioTypeChange},
	{"ExternalEditsRepaired", scenarioExternalEdits},
	{"DeletionDeferredWhileReferenced", scenarioDeferredDeletion},
	{"RestartAdoptionWritesNothing", scenarioRestartAdoption},
	{"FailureMidApplyConverges", scenarioFailureConverges},
	{"UnsupportedTypeIsAnError", scenarioUnsupportedType},
	{"ForeignHeaderReplaced", scenarioForeignHeader},
	{"MissingSetsRepairedWithoutMemberRecheck", scenarioMissingSets},
	{"OneBadSetHoldsNoOtherBack", scenarioOneBadSet},
	{"HostBitsRejected", scenarioHostBits},
}

func scenarioEveryType(t *testing.T, e env) {
	for _, tc := range typeCases {
		for _, fam := range families {
			t.Run(string(tc.typ)+"/"+fam.String(), func(t *testing.T) {
				if unsupported(t, e, tc.typ) {
					return
				}
				d, rec := newDriver(t, e, fam)
				meta := netfilter.SetMetadata{Name: "s", Type: tc.typ, Range: tc.rng}
				require.NoError(t, d.AddOrReplaceSet(meta, tc.initial(fam)))
				apply(t, d)
				ks, ok := e.read(t, prefixOf(fam)+"s")
				require.True(t, ok)
				assert.Equal(t, string(tc.typ), ks.typ)
				if tc.typ == netfilter.BitmapPort {
					assert.Equal(t, fmt.Sprintf("%d-%d", tc.rng.First, tc.rng.Last), ks.rng)
				} else {
					assert.Equal(t, ipsets.FamilyName(fam), ks.family)
					assert.Equal(t, "1048576", ks.maxelem)
				}
				assert.Equal(t, tc.want(fam), ks.members)

				require.NoError(t, d.AddMembers("s", tc.add(fam)))
				require.NoError(t, d.RemoveMembers("s", tc.remove(fam)))
				rec.reset()
				apply(t, d)
				ks, _ = e.read(t, prefixOf(fam)+"s")
				assert.Equal(t, tc.after(fam), ks.members)
				assert.Equal(t, 1, rec.count("restore"), "one restore per apply")
				assert.NotContains(t, rec.last("restore"), "create", "a member change does not recreate")

				got, ok := d.Members("s")
				require.True(t, ok)
				strs := make([]string, len(got))
				for i, m := range got {
					strs[i] = m.String()
				}
				slices.Sort(strs)
				assert.Equal(t, tc.after(fam), strs, "desired members read back")

				// Nothing changed: nothing written.
				rec.reset()
				apply(t, d)
				assert.Zero(t, rec.count("restore"))
			})
		}
	}
}

func manyIPs(fam ipsets.Family, n int) []netfilter.Member {
	out := make([]netfilter.Member, n)
	for i := range n {
		if fam == ipsets.IPv6 {
			out[i] = netfilter.IPMember(netip.AddrFrom16([16]byte{0: 0xfd, 14: byte(i >> 8), 15: byte(i)}))
		} else {
			out[i] = netfilter.IPMember(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}))
		}
	}
	return out
}

func scenarioSwapOnResize(t *testing.T, e env) {
	for _, fam := range families {
		t.Run(fam.String(), func(t *testing.T) {
			d, rec := newDriver(t, e, fam)
			members := manyIPs(fam, 300)
			require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: 1000}, members))
			require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "ports", Type: netfilter.BitmapPort, Range: netfilter.PortRange{First: 1, Last: 100}},
				[]netfilter.Member{netfilter.PortMember(22)}))
			apply(t, d)
			release := e.reference(t, prefixOf(fam)+"s", fam, netfilter.HashIP)
			defer release()

			require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: 2000}, members[:200]))
			require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "ports", Type: netfilter.BitmapPort, Range: netfilter.PortRange{First: 1, Last: 2000}},
				[]netfilter.Member{netfilter.PortMember(22), netfilter.PortMember(1500)}))
			rec.reset()
			apply(t, d)
			script := rec.last("restore")
			assert.Contains(t, script, "swap "+prefixOf(fam)+"s "+prefixOf(fam)+"~0\n")
			assert.Contains(t, script, "swap "+prefixOf(fam)+"ports "+prefixOf(fam)+"~0\n")
			assert.Equal(t, 1, rec.count("restore"))

			ks, ok := e.read(t, prefixOf(fam)+"s")
			require.True(t, ok)
			assert.Equal(t, "2000", ks.maxelem)
			assert.Len(t, ks.members, 200)
			ks, _ = e.read(t, prefixOf(fam)+"ports")
			assert.Equal(t, "1-2000", ks.rng)
			assert.Equal(t, []string{"1500", "22"}, ks.members)
			assert.NotContains(t, e.names(t), prefixOf(fam)+"~0", "temporary set destroyed")
		})
	}
}

func scenarioTypeChange(t *testing.T, e env) {
	clk := clock.NewFake(time.Unix(0, 0))
	d, rec := newDriver(t, e, ipsets.IPv4, func(o *ipsets.Options) { o.Clock = clk })
	a := netip.MustParseAddr("10.0.0.1")
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "free", Type: netfilter.HashIP}, []netfilter.Member{netfilter.IPMember(a)}))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "held", Type: netfilter.HashIP}, []netfilter.Member{netfilter.IPMember(a)}))
	apply(t, d)
	release := e.reference(t, "np4-held", ipsets.IPv4, netfilter.HashIP)
	defer release()

	net := netfilter.NetMember(netip.MustParsePrefix("10.0.0.0/8"))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "free", Type: netfilter.HashNet}, []netfilter.Member{net}))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "held", Type: netfilter.HashNet}, []netfilter.Member{net}))
	res, err := d.Apply(context.Background())
	require.ErrorIs(t, err, netfilter.ErrSetInUse)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.Contains(t, err.Error(), "set np4-held: ")
	assert.Equal(t, ipsets.DefaultRetryInterval, res.RetryAfter)

	ks, _ := e.read(t, "np4-free")
	assert.Equal(t, "hash:net", ks.typ, "an unreferenced set is recreated with its new type")
	assert.Equal(t, []string{"10.0.0.0/8"}, ks.members)
	ks, _ = e.read(t, "np4-held")
	assert.Equal(t, "hash:ip", ks.typ, "a referenced set keeps its type")
	assert.Equal(t, []string{"10.0.0.1"}, ks.members)

	release()
	rec.reset()
	clk.Advance(res.RetryAfter)
	apply(t, d)
	ks, _ = e.read(t, "np4-held")
	assert.Equal(t, "hash:net", ks.typ, "recreated once the reference is gone")
	assert.Equal(t, []string{"10.0.0.0/8"}, ks.members)
}

func scenarioExternalEdits(t *testing.T, e env) {
	var changes []netfilter.MemberChange
	d, _ := newDriver(t, e, ipsets.IPv4, func(o *ipsets.Options) {
		o.OnMemberChange = func(c netfilter.MemberChange) { changes = append(changes, c) }
	})
	e.cli(t, "create", "foreign", "hash:ip", "family", "inet")
	e.cli(t, "add", "foreign", "192.0.2.1")
	e.cli(t, "create", "np4-leftover", "hash:ip", "family", "inet")

	ips := manyIPs(ipsets.IPv4, 3)
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "a", Type: netfilter.HashIP}, ips))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "b", Type: netfilter.HashIP}, ips[:1]))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "c", Type: netfilter.HashIPPort},
		[]netfilter.Member{netfilter.IPPortMember(ips[0].Addr(), netfilter.ProtoTCP, 80)}))
	apply(t, d)
	assert.Equal(t, []string{"foreign", "np4-a", "np4-b", "np4-c"}, e.names(t), "the leftover set of ours is destroyed")
	assert.Len(t, changes, 5)

	// Foreign edits: a member added, one removed, a whole set destroyed,
	// an entry the driver cannot represent, and a new leftover.
	e.cli(t, "add", "np4-a", "10.9.9.9")
	e.cli(t, "del", "np4-a", ips[1].String())
	e.cli(t, "destroy", "np4-b")
	e.cli(t, "add", "np4-c", "10.1.0.0,icmp:8/0")
	e.cli(t, "create", "np4-stray", "hash:net", "family", "inet")
	changes = nil

	d.QueueResync()
	apply(t, d)
	ks, _ := e.read(t, "np4-a")
	assert.Equal(t, []string{"10.1.0.0", "10.1.0.1", "10.1.0.2"}, ks.members)
	ks, ok := e.read(t, "np4-b")
	require.True(t, ok, "the destroyed set is recreated")
	assert.Equal(t, []string{"10.1.0.0"}, ks.members)
	ks, _ = e.read(t, "np4-c")
	assert.Equal(t, []string{"10.1.0.0,tcp:80"}, ks.members)
	assert.Equal(t, []string{"foreign", "np4-a", "np4-b", "np4-c"}, e.names(t))
	ks, _ = e.read(t, "foreign")
	assert.Equal(t, []string{"192.0.2.1"}, ks.members, "the foreign set is untouched")
	assert.ElementsMatch(t, []netfilter.MemberChange{
		{Set: "a", Member: netfilter.IPMember(netip.MustParseAddr("10.9.9.9")), Added: false},
		{Set: "a", Member: ips[1], Added: true},
		{Set: "b", Member: ips[0], Added: true},
	}, changes)
}

func scenarioDeferredDeletion(t *testing.T, e env) {
	for _, fam := range families {
		t.Run(fam.String(), func(t *testing.T) {
			clk := clock.NewFake(time.Unix(0, 0))
			d, rec := newDriver(t, e, fam, func(o *ipsets.Options) { o.Clock = clk })
			require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "held", Type: netfilter.HashNet}, manyIPs(fam, 2)))
			require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "other", Type: netfilter.HashIP}, manyIPs(fam, 2)))
			apply(t, d)
			release := e.reference(t, prefixOf(fam)+"held", fam, netfilter.HashNet)
			defer release()
			require.NoError(t, d.RemoveSet("held"))
			require.NoError(t, d.RemoveSet("other"))
			_, held := d.Members("held")
			assert.False(t, held)

			ctx := context.Background()
			_, err := d.Apply(ctx)
			require.NoError(t, err)
			var waits []time.Duration
			for i := range 5 {
				if i == 3 {
					clk.Advance(ipsets.DefaultRetryInterval) // held is due again
				}
				res, err := d.ApplyDeletions(ctx)
				require.ErrorIs(t, err, dataplane.ErrPartial, "a set in use fails alone, not the driver")
				require.ErrorIs(t, err, netfilter.ErrSetInUse)
				assert.Contains(t, err.Error(), "set "+prefixOf(fam)+"held: ")
				waits = append(waits, res.RetryAfter)
			}
			assert.Equal(t, []string{prefixOf(fam) + "held"}, e.names(t), "the set in use stays, the other is gone")
			r := ipsets.DefaultRetryInterval
			assert.Equal(t, []time.Duration{r, r, r, 2 * r, 2 * r}, waits, "the set in use backs off on its own")
			assert.Equal(t, 3, rec.count("destroy"), "held, then other while held waits, then held once due")

			release()
			clk.Advance(2 * r)
			res, err := d.ApplyDeletions(ctx)
			require.NoError(t, err)
			assert.Zero(t, res.RetryAfter)
			assert.Empty(t, e.names(t))
		})
	}
}

func scenarioRestartAdoption(t *testing.T, e env) {
	for _, fam := range families {
		t.Run(fam.String(), func(t *testing.T) {
			e.cli(t, "create", "foreign-"+fam.String(), "hash:ip", "family", ipsets.FamilyName(fam))
			declare := func(d *ipsets.IPSets) {
				t.Helper()
				for _, tc := range typeCases {
					if tc.typ == netfilter.HashNetNet && !e.netnet {
						continue
					}
					require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: strings.NewReplacer(":", "-", ",", "-").Replace(string(tc.typ)), Type: tc.typ, Range: tc.rng}, tc.initial(fam)))
				}
				require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "big", Type: netfilter.HashIP, MaxSize: 5000}, manyIPs(fam, 2000)))
			}
			first, _ := newDriver(t, e, fam)
			declare(first)
			apply(t, first)
			before := e.names(t)

			second, rec := newDriver(t, e, fam)
			declare(second)
			apply(t, second)
			assert.Zero(t, rec.count("restore"), "a restarted driver writes nothing")
			assert.Zero(t, rec.count("destroy"))
			assert.Equal(t, before, e.names(t))

			rec.reset()
			second.QueueResync()
			for range 10 {
				apply(t, second)
			}
			assert.Zero(t, rec.count("restore"), "a periodic resync of an unchanged kernel writes nothing")
		})
	}
}

func scenarioFailureConverges(t *testing.T, e env) {
	d, rec := newDriver(t, e, ipsets.IPv4)
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "a", Type: netfilter.HashIP}, manyIPs(ipsets.IPv4, 100)))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "b", Type: netfilter.HashNet}, manyIPs(ipsets.IPv4, 100)))
	rec.break1 = true
	_, err := d.Apply(context.Background())
	require.ErrorIs(t, err, ipsets.ErrRestore)
	require.NotErrorIs(t, err, dataplane.ErrPartial, "a killed restore is no set's failure")
	var rerr *command.RestoreError
	require.ErrorAs(t, err, &rerr)
	assert.Zero(t, rerr.Line)
	assert.Contains(t, rerr.Excerpt(), "      1  create np4-a ", "the first lines are quoted")
	assert.True(t, strings.HasPrefix(err.Error(), "ipsets: ipset restore failed: ipset restore: "), err.Error())
	assert.Contains(t, err.Error(), "signal: killed")

	apply(t, d)
	for _, name := range []string{"np4-a", "np4-b"} {
		ks, ok := e.read(t, name)
		require.True(t, ok)
		assert.Len(t, ks.members, 100, name)
	}
	rec.reset()
	apply(t, d)
	assert.Zero(t, rec.count("restore"), "converged")
}

func scenarioUnsupportedType(t *testing.T, e env) {
	if e.netnet {
		t.Log("the kernel has every type: nothing is unsupported")
		return
	}
	d, _ := newDriver(t, e, ipsets.IPv4)
	p := netip.MustParsePrefix("10.0.0.0/8")
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "nn", Type: netfilter.HashNetNet}, []netfilter.Member{netfilter.NetNetMember(p, p)}))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "ok", Type: netfilter.HashNet}, []netfilter.Member{netfilter.NetMember(p)}))
	_, err := d.Apply(context.Background())
	require.ErrorIs(t, err, ipsets.ErrRestore)
	require.ErrorIs(t, err, dataplane.ErrPartial, "the set fails alone")
	assert.Contains(t, err.Error(), "set np4-nn: ")
	assert.Contains(t, err.Error(), "set type not supported")
	ks, ok := e.read(t, "np4-ok")
	require.True(t, ok, "the other set is written")
	assert.Equal(t, []string{"10.0.0.0/8"}, ks.members)
}

func scenarioForeignHeader(t *testing.T, e env) {
	// A set of ours made by hand with options the driver never sets.
	e.cli(t, "create", "np4-x", "hash:ip", "family", "inet", "maxelem", "1048576", "counters")
	e.cli(t, "add", "np4-x", "10.0.0.1")
	e.cli(t, "add", "np4-x", "10.0.0.2")
	d, rec := newDriver(t, e, ipsets.IPv4)
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "x", Type: netfilter.HashIP}, []netfilter.Member{
		netfilter.IPMember(netip.MustParseAddr("10.0.0.1")), netfilter.IPMember(netip.MustParseAddr("10.0.0.3")),
	}))
	apply(t, d)
	assert.Contains(t, rec.last("restore"), "swap np4-x np4-~0\n")
	ks, _ := e.read(t, "np4-x")
	assert.Equal(t, []string{"10.0.0.1", "10.0.0.3"}, ks.members)
	out, err := e.ipset(context.Background(), nil, "save", "np4-x")
	require.NoError(t, err)
	assert.NotContains(t, string(out), "counters")
	rec.reset()
	apply(t, d)
	assert.Zero(t, rec.count("restore"))
}

func scenarioMissingSets(t *testing.T, e env) {
	d, rec := newDriver(t, e, ipsets.IPv6, func(o *ipsets.Options) { o.ResyncBudget = time.Nanosecond })
	for _, name := range []string{"a", "b", "c"} {
		require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: name, Type: netfilter.HashIP}, manyIPs(ipsets.IPv6, 3)))
	}
	apply(t, d)
	e.cli(t, "destroy", "np6-b")
	e.cli(t, "create", "np6-stray", "hash:ip", "family", "inet6")
	e.cli(t, "add", "np6-c", "fd00::99")
	rec.reset()
	d.QueueResync()
	res, err := d.Apply(context.Background())
	require.NoError(t, err)
	assert.Positive(t, res.RetryAfter, "rechecks remain")
	assert.Equal(t, 2, rec.count("save"), "the unknown leftover and one queued set are read (budget spent)")
	_, ok := e.read(t, "np6-b")
	assert.True(t, ok, "a missing set is recreated in the same apply")
	_, err = d.ApplyDeletions(context.Background())
	require.NoError(t, err)
	assert.NotContains(t, e.names(t), "np6-stray", "a leftover is destroyed at once")
	for range 5 {
		apply(t, d)
	}
	ks, _ := e.read(t, "np6-c")
	assert.NotContains(t, ks.members, "fd00::99", "the foreign member is found by a later recheck")
}

// scenarioOneBadSet: sets the kernel refuses — one whose name a set of
// another type took behind the driver's back, one a foreign member has
// filled — fail alone. Everything else is written in the same Apply, the
// error wraps dataplane.ErrPartial and names them, and each is retried on
// its own backoff, or at once when its declaration changes.
func scenarioOneBadSet(t *testing.T, e env) {
	clk := clock.NewFake(time.Unix(0, 0))
	d, rec := newDriver(t, e, ipsets.IPv4, func(o *ipsets.Options) { o.Clock = clk })
	ips := manyIPs(ipsets.IPv4, 4)
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "a", Type: netfilter.HashIP}, ips[:1]))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "full", Type: netfilter.HashIP, MaxSize: 2}, ips[:1]))
	apply(t, d)
	e.cli(t, "create", "np4-b", "hash:net", "family", "inet")
	e.cli(t, "add", "np4-b", "192.0.2.0/24")
	e.cli(t, "add", "np4-full", "192.0.2.9")

	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "b", Type: netfilter.HashIP}, ips[:2]))
	require.NoError(t, d.AddMembers("a", ips[1:3]))
	require.NoError(t, d.AddMembers("full", ips[1:2]))
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "c", Type: netfilter.HashIP}, ips))
	rec.reset()
	ctx := context.Background()
	res, err := d.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	require.ErrorIs(t, err, ipsets.ErrRestore)
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 2, pe.Failed)
	text := err.Error()
	assert.True(t, strings.HasPrefix(text, "ipsets: 2 object(s) failed; write set np4-b: "), text)
	assert.Equal(t, 1, strings.Count(text, "ipsets: "), text)
	assert.Contains(t, text, "set with the same name already exists")
	assert.Contains(t, text, "; write set np4-full: ")
	assert.Contains(t, text, "Hash is full")
	assert.Equal(t, ipsets.DefaultRetryInterval, res.RetryAfter)
	assert.LessOrEqual(t, rec.count("restore"), 3, "one restore, and one more after each failed set")

	ks, _ := e.read(t, "np4-a")
	assert.Len(t, ks.members, 3, "the good sets are written in the same Apply")
	ks, _ = e.read(t, "np4-c")
	assert.Len(t, ks.members, 4)
	ks, _ = e.read(t, "np4-b")
	assert.Equal(t, "hash:net", ks.typ, "the failed set is left alone")
	assert.Equal(t, []string{"192.0.2.0/24"}, ks.members)

	// Not due yet: nothing is tried, the failures are still reported.
	rec.reset()
	res, err = d.Apply(ctx)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, dataplane.PartialError{Driver: "ipsets", Failed: 0, Waiting: 2, Errs: pe.Errs}, *pe)
	assert.Equal(t, ipsets.DefaultRetryInterval, res.RetryAfter)
	assert.Zero(t, rec.count("restore"))

	// A new declaration is tried at once; the other waits for its turn.
	require.NoError(t, d.AddMembers("b", ips[2:3]))
	res, err = d.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.NotContains(t, err.Error(), "np4-b")
	ks, _ = e.read(t, "np4-b")
	assert.Equal(t, "hash:ip", ks.typ, "the unreferenced set is recreated with its declared type")
	assert.Len(t, ks.members, 3)

	clk.Advance(res.RetryAfter)
	apply(t, d)
	ks, _ = e.read(t, "np4-full")
	assert.Equal(t, []string{"10.1.0.0", "10.1.0.1"}, ks.members, "the full set is swapped in without the foreign member")
	rec.reset()
	d.QueueResync()
	apply(t, d)
	assert.Zero(t, rec.count("restore"), "converged")
}

// scenarioHostBitsRejected: a prefix with host bits set is refused at the
// API, naming it, and nothing is written.
func scenarioHostBits(t *testing.T, e env) {
	for _, fam := range families {
		t.Run(fam.String(), func(t *testing.T) {
			d, rec := newDriver(t, e, fam)
			good := netfilter.NetMember(pfx(fam, "10.0.0.0/24", "fd00::/64"))
			require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "n", Type: netfilter.HashNet}, []netfilter.Member{good}))
			apply(t, d)
			before, _ := e.read(t, prefixOf(fam)+"n")
			rec.reset()

			bad := pfx(fam, "10.0.0.1/24", "fd00::1/64")
			for _, call := range []func() error{
				func() error {
					return d.AddOrReplaceSet(netfilter.SetMetadata{Name: "n", Type: netfilter.HashNet}, []netfilter.Member{netfilter.NetMember(bad)})
				},
				func() error {
					return d.AddOrReplaceSet(netfilter.SetMetadata{Name: "other", Type: netfilter.HashNet}, []netfilter.Member{netfilter.NetMember(bad)})
				},
				func() error { return d.AddMembers("n", []netfilter.Member{netfilter.NetMember(bad)}) },
				func() error {
					return d.AddOrReplaceSet(netfilter.SetMetadata{Name: "nn", Type: netfilter.HashNetNet}, []netfilter.Member{netfilter.NetNetMember(good.Prefix(), bad)})
				},
			} {
				err := call()
				require.ErrorIs(t, err, ipfamily.ErrHostBits)
				require.ErrorIs(t, err, netfilter.ErrInvalidMember)
				assert.Contains(t, err.Error(), bad.String()+" has host bits set")
			}
			apply(t, d)
			assert.Zero(t, rec.count("restore"), "nothing written")
			after, _ := e.read(t, prefixOf(fam)+"n")
			assert.Equal(t, before, after)
			assert.NotContains(t, e.names(t), prefixOf(fam)+"other")
			assert.NotContains(t, e.names(t), prefixOf(fam)+"nn")
		})
	}
}

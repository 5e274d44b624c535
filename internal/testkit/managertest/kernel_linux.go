//go:build linux

package managertest

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// Backend is one writer of the rule model that the managers' kernel tests
// run on.
type Backend struct {
	// Name names the backend in subtests: "iptables-legacy",
	// "iptables-nft".
	Name string
	// Commands are the binaries the backend needs; ForEachBackend requires
	// them.
	Commands []string
	// NewTable returns a Table of the named table ("filter" or "nat") and
	// family in the namespace k, owning the chains that start with prefix.
	NewTable func(t testing.TB, k *kernel.Namespace, table string, f ipfamily.Family, prefix string) netfilter.Table
	// Sets returns the set driver whose sets the rules of tbl match
	// (netfilter.MatchSet): the kernel's ip sets through package ipsets
	// (named with prefix, run through cmds) for iptables, the Table's own
	// nftables sets (an *nftables.IPSets, named with prefix) for nftables.
	Sets func(t testing.TB, cmds kernel.Commands, tbl netfilter.Table, f ipfamily.Family, prefix string) netfilter.Sets
	// Dump returns the backend's view of a table of family f in ns, for
	// logs and for checking how a rule was rendered.
	Dump func(t testing.TB, ns *kerneltest.NS, table string, f ipfamily.Family) string
}

// Backends returns every netfilter.Table writer the managers are tested
// on: iptables (legacy and nft) and the native nftables writer. A new
// writer joins with one entry here.
func Backends() []Backend {
	return []Backend{
		iptablesBackend(iptables.BackendLegacy),
		iptablesBackend(iptables.BackendNFT),
		nftablesBackend(),
	}
}

// nftablesBackend is package nftables' Table: each Table owns an nftables
// table of its own, named after its chain prefix and role ("npm-nat").
func nftablesBackend() Backend {
	name := func(table, prefix string) string { return prefix + table }
	return Backend{
		Name:     "nftables",
		Commands: []string{"nft"},
		NewTable: func(t testing.TB, k *kernel.Namespace, table string, f ipfamily.Family, prefix string) netfilter.Table {
			t.Helper()
			tbl, err := nftables.New(nftables.Options{Name: name(table, prefix), Family: f, Role: nftables.Role(table), ChainPrefix: prefix, Kernel: k})
			require.NoError(t, err)
			t.Cleanup(func() { _ = tbl.Close() })
			return tbl
		},
		Sets: func(t testing.TB, _ kernel.Commands, tbl netfilter.Table, f ipfamily.Family, prefix string) netfilter.Sets {
			t.Helper()
			nt, ok := tbl.(*nftables.Table)
			require.True(t, ok, "the sets of an nftables backend are a Table's")
			require.Equal(t, f, nt.Options().Family)
			sets, err := nftables.NewIPSets(nt, nftables.IPSetsOptions{Prefix: prefix})
			require.NoError(t, err)
			return sets
		},
		Dump: func(t testing.TB, ns *kerneltest.NS, table string, f ipfamily.Family) string {
			t.Helper()
			fam := "ip"
			if f == ipfamily.IPv6 {
				fam = "ip6"
			}
			// Every table of the family: which one holds the manager's
			// chains depends on its prefix.
			out, err := ns.Exec(context.Background(), "nft", "list", "ruleset", fam)
			require.NoError(t, err)
			return string(out)
		},
	}
}

func iptablesBackend(b iptables.Backend) Backend {
	return Backend{
		Name: "iptables-" + b.String(),
		Commands: []string{
			b.RestoreCommand(ipfamily.IPv4), b.SaveCommand(ipfamily.IPv4),
			b.RestoreCommand(ipfamily.IPv6), b.SaveCommand(ipfamily.IPv6),
		},
		NewTable: func(t testing.TB, k *kernel.Namespace, table string, f ipfamily.Family, prefix string) netfilter.Table {
			t.Helper()
			tbl, err := iptables.New(iptables.Options{Table: table, Family: f, Backend: b, ChainPrefix: prefix, Kernel: k})
			require.NoError(t, err)
			return tbl
		},
		Sets: func(t testing.TB, cmds kernel.Commands, _ netfilter.Table, f ipfamily.Family, prefix string) netfilter.Sets {
			t.Helper()
			sets, err := ipsets.New(ipsets.Options{Family: f, Prefix: prefix, Kernel: cmds})
			require.NoError(t, err)
			return sets
		},
		Dump: func(t testing.TB, ns *kerneltest.NS, table string, f ipfamily.Family) string {
			t.Helper()
			out, err := ns.Exec(context.Background(), b.SaveCommand(f), "-t", table)
			require.NoError(t, err)
			return string(out)
		},
	}
}

// ForEachBackend runs fn in a subtest per backend, after checking that the
// backends' binaries are there.
func ForEachBackend(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range Backends() {
		kerneltest.RequireCommands(t, b.Commands...)
		t.Run(b.Name, func(t *testing.T) { fn(t, b) })
	}
}

// ForEachFamily runs fn in a subtest per IP family.
func ForEachFamily(t *testing.T, fn func(t *testing.T, f ipfamily.Family)) {
	t.Helper()
	for _, f := range ipfamily.All {
		t.Run(f.String(), func(t *testing.T) { fn(t, f) })
	}
}

// Stack returns the kerneltest stack of family f alone.
func Stack(f ipfamily.Family) kerneltest.Stack {
	if f == ipfamily.IPv6 {
		return kerneltest.IPv6Only
	}
	return kerneltest.IPv4Only
}

// Open opens the kernel.Namespace of a test namespace, closed when the
// test ends.
func Open(t testing.TB, ns *kerneltest.NS) *kernel.Namespace {
	t.Helper()
	k, err := kernel.Open(ns.Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close() })
	return k
}

// Flow is one conntrack entry as `conntrack -L` prints it.
type Flow struct {
	// Proto is the protocol's name, such as "tcp".
	Proto string
	// Src, Dst, SPort and DPort are the original direction's.
	Src, Dst     netip.Addr
	SPort, DPort uint16
	// ReplySrc, ReplyDst, ReplySPort and ReplyDPort are the reply
	// direction's: a source NAT shows as a ReplyDst that is not Src, a
	// destination NAT as a ReplySrc that is not Dst.
	ReplySrc, ReplyDst     netip.Addr
	ReplySPort, ReplyDPort uint16
	// Line is the line conntrack printed.
	Line string
}

// Replied reports whether the flow saw a reply (conntrack does not mark
// it [UNREPLIED]).
func (f Flow) Replied() bool { return !strings.Contains(f.Line, "[UNREPLIED]") }

// SNAT reports whether the flow's source was translated, and to what.
func (f Flow) SNAT() (netip.Addr, bool) { return f.ReplyDst, f.ReplyDst != f.Src }

// DNAT reports whether the flow's destination was translated, and to what.
func (f Flow) DNAT() (netip.Addr, bool) { return f.ReplySrc, f.ReplySrc != f.Dst }

// Conntrack lists the connection-tracking entries of family f in ns, with
// conntrack's filter arguments (such as "-p", "tcp", "--orig-dst", addr).
func Conntrack(t testing.TB, ns *kerneltest.NS, f ipfamily.Family, args ...string) []Flow {
	t.Helper()
	fam := "ipv4"
	if f == ipfamily.IPv6 {
		fam = "ipv6"
	}
	out, err := ns.Exec(context.Background(), "conntrack", append([]string{"-L", "-f", fam}, args...)...)
	require.NoError(t, err)
	var flows []Flow
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		fl := Flow{Line: line}
		fields := strings.Fields(line)
		fl.Proto = fields[0]
		seen := map[string]int{}
		for _, fld := range fields {
			k, v, ok := strings.Cut(fld, "=")
			if !ok {
				continue
			}
			n := seen[k]
			seen[k]++
			switch k {
			case "src", "dst":
				a, err := netip.ParseAddr(v)
				require.NoError(t, err, line)
				switch {
				case k == "src" && n == 0:
					fl.Src = a
				case k == "dst" && n == 0:
					fl.Dst = a
				case k == "src":
					fl.ReplySrc = a
				default:
					fl.ReplyDst = a
				}
			case "sport", "dport":
				p, err := strconv.ParseUint(v, 10, 16)
				require.NoError(t, err, line)
				switch {
				case k == "sport" && n == 0:
					fl.SPort = uint16(p)
				case k == "dport" && n == 0:
					fl.DPort = uint16(p)
				case k == "sport":
					fl.ReplySPort = uint16(p)
				default:
					fl.ReplyDPort = uint16(p)
				}
			}
		}
		flows = append(flows, fl)
	}
	return flows
}

// Snapshot returns what a namespace's firewall, sets and routes hold, as
// the tools print them: iptables-legacy-save and ip6tables-legacy-save,
// `nft list ruleset` (which shows the iptables-nft tables too), `ipset
// save`, and `ip route` and `ip -6 route` of every table. Two equal
// snapshots mean nothing was written in between (packet counters are left
// out).
func Snapshot(t testing.TB, ns *kerneltest.NS) string {
	t.Helper()
	var b strings.Builder
	for _, c := range [][]string{
		{"iptables-legacy-save"},
		{"ip6tables-legacy-save"},
		{"nft", "list", "ruleset"},
		{"ipset", "save"},
		{"ip", "route", "show", "table", "all"},
		{"ip", "-6", "route", "show", "table", "all"},
	} {
		out, err := ns.Exec(context.Background(), c[0], c[1:]...)
		require.NoError(t, err, "%v", c)
		fmt.Fprintf(&b, "== %s\n", strings.Join(c, " "))
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "#") {
				continue // iptables-save's dated comments
			}
			b.WriteString(counters.ReplaceAllString(line, "[counters]"))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// counters matches the packet counters iptables-save and nft print.
var counters = regexp.MustCompile(`\[\d+:\d+\]|counter packets \d+ bytes \d+`)

// CountingCommands wraps a kernel.Commands and counts the binaries run
// through it.
type CountingCommands struct {
	// Next runs the binaries.
	Next kernel.Commands

	mu   sync.Mutex
	runs []string
}

// Runner implements kernel.Commands.
func (c *CountingCommands) Runner() command.Runner { return countingRunner{c} }

// Runs returns the command lines run so far.
func (c *CountingCommands) Runs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.runs...)
}

type countingRunner struct{ c *CountingCommands }

func (r countingRunner) Run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	r.c.mu.Lock()
	r.c.runs = append(r.c.runs, strings.Join(append([]string{name}, args...), " "))
	r.c.mu.Unlock()
	return r.c.Next.Runner().Run(ctx, stdin, name, args...)
}

// Forwarded returns how many packets of family f the namespace ns has
// forwarded (the kernel's ForwDatagrams, Ip6OutForwDatagrams), counted
// after the forward hook: a packet dropped there is not counted.
func Forwarded(t testing.TB, ns *kerneltest.NS, f ipfamily.Family) uint64 {
	t.Helper()
	file, key := "/proc/net/snmp", "ForwDatagrams"
	if f == ipfamily.IPv6 {
		file, key = "/proc/net/snmp6", "Ip6OutForwDatagrams"
	}
	out, err := ns.Exec(context.Background(), "cat", file) // the process lives in ns
	require.NoError(t, err)
	lines := strings.Split(string(out), "\n")
	if f == ipfamily.IPv6 {
		for _, l := range lines {
			if fields := strings.Fields(l); len(fields) == 2 && fields[0] == key {
				n, err := strconv.ParseUint(fields[1], 10, 64)
				require.NoError(t, err)
				return n
			}
		}
		t.Fatalf("no %s in %s", key, file)
	}
	// "Ip: Forwarding DefaultTTL InReceives …" then "Ip: 1 64 …".
	for i := 0; i+1 < len(lines); i++ {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != "Ip:" || len(values) != len(names) {
			continue
		}
		for j, name := range names {
			if name == key {
				n, err := strconv.ParseUint(values[j], 10, 64)
				require.NoError(t, err)
				return n
			}
		}
	}
	t.Fatalf("no %s in %s", key, file)
	return 0
}

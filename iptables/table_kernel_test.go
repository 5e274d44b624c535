//go:build linux

package iptables_test

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
)

// flavour is one backend and IP family.
type flavour struct {
	b iptables.Backend
	v ipfamily.Family
}

func (f flavour) String() string { return fmt.Sprintf("%s-%v", f.b, f.v) }

// cmd is the single-command binary of the flavour, such as ip6tables-nft.
func (f flavour) cmd() string {
	if f.v == ipfamily.IPv6 {
		return "ip6tables-" + string(f.b)
	}
	return "iptables-" + string(f.b)
}

// net returns a prefix of the flavour's family: 10.<i>.0.0/16 or
// 2001:db8:<i>::/48.
func (f flavour) net(i int) string {
	if f.v == ipfamily.IPv6 {
		return fmt.Sprintf("2001:db8:%x::/48", i)
	}
	return fmt.Sprintf("10.%d.0.0/16", i)
}

func forEachKernelFlavour(t *testing.T, fn func(t *testing.T, f flavour)) {
	kerneltest.RequireCommands(t, "iptables-legacy-restore", "iptables-nft-restore", "ip6tables-legacy-restore", "ip6tables-nft-restore")
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		for _, v := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			f := flavour{b, v}
			t.Run(f.String(), func(t *testing.T) { fn(t, f) })
		}
	}
}

// kernelTable returns a Table writing the filter table of f in ns.
func kernelTable(t *testing.T, f flavour, ns *kerneltest.NS, clk clock.Clock) *iptables.Table {
	t.Helper()
	return kernelTableOn(t, f, iptables.OpenKernelForTest(t, ns), clk)
}

// kernelTableOn returns a Table writing the filter table of f through k.
func kernelTableOn(t *testing.T, f flavour, k kernel.Commands, clk clock.Clock) *iptables.Table {
	t.Helper()
	tbl, err := iptables.New(iptables.Options{
		Table: "filter", Family: f.v, Backend: f.b, ChainPrefix: "np-",
		Kernel: k, Clock: clk, PostWriteRecheck: []time.Duration{},
	})
	require.NoError(t, err)
	return tbl
}

// dump reads a table of f in ns: its chains and each chain's rules as
// iptables-save prints them.
func dump(t *testing.T, ns *kerneltest.NS, f flavour, table string) (chains []string, rules map[string][]string) {
	t.Helper()
	out, err := ns.Exec(context.Background(), f.b.SaveCommand(f.v), "-t", table)
	require.NoError(t, err)
	rules = map[string][]string{}
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, ":"):
			chains = append(chains, strings.Fields(line[1:])[0])
		case strings.HasPrefix(line, "-A "):
			chain, spec, _ := strings.Cut(line[3:], " ")
			rules[chain] = append(rules[chain], spec)
		}
	}
	return chains, rules
}

func ipt(t *testing.T, ns *kerneltest.NS, f flavour, args ...string) {
	t.Helper()
	_, err := ns.Exec(context.Background(), f.cmd(), append([]string{"-w", "5"}, args...)...)
	require.NoError(t, err)
}

// declareSample declares two chains, a hook at the top of FORWARD and one
// at its bottom.
func declareSample(t *testing.T, tbl *iptables.Table, f flavour, variant int) {
	t.Helper()
	rule := func(i int) netfilter.Rule {
		return netfilter.Rule{Matches: []netfilter.Match{netfilter.SourceNet(netip.MustParsePrefix(f.net(i)))}, Action: netfilter.Accept()}
	}
	require.NoError(t, tbl.SetChains(
		netfilter.Chain{Name: "np-fw", Rules: []netfilter.Rule{rule(1), rule(2 + variant), {Action: netfilter.Jump("np-pods")}}},
		netfilter.Chain{Name: "np-pods", Rules: []netfilter.Rule{rule(3), {Matches: []netfilter.Match{netfilter.InInterface("veth+")}, Action: netfilter.Return()}}},
	))
	require.NoError(t, tbl.InsertRules("test", "FORWARD", []netfilter.Rule{{Action: netfilter.Jump("np-fw")}}))
	require.NoError(t, tbl.AppendRules("test", "FORWARD", []netfilter.Rule{{Matches: []netfilter.Match{netfilter.OutInterface("eth9")}, Action: netfilter.Drop()}}))
}

func kernelApply(t *testing.T, tbl *iptables.Table) {
	t.Helper()
	_, err := tbl.Apply(context.Background())
	require.NoError(t, err)
}

// TestKernelProgramAndAdopt programs chains and hooks beside foreign
// rules, changes them, and restarts: foreign rules before and after ours
// survive every apply, and a new Table adopts the state with no write.
func TestKernelProgramAndAdopt(t *testing.T) {
	forEachKernelFlavour(t, func(t *testing.T, f flavour) {
		ns := kerneltest.NewNS(t)
		ipt(t, ns, f, "-A", "FORWARD", "-s", netip.MustParsePrefix(f.net(100)).Addr().String(), "-j", "DROP")
		foreign := "-s " + strings.Replace(f.net(100), "/16", "/32", 1)
		if f.v == ipfamily.IPv6 {
			foreign = "-s " + netip.MustParsePrefix(f.net(100)).Addr().String() + "/128"
		}
		foreign += " -j DROP"

		tbl := kernelTable(t, f, ns, nil)
		declareSample(t, tbl, f, 0)
		kernelApply(t, tbl)
		chains, rules := dump(t, ns, f, "filter")
		assert.Equal(t, []string{"INPUT", "FORWARD", "OUTPUT", "np-fw", "np-pods"}, chains)
		require.Len(t, rules["FORWARD"], 3)
		assert.Equal(t, "-j np-fw", stripHash(rules["FORWARD"][0]))
		assert.Equal(t, foreign, rules["FORWARD"][1])
		assert.Equal(t, "-o eth9 -j DROP", stripHash(rules["FORWARD"][2]))
		assert.Equal(t, []string{"-s " + f.net(1) + " -j ACCEPT", "-s " + f.net(2) + " -j ACCEPT", "-j np-pods"}, stripped(rules["np-fw"]))
		assert.Equal(t, []string{"-s " + f.net(3) + " -j ACCEPT", "-i veth+ -j RETURN"}, stripped(rules["np-pods"]))
		for _, r := range rules["np-fw"] {
			assert.True(t, ours(r), r)
		}

		// Another agent inserts before ours and appends after ours.
		ipt(t, ns, f, "-I", "FORWARD", "1", "-i", "kube0", "-j", "ACCEPT")
		ipt(t, ns, f, "-A", "FORWARD", "-i", "kube1", "-j", "ACCEPT")

		// Change a rule and apply with a re-read: ours go back on top,
		// theirs stay where they were relative to each other.
		declareSample(t, tbl, f, 7)
		tbl.QueueResync()
		kernelApply(t, tbl)
		_, rules = dump(t, ns, f, "filter")
		// (our append rule goes back to the very end, after kube1).
		assert.Equal(t, []string{"-j np-fw", "-i kube0 -j ACCEPT", foreign, "-i kube1 -j ACCEPT", "-o eth9 -j DROP"}, stripped(rules["FORWARD"]))
		assert.Equal(t, "-s "+f.net(9)+" -j ACCEPT", stripHash(rules["np-fw"][1]))

		// Restart: a new Table with the same declarations writes nothing.
		again := kernelTable(t, f, ns, nil)
		declareSample(t, again, f, 7)
		kernelApply(t, again)
		st := again.WorkStats()
		assert.Equal(t, 0, st.Restores, "restart adoption writes nothing")
		assert.Zero(t, st.Saves, "a kernel.Namespace is read in process")
		// A no-op Apply runs nothing at all.
		kernelApply(t, again)
		assert.Equal(t, iptables.WorkStats{Saves: st.Saves, SaveTime: st.SaveTime, Chains: 2, Rules: 7}, again.WorkStats())

		// Removing everything leaves exactly the foreign rules.
		empty := kernelTable(t, f, ns, nil)
		kernelApply(t, empty)
		chains, rules = dump(t, ns, f, "filter")
		assert.Equal(t, []string{"INPUT", "FORWARD", "OUTPUT"}, chains)
		assert.Equal(t, []string{"-i kube0 -j ACCEPT", foreign, "-i kube1 -j ACCEPT"}, rules["FORWARD"])
	})
}

// TestKernelRepairsExternalChanges deletes and flushes our rules and chains
// behind the Table's back; the next resync repairs every change.
func TestKernelRepairsExternalChanges(t *testing.T) {
	forEachKernelFlavour(t, func(t *testing.T, f flavour) {
		ns := kerneltest.NewNS(t)
		tbl := kernelTable(t, f, ns, nil)
		declareSample(t, tbl, f, 0)
		kernelApply(t, tbl)
		want, _ := ns.Exec(context.Background(), f.b.SaveCommand(f.v), "-t", "filter")
		changes := []struct {
			name   string
			change func()
		}{
			{"delete our rule from FORWARD", func() {
				_, rules := dump(t, ns, f, "filter")
				args, err := tokenizeSpec(rules["FORWARD"][0])
				require.NoError(t, err)
				ipt(t, ns, f, append([]string{"-D", "FORWARD"}, args...)...)
			}},
			{"flush our chain", func() { ipt(t, ns, f, "-F", "np-pods") }},
			{"delete a rule of our chain", func() { ipt(t, ns, f, "-D", "np-fw", "2") }},
			{"flush FORWARD", func() { ipt(t, ns, f, "-F", "FORWARD") }},
			{"delete our chain", func() {
				ipt(t, ns, f, "-F", "np-fw")
				ipt(t, ns, f, "-F", "FORWARD")
				ipt(t, ns, f, "-X", "np-fw")
			}},
		}
		for _, c := range changes {
			c.change()
			got, _ := ns.Exec(context.Background(), f.b.SaveCommand(f.v), "-t", "filter")
			require.NotEqual(t, withoutComments(want), withoutComments(got), c.name)
			tbl.QueueResync() // as a dataplane.Loop does every ResyncInterval
			kernelApply(t, tbl)
			got, _ = ns.Exec(context.Background(), f.b.SaveCommand(f.v), "-t", "filter")
			assert.Equal(t, withoutComments(want), withoutComments(got), "repaired after: %s", c.name)
		}
	})
}

// withoutComments drops the # lines (time stamps) of iptables-save output.
func withoutComments(out []byte) string {
	var b strings.Builder
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(l, "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// tokenizeSpec splits a rule as iptables-save prints it into arguments.
func tokenizeSpec(s string) ([]string, error) {
	var out []string
	for s != "" {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			break
		}
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("unterminated quote in %q", s)
			}
			out = append(out, s[1:end+1])
			s = s[end+2:]
			continue
		}
		tok, rest, _ := strings.Cut(s, " ")
		out = append(out, tok)
		s = rest
	}
	return out, nil
}

// TestKernelFailedRestoreConverges makes the first restore fail for real:
// another agent deletes one of our rules between our read and our write, so
// our delete-by-text finds nothing and the transaction is refused. The
// retry re-reads and converges.
func TestKernelFailedRestoreConverges(t *testing.T) {
	forEachKernelFlavour(t, func(t *testing.T, f flavour) {
		ns := kerneltest.NewNS(t)
		inNS := iptables.OpenKernelForTest(t, ns).Runner()
		var restores atomic.Int32
		runner := command.RunnerFunc(func(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
			if strings.HasSuffix(name, "-restore") && restores.Add(1) == 2 {
				// Before our second write: delete our hook from FORWARD.
				_, rules := dump(t, ns, f, "filter")
				spec, err := tokenizeSpec(rules["FORWARD"][0])
				if err == nil {
					_, err = ns.Exec(ctx, f.cmd(), append([]string{"-w", "5", "-D", "FORWARD"}, spec...)...)
				}
				if err != nil {
					return nil, err
				}
			}
			return inNS.Run(ctx, stdin, name, args...)
		})
		tbl := kernelTableOn(t, f, commands(runner), nil)
		declareSample(t, tbl, f, 0)
		kernelApply(t, tbl)
		// Unhooking deletes our FORWARD rule by its text — which is gone.
		require.NoError(t, tbl.InsertRules("test", "FORWARD", []netfilter.Rule{{Action: netfilter.Jump("np-pods")}}))
		kernelApply(t, tbl)
		st := tbl.WorkStats()
		assert.Equal(t, 1, st.RestoreErrors, "the first attempt failed in the kernel")
		assert.Equal(t, 3, st.Restores)
		_, rules := dump(t, ns, f, "filter")
		assert.Equal(t, []string{"-j np-pods", "-o eth9 -j DROP"}, stripped(rules["FORWARD"]))
	})
}

// TestKernelCoexistsWithConcurrentWriter applies changes while another
// writer adds and removes its own rules in the same chain; both end up
// with exactly their rules.
func TestKernelCoexistsWithConcurrentWriter(t *testing.T) {
	forEachKernelFlavour(t, func(t *testing.T, f flavour) {
		ns := kerneltest.NewNS(t)
		tbl := kernelTable(t, f, ns, nil)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var foreignErr atomic.Value
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				iface := "kube" + strconv.Itoa(i%3)
				for _, op := range []string{"-I", "-D"} {
					if _, err := ns.Exec(context.Background(), f.cmd(), "-w", "5", op, "FORWARD", "-i", iface, "-j", "ACCEPT"); err != nil {
						foreignErr.Store(err)
						return
					}
				}
			}
		}()
		for i := range 6 {
			declareSample(t, tbl, f, i)
			tbl.QueueResync()
			_, err := tbl.Apply(context.Background())
			require.NoError(t, err)
		}
		close(stop)
		wg.Wait()
		if err := foreignErr.Load(); err != nil {
			t.Fatalf("foreign writer: %v", err)
		}
		ipt(t, ns, f, "-A", "FORWARD", "-i", "kube9", "-j", "ACCEPT")
		tbl.QueueResync()
		kernelApply(t, tbl)
		_, rules := dump(t, ns, f, "filter")
		// Our append rule goes back to the very end, after theirs.
		assert.Equal(t, []string{"-j np-fw", "-i kube9 -j ACCEPT", "-o eth9 -j DROP"}, stripped(rules["FORWARD"]))
	})
}

// TestKernelPacketsFollowRules runs real TCP between a host and its pod:
// accepted, counted by our rule, then refused after a rule change, while
// an unchanged rule keeps its packet counter.
func TestKernelPacketsFollowRules(t *testing.T) {
	forEachKernelFlavour(t, func(t *testing.T, f flavour) {
		stack := kerneltest.IPv4Only
		if f.v == ipfamily.IPv6 {
			stack = kerneltest.IPv6Only
		}
		topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 1, PodsPerHost: 1, Stack: stack})
		host, pod := topo.Hosts[0], topo.Hosts[0].Pods[0]
		addr := pod.IPv4
		if f.v == ipfamily.IPv6 {
			addr = pod.IPv6
		}
		bound, _ := pod.NS.ListenTCP(t, netip.AddrPortFrom(addr, 0))
		port := bound.Port()
		dial := kerneltest.TCPCheck(host.NS, netip.AddrPortFrom(addr, port))
		kerneltest.Require(t, dial)

		tcpTo := func(p uint16, action netfilter.Action) netfilter.Rule {
			return netfilter.Rule{Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestPorts(netfilter.Port(p))}, Action: action}
		}
		counted := netfilter.Rule{Matches: []netfilter.Match{netfilter.ConntrackState(netfilter.CTStateEstablished)}, Action: netfilter.Accept()}
		tbl := kernelTable(t, f, pod.NS, nil)
		require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-in", Rules: []netfilter.Rule{counted, tcpTo(port, netfilter.Accept())}}))
		require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{{Action: netfilter.Jump("np-in")}}))
		kernelApply(t, tbl)
		kerneltest.Require(t, dial)
		before := settledCounters(t, pod.NS, f, "np-in")
		require.Len(t, before, 2)
		assert.Positive(t, before[0], "established packets were counted by our rule")
		assert.Positive(t, before[1], "the SYN was counted by our rule")

		// Reject new connections to the port: the second rule changes, the
		// first is not rewritten and keeps its counter.
		require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-in", Rules: []netfilter.Rule{counted, tcpTo(port, netfilter.Reject(netfilter.RejectTCPReset))}}))
		kernelApply(t, tbl)
		after := counters(t, pod.NS, f, "np-in")
		assert.Equal(t, before[0], after[0], "the unchanged rule kept its packet counter")
		assert.Zero(t, after[1], "the changed rule is new")
		kerneltest.Require(t, kerneltest.Not(dial))

		// Move the reject to another port: the connection works again.
		require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-in", Rules: []netfilter.Rule{counted, tcpTo(port+1, netfilter.Reject(netfilter.RejectTCPReset))}}))
		kernelApply(t, tbl)
		kerneltest.Require(t, dial)

		// Dropping the pod's replies in its OUTPUT chain stops it too.
		require.NoError(t, tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{{
			Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP), netfilter.SourcePorts(netfilter.Port(port))},
			Action:  netfilter.Drop(),
		}}))
		kernelApply(t, tbl)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, dial.Run(ctx), kerneltest.ErrUnreachable)
	})
}

// settledCounters returns a chain's packet counters once they stop moving
// (the last packets of a closed connection may still be on their way).
func settledCounters(t *testing.T, ns *kerneltest.NS, f flavour, chain string) []int {
	t.Helper()
	last := counters(t, ns, f, chain)
	for range 40 {
		time.Sleep(50 * time.Millisecond)
		now := counters(t, ns, f, chain)
		if fmt.Sprint(now) == fmt.Sprint(last) {
			return now
		}
		last = now
	}
	t.Fatalf("counters of %s never settled: %v", chain, last)
	return nil
}

// counters returns the packet counters of a chain's rules.
func counters(t *testing.T, ns *kerneltest.NS, f flavour, chain string) []int {
	t.Helper()
	out, err := ns.Exec(context.Background(), f.b.SaveCommand(f.v), "-c", "-t", "filter")
	require.NoError(t, err)
	var n []int
	for _, line := range strings.Split(string(out), "\n") {
		// "[packets:bytes] -A chain …"
		cnt, rest, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(rest, "-A "+chain+" ") || !strings.HasPrefix(cnt, "[") {
			continue
		}
		p, _, _ := strings.Cut(strings.Trim(cnt, "[]"), ":")
		v, err := strconv.Atoi(p)
		require.NoError(t, err, line)
		n = append(n, v)
	}
	return n
}

// TestKernelRereadReplacesOurRules replaces our rules in a built-in chain
// across a re-read: the Table deletes the old ones by the text
// iptables-save printed (the in-process read cannot see it, so the
// deletion runs iptables-save), and foreign rules survive.
func TestKernelRereadReplacesOurRules(t *testing.T) {
	forEachKernelFlavour(t, func(t *testing.T, f flavour) {
		ns := kerneltest.NewNS(t)
		ipt(t, ns, f, "-A", "FORWARD", "-i", "kube0", "-j", "ACCEPT")
		tbl := kernelTable(t, f, ns, nil)
		declareSample(t, tbl, f, 0)
		kernelApply(t, tbl)
		require.NoError(t, tbl.InsertRules("test", "FORWARD", []netfilter.Rule{{Matches: []netfilter.Match{netfilter.InInterface("eth7")}, Action: netfilter.Jump("np-fw")}}))
		require.NoError(t, tbl.AppendRules("test", "FORWARD", nil))
		tbl.QueueResync()
		kernelApply(t, tbl)
		_, rules := dump(t, ns, f, "filter")
		assert.Equal(t, []string{"-i eth7 -j np-fw", "-i kube0 -j ACCEPT"}, stripped(rules["FORWARD"]))
		st := tbl.WorkStats()
		assert.Equal(t, 1, st.Saves, "the texts of the rules to delete")
		assert.Equal(t, 2, st.Restores)
	})
}

// TestKernelCopiedHashConverges has another writer append a different rule
// carrying the hash comment of one of ours: both copies are deleted and
// ours is put back, in one restore: deletion by the texts iptables-save
// printed matches each copy.
func TestKernelCopiedHashConverges(t *testing.T) {
	forEachKernelFlavour(t, func(t *testing.T, f flavour) {
		ns := kerneltest.NewNS(t)
		tbl := kernelTable(t, f, ns, nil)
		declareSample(t, tbl, f, 0)
		kernelApply(t, tbl)
		_, rules := dump(t, ns, f, "filter")
		spec := rules["FORWARD"][0]
		i := strings.Index(spec, `"np:`)
		require.GreaterOrEqual(t, i, 0, spec)
		comment := spec[i+1 : i+1+len("np:")+iptables.HashLength]
		ipt(t, ns, f, "-A", "FORWARD", "-i", "copy0", "-m", "comment", "--comment", comment, "-j", "ACCEPT")

		tbl.QueueResync()
		kernelApply(t, tbl)
		_, rules = dump(t, ns, f, "filter")
		assert.Equal(t, []string{"-j np-fw", "-o eth9 -j DROP"}, stripped(rules["FORWARD"]))
		st := tbl.WorkStats()
		assert.Zero(t, st.RestoreErrors)
		assert.Equal(t, 1, st.Saves, "the texts of the copies, which the in-process read cannot see")
	})
}

// TestKernelNativeRuleFallsBackToSave puts a native nftables rule in the
// table: the in-process read refuses it, and iptables-save reports the
// table incompatible.
func TestKernelNativeRuleFallsBackToSave(t *testing.T) {
	kerneltest.RequireCommands(t, "iptables-nft-restore", "nft")
	ns := kerneltest.NewNS(t)
	f := flavour{iptables.BackendNFT, ipfamily.IPv4}
	ipt(t, ns, f, "-A", "INPUT", "-j", "ACCEPT")
	_, err := ns.Exec(context.Background(), "nft", "add", "rule", "ip", "filter", "INPUT", "ct", "state", "established", "accept")
	require.NoError(t, err)
	tbl := kernelTable(t, f, ns, nil)
	_, err = tbl.Apply(context.Background())
	require.ErrorIs(t, err, iptables.ErrIncompatible)
	assert.Equal(t, 1, tbl.WorkStats().Saves)
}

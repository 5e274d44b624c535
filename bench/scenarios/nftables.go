// Size: every nftables scenario with its peers (nft -f text, knftables-style text) and the replayed-batch floor they are compared with.

//go:build linux

package scenarios

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/bench/internal/harness"
	"github.com/nodeplane/nodeplane/internal/testkit/benchutil"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// The nftables scenarios (IPv4). Ours is a package nftables Table on the
// trial's namespace (kernel.Open in Setup); the peer is the nft binary as
// knftables drives it (`nft -f -` of a transaction in nft syntax, what
// kube-proxy's nftables mode runs), and, where the issue asks, iptables-nft
// and one `nft add element` exec per element; the floor is the very
// netlink transaction ours sent, captured in a scratch namespace and
// replayed from a fresh socket: the kernel's own cost.
//
//   - nftables/initial/N: N rules in N/10 regular chains of 10 (`ip saddr
//     A tcp dport P accept` and our comment) plus N/10 jumps from the
//     FORWARD base chain, into an empty namespace. Ours is New, SetChains,
//     InsertRules and Apply (with its first read); the peer `nft -f` of
//     the same table as `nft list` prints it.
//   - nftables/kube-proxy/N: a kube-proxy-style NAT table of N services:
//     a verdict map VIP . proto . port → goto the service's chain, each
//     chain two rules (mark for masquerade, DNAT to an endpoint), and the
//     PREROUTING dispatch through the map. One transaction for ours; the
//     peer `nft -f` of the same table.
//   - nftables/change-rule/N: one rule of one chain changes in the table
//     of initial/N, in sync. Ours is SetChains and Apply (no read); the
//     peer `nft -f` of the knftables way (flush the chain, add its rules
//     again); the second peer iptables-nft-restore --noflush of the same
//     change (one -R line) on an iptables-nft table of N rules.
//   - nftables/change-service/N: one service is added to the table of
//     kube-proxy/N. Ours is SetChains and AddElements and Apply; the peer
//     `nft -f` of the knftables way (add chain, flush it, add its rules, add
//     the map element), which makes nft read the table's chains first.
//   - nftables/change-endpoints/N: one service's endpoint is replaced in
//     a kube-proxy-style table of N services whose DNAT is in an endpoint
//     chain of each service's own: a new endpoint chain, the service's
//     chain jumping to it instead, the old one deleted. Ours is SetChains,
//     RemoveChains and Apply; the peer `nft -f` of the knftables way (add
//     the new chain, flush and fill it and the service's chain, delete the
//     old one).
//   - nftables/element/N: one address is added to a set of N. Ours is
//     AddElements and Apply; the peer one `nft add element` exec.
//   - nftables/elements/N: a set of N addresses is loaded. Ours is New,
//     SetSets (validating and encoding the caller's N Elements) and Apply
//     (opening the socket, the first read, planning, encoding; elements
//     past ElementsPerTransaction go in further transactions, each encoded
//     while the kernel processes the one before); the floors replay
//     prebuilt bytes from a socket opened in Setup: one transaction
//     holding them all (ours' transactions merged), and ours' transactions
//     as captured, back to back — the kernel's cost differs between the
//     two, since a set's hash table grows between transactions (see
//     kernel_ms); the peer one `nft add element` exec per element (only
//     at 1000).
//   - nftables/heap/…: the heap a Table keeps per rule and per element once
//     applied.
//
// Ours reports where its time goes: kernel_ms is wall time inside
// sendmsg of our transactions (the kernel validates and commits a batch
// before sendmsg returns), read_ms in reads of the table, go_ms the rest
// (rendering, hashing, planning, encoding — what of it does not overlap
// the kernel's work: a load of several transactions encodes the next while
// the kernel processes one); kernel_ms/floor is the kernel's share that no
// writer skips.
const nftTable = "np"

func init() {
	for _, n := range []int{100, 1_000, 10_000} {
		harness.Register(nftInitial(n))
	}
	for _, n := range []int{100, 1_000, 10_000} {
		harness.Register(nftKubeProxy(n))
	}
	for _, n := range []int{100, 1_000, 10_000} {
		harness.Register(nftChangeRule(n))
	}
	for _, n := range []int{100, 1_000, 10_000} {
		harness.Register(nftChangeService(n))
	}
	for _, n := range []int{100, 1_000, 10_000} {
		harness.Register(nftChangeEndpoints(n))
	}
	for _, n := range []int{100, 10_000, 100_000} {
		harness.Register(nftElement(n))
	}
	for _, n := range []int{1_000, 100_000} {
		harness.Register(nftElements(n))
	}
	harness.Register(nftHeap("rules", 10_000), nftHeap("elements", 100_000))
}

// nftDecl is a declared state.
type nftDecl struct {
	role   nftables.Role
	sets   []nftables.Set
	chains []netfilter.Chain
	hook   netfilter.Hook
	jumps  []netfilter.Rule
}

func (d nftDecl) options(k kernel.NFTables) nftables.Options {
	return nftables.Options{Name: nftTable, Family: iptFamily, Role: d.role, Kernel: k, PostWriteRecheck: []time.Duration{}}
}

// program declares d on a new Table and applies it.
func (d nftDecl) program(ctx context.Context, k kernel.NFTables) (*nftables.Table, error) {
	tbl, err := nftables.New(d.options(k))
	if err != nil {
		return nil, err
	}
	if err := d.declare(tbl); err != nil {
		return nil, err
	}
	_, err = tbl.Apply(ctx)
	return tbl, err
}

func (d nftDecl) declare(tbl *nftables.Table) error {
	if len(d.sets) > 0 {
		if err := tbl.SetSets(d.sets...); err != nil {
			return err
		}
	}
	if err := tbl.SetChains(d.chains...); err != nil {
		return err
	}
	if d.hook != "" {
		return tbl.InsertRules("bench", d.hook, d.jumps)
	}
	return nil
}

// nftRules is the state of initial/N: iptables' scenario's, in nftables.
func nftRules(n int) nftDecl {
	d := iptDeclare(n)
	return nftDecl{role: nftables.Filter, chains: d.chains, hook: netfilter.HookForward, jumps: d.jumps}
}

// nftService returns service i: its chain and its map element.
func nftService(i int) (netfilter.Chain, nftables.Element) {
	vip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
	ep := netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)})
	name := fmt.Sprintf("svc-%05d", i)
	tcp := netfilter.Protocol(netfilter.ProtoTCP)
	ch := netfilter.Chain{Name: name, Rules: []netfilter.Rule{
		{Matches: []netfilter.Match{tcp}, Action: netfilter.SetMaskedMark(0x4000, 0x4000)},
		{Matches: []netfilter.Match{tcp}, Action: netfilter.DNAT(netip.AddrPortFrom(ep, 8080))},
	}}
	el := nftables.Element{Key: []nftables.Value{nftables.Addr(vip), nftables.Proto(netfilter.ProtoTCP), nftables.Port(80)}, Verdict: netfilter.Goto(name)}
	return ch, el
}

// nftServices is the state of kube-proxy/N.
func nftServices(n int) nftDecl {
	vm := nftables.Set{Name: "service-ips", Key: []nftables.KeyType{nftables.TypeAddr, nftables.TypeProto, nftables.TypePort}, Verdict: true}
	d := nftDecl{role: nftables.NAT, hook: netfilter.HookPrerouting,
		jumps: []netfilter.Rule{{Action: netfilter.VerdictMap("service-ips", netfilter.Dst, netfilter.Dst)}}}
	for i := range n {
		ch, el := nftService(i)
		d.chains = append(d.chains, ch)
		vm.Elements = append(vm.Elements, el)
	}
	d.sets = []nftables.Set{vm}
	return d
}

// nftSet is a set of n addresses, used by a rule.
func nftSet(n int) nftDecl {
	s := nftables.Set{Name: "addrs", Key: []nftables.KeyType{nftables.TypeAddr}}
	for i := range n {
		s.Elements = append(s.Elements, nftables.Elem(nftables.Addr(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))))
	}
	return nftDecl{role: nftables.Filter, sets: []nftables.Set{s}, hook: netfilter.HookForward,
		jumps: []netfilter.Rule{{Matches: []netfilter.Match{netfilter.SourceIPSet("addrs")}, Action: netfilter.Accept()}}}
}

// nftElem is the element element/N adds.
var nftElem = nftables.Elem(nftables.Addr(netip.MustParseAddr("192.0.2.1")))

// Capture: the transactions a Table sends, and the nft text of a table,
// made once per state in a scratch namespace.

// capSocket is a NETLINK_NETFILTER socket that keeps the batches it sends.
type capSocket struct {
	fd   int
	keep *[][]byte
}

// openNetfilterSocket opens a socket inside ns (nil: ours).
func openNetfilterSocket(ns *kerneltest.NS) (int, error) {
	fd := -1
	open := func() (err error) {
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		return err
	}
	if err := ns.Do(open); err != nil {
		return -1, err
	}
	for _, o := range [][2]int{{unix.SOL_NETLINK, unix.NETLINK_EXT_ACK}, {unix.SOL_NETLINK, unix.NETLINK_CAP_ACK}} {
		_ = unix.SetsockoptInt(fd, o[0], o[1], 1)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func (s *capSocket) Send(b []byte) error {
	if len(b) > 5 && b[4] == 0x10 && b[5] == 0 && s.keep != nil { // a batch
		*s.keep = append(*s.keep, bytes.Clone(b))
	}
	if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, len(b)+4096); err != nil {
		return err
	}
	return unix.Sendto(s.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

func (s *capSocket) Receive(b []byte, block bool) (int, error) {
	flags := 0
	if !block {
		flags = unix.MSG_DONTWAIT
	}
	for {
		n, _, err := unix.Recvfrom(s.fd, b, flags)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case !block && errors.Is(err, unix.EAGAIN):
			return 0, nil
		}
		return n, err
	}
}

func (s *capSocket) Close() error { return unix.Close(s.fd) }

// capKernel gives a Table capturing sockets into ns.
type capKernel struct {
	ns   *kerneltest.NS
	keep *[][]byte
}

func (c capKernel) OpenNFTablesSocket() (kernel.NFTablesSocket, error) {
	fd, err := openNetfilterSocket(c.ns)
	if err != nil {
		return nil, err
	}
	return &capSocket{fd: fd, keep: c.keep}, nil
}

// captured is what a state's capture holds: the batches of the first
// Apply, of a change after it, and the nft text of the table before and
// after the change.
type captured struct {
	initial, change   [][]byte
	text, changedText string
	err               error
}

var (
	capMu    sync.Mutex
	captures = map[string]*captured{}
)

// capture programs d in a scratch namespace and then applies change,
// capturing the transactions and the table's text, once per key.
func capture(key string, d nftDecl, change func(*nftables.Table) error) (*captured, error) {
	capMu.Lock()
	defer capMu.Unlock()
	if c := captures[key]; c != nil {
		return c, c.err
	}
	c := &captured{}
	captures[key] = c
	c.err = func() error {
		ns, err := kerneltest.Open()
		if err != nil {
			return err
		}
		defer ns.Close()
		var batches [][]byte
		tbl, err := d.program(context.Background(), capKernel{ns: ns, keep: &batches})
		if err != nil {
			return err
		}
		defer tbl.Close()
		c.initial, batches = batches, nil
		out, err := ns.Exec(context.Background(), "nft", "list", "table", "ip", nftTable)
		if err != nil {
			return err
		}
		c.text = string(out)
		if change == nil {
			return nil
		}
		if err := change(tbl); err != nil {
			return err
		}
		if _, err := tbl.Apply(context.Background()); err != nil {
			return err
		}
		c.change = batches
		out, err = ns.Exec(context.Background(), "nft", "list", "table", "ip", nftTable)
		c.changedText = string(out)
		return err
	}()
	return c, c.err
}

// replay sends captured batches from a socket in the trial's namespace
// (opened by Setup: see replaySocket) and fails on any refusal: the
// kernel's cost of them.
func replay(env *harness.Env, batches [][]byte) error {
	s, err := replaySocket(env)
	if err != nil {
		return err
	}
	return s.replay(batches)
}

// replay sends batches and fails on any refusal.
func (s *capSocket) replay(batches [][]byte) error {
	buf := make([]byte, 64<<10)
	for _, b := range batches {
		if err := s.Send(b); err != nil {
			return err
		}
		if n, _ := s.Receive(buf, false); n > 0 {
			return fmt.Errorf("replayed transaction refused (%d bytes of answers)", n)
		}
	}
	return nil
}

// replayState is what a floor's Setup hands to its Run: the socket and the
// batches.
type replayState struct {
	s       *capSocket
	batches [][]byte
}

// replaySocket opens a socket in the trial's namespace, closed after the
// Run (see closeOurs).
func replaySocket(env *harness.Env) (*capSocket, error) {
	fd, err := openNetfilterSocket(env.NS)
	if err != nil {
		return nil, err
	}
	s := &capSocket{fd: fd}
	nftLeft.add(func() { _ = s.Close() })
	return s, nil
}

// nftFile runs `nft -f -` with input in the trial's namespace.
func nftFile(ctx context.Context, env *harness.Env, input string) error {
	_, err := env.NS.Run(ctx, strings.NewReader(input), "nft", "-f", "-")
	return err
}

// nftState is what ours' Setup hands to its Run.
type nftState struct {
	k    *kernel.Namespace
	tbl  *nftables.Table
	decl nftDecl
}

// openOurs opens the trial's namespace for ours, and, when pre is set,
// programs it.
func openOurs(ctx context.Context, env *harness.Env, d nftDecl, pre bool) error {
	nftLeft.run()
	k, err := kernel.Open(env.NS.Path())
	if err != nil {
		return err
	}
	st := &nftState{k: k, decl: d}
	env.State = st
	if pre {
		if st.tbl, err = d.program(ctx, k); err != nil {
			return err
		}
		return settle(ctx)
	}
	return nil
}

// reportNFT records where the time of ours went, from the Table's stats
// (before: its stats when the measured work started).
func reportNFT(env *harness.Env, u usage, tbl *nftables.Table, before nftables.WorkStats) {
	wall := time.Since(u.start)
	st := tbl.WorkStats()
	kern, read := st.WriteTime-before.WriteTime, st.ReadTime-before.ReadTime
	env.Report("kernel_ms", millis(kern))
	env.Report("read_ms", millis(read))
	env.Report("go_ms", millis(wall-kern-read))
	env.Report("transactions", float64(st.Transactions-before.Transactions))
	u.reportCPU(env)
}

// closeOurs closes ours' Table and namespace, after the measured Run: an
// agent keeps its socket, and closing a netfilter socket that committed
// waits for the kernel to release what the transaction replaced (an RCU
// grace period), which a long-lived writer never pays in its applies.
func closeOurs(env *harness.Env) {
	st := env.State.(*nftState)
	nftLeft.add(func() {
		if st.tbl != nil {
			_ = st.tbl.Close()
		}
		_ = st.k.Close()
	})
}

// nftLeft is what the nftables trials left open (ours' Table and
// namespace, the floors' sockets), closed at the next Setup of a scenario
// of this file.
var nftLeft closers

// floorVariant replays the captured batches of a state (initial or the
// change, after programming the initial ones in Setup).
func floorVariant(key string, d nftDecl, change func(*nftables.Table) error) harness.Variant {
	return replayFloor("netlink transaction (hand-built, replayed)", key, d, change, false)
}

// replayFloor is a floor named name that replays the batches captured for
// d under key: the initial ones, or with change those of the change after
// replaying the initial ones in Setup; merged into one with merge.
func replayFloor(name, key string, d nftDecl, change func(*nftables.Table) error, merge bool) harness.Variant {
	return harness.Variant{
		Name: name, Role: harness.Floor,
		Setup: func(ctx context.Context, env *harness.Env) error {
			c, err := capture(key, d, change)
			if err != nil {
				return err
			}
			nftLeft.run()
			batches := c.initial
			if change != nil {
				if err := replay(env, c.initial); err != nil {
					return err
				}
				batches = c.change
				if err := settle(ctx); err != nil {
					return err
				}
			}
			if merge {
				batches = [][]byte{oneBatch(batches)}
			}
			s, err := replaySocket(env)
			env.State = &replayState{s: s, batches: batches}
			return err
		},
		Run: func(_ context.Context, env *harness.Env) error {
			st := env.State.(*replayState)
			return st.s.replay(st.batches)
		},
	}
}

// nftProgramOurs is ours loading d into an empty namespace: a new Table
// declares d and applies it.
func nftProgramOurs(d nftDecl) harness.Variant {
	return harness.Variant{
		Name: "nodeplane nftables", Role: harness.Ours,
		Setup: func(ctx context.Context, env *harness.Env) error { return openOurs(ctx, env, d, false) },
		Run: func(ctx context.Context, env *harness.Env) error {
			defer closeOurs(env)
			st := env.State.(*nftState)
			u := startUsage()
			tbl, err := d.program(ctx, st.k)
			if err != nil {
				return err
			}
			st.tbl = tbl
			reportNFT(env, u, tbl, nftables.WorkStats{})
			return nil
		},
	}
}

// nftChangeOurs is ours applying change to the Table that programmed d in
// Setup. after, when set, runs right after the Apply (u and before: the
// usage and the Table's stats when the Run started) and may fail the Run.
func nftChangeOurs(d nftDecl, change func(*nftables.Table) error, after func(env *harness.Env, u usage, tbl *nftables.Table, before nftables.WorkStats) error) harness.Variant {
	return harness.Variant{
		Name: "nodeplane nftables", Role: harness.Ours,
		Setup: func(ctx context.Context, env *harness.Env) error { return openOurs(ctx, env, d, true) },
		Run: func(ctx context.Context, env *harness.Env) error {
			defer closeOurs(env)
			st := env.State.(*nftState)
			before := st.tbl.WorkStats()
			u := startUsage()
			if err := change(st.tbl); err != nil {
				return err
			}
			if _, err := st.tbl.Apply(ctx); err != nil {
				return err
			}
			if after != nil {
				if err := after(env, u, st.tbl, before); err != nil {
					return err
				}
			}
			reportNFT(env, u, st.tbl, before)
			return nil
		},
	}
}

// nftFileState is a peer's Run: `nft -f` of the text Setup handed it.
func nftFileState(ctx context.Context, env *harness.Env) error {
	return nftFile(ctx, env, env.State.(string))
}

// nftTextPeer is `nft -f` of d's table as `nft list` prints it, into an
// empty namespace.
func nftTextPeer(key string, d nftDecl) harness.Variant {
	return harness.Variant{
		Name: "nft -f (knftables)", Role: harness.Peer,
		Setup: func(_ context.Context, env *harness.Env) error {
			c, err := capture(key, d, nil)
			env.State = c.text
			return err
		},
		Run: nftFileState,
	}
}

// nftKnftPeer is `nft -f` of a change the knftables way, on d's table
// loaded by `nft -f`: render makes the input from the changed table's text.
func nftKnftPeer(name, key string, d nftDecl, change func(*nftables.Table) error, render func(changedText string) string) harness.Variant {
	return harness.Variant{
		Name: name, Role: harness.Peer,
		Setup: func(ctx context.Context, env *harness.Env) error {
			c, err := capture(key, d, change)
			if err != nil {
				return err
			}
			if err := nftFile(ctx, env, c.text); err != nil {
				return err
			}
			env.State = render(c.changedText)
			return settle(ctx)
		},
		Run: nftFileState,
	}
}

// nftLoad is a scenario that loads d (captured under key) into an empty
// namespace: ours, `nft -f` of the same table, and the replayed
// transaction.
func nftLoad(name string, size int, note, key string, d nftDecl) harness.Scenario {
	return harness.Scenario{
		Name: name, Size: size, Note: note,
		Variants: []harness.Variant{nftProgramOurs(d), nftTextPeer(key, d), floorVariant(key, d, nil)},
	}
}

func nftInitial(n int) harness.Scenario {
	return nftLoad(fmt.Sprintf("nftables/initial/%d", n), n+n/10,
		fmt.Sprintf("%d rules in %d chains of 10 plus %d jumps from FORWARD; ours includes declaring (rendering, hashing) and the first read", n, n/10, n/10),
		fmt.Sprintf("rules/%d", n), nftRules(n))
}

func nftKubeProxy(n int) harness.Scenario {
	s := nftLoad(fmt.Sprintf("nftables/kube-proxy/%d", n), n,
		fmt.Sprintf("%d services: a verdict map VIP . tcp . 80 → goto a chain of 2 rules (mark, DNAT) each, dispatched from PREROUTING; one transaction (sets, chains, elements, then the rules that reach them)", n),
		fmt.Sprintf("services/%d", n), nftServices(n))
	if n >= 10_000 {
		s.Trials = 1
		s.Note += "; one trial (nft -f takes about a minute)"
	}
	return s
}

// nftChangedChain is the chain change-rule sets: rule 5 of the chain in the
// middle differs.
func nftChangedChain(n int) netfilter.Chain { return iptChanged(n) }

// knftChain renders the knftables way of setting a chain's rules: flush
// it and add them all, from `nft list` of the changed table.
func knftChain(text, chain string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "flush chain ip %s %s\n", nftTable, chain)
	in := false
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case t == "chain "+chain+" {":
			in = true
		case in && t == "}":
			return b.String()
		case in && t != "":
			fmt.Fprintf(&b, "add rule ip %s %s %s\n", nftTable, chain, t)
		}
	}
	return b.String()
}

func nftChangeRule(n int) harness.Scenario {
	d := nftRules(n)
	changed := nftChangedChain(n)
	change := func(tbl *nftables.Table) error { return tbl.SetChains(changed) }
	key := fmt.Sprintf("rules/%d/change", n)
	return harness.Scenario{
		Name: fmt.Sprintf("nftables/change-rule/%d", n),
		Size: 1,
		Note: fmt.Sprintf("rule %d of chain %s changes in a table of %d rules in sync; the change adds no jump", iptChangeRule, changed.Name, n+n/10),
		Variants: []harness.Variant{
			nftChangeOurs(d, change, func(_ *harness.Env, _ usage, tbl *nftables.Table, before nftables.WorkStats) error {
				if after := tbl.WorkStats(); after.Transactions-before.Transactions != 1 || after.Messages-before.Messages != 2 {
					return fmt.Errorf("change-rule wrote %d transactions of %d requests, want 1 of 2", after.Transactions-before.Transactions, after.Messages-before.Messages)
				}
				return nil
			}),
			nftKnftPeer("nft -f flush+add (knftables)", key, d, change, func(text string) string { return knftChain(text, changed.Name) }),
			iptRestoreChange("iptables-nft-restore -R", harness.Peer, iptables.BackendNFT, n),
			floorVariant(key, d, change),
		},
	}
}

// knftService renders the knftables way of adding a service: its chain
// (add, flush, rules) and its map element.
func knftService(text, chain, element string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "add chain ip %s %s\n", nftTable, chain)
	b.WriteString(knftChain(text, chain))
	fmt.Fprintf(&b, "add element ip %s service-ips { %s }\n", nftTable, element)
	return b.String()
}

func nftChangeService(n int) harness.Scenario {
	d := nftServices(n)
	ch, el := nftService(n)
	change := func(tbl *nftables.Table) error {
		if err := tbl.SetChains(ch); err != nil {
			return err
		}
		return tbl.AddElements("service-ips", el)
	}
	key := fmt.Sprintf("services/%d/change", n)
	vip := netip.AddrFrom4([4]byte{10, 96, byte(n >> 8), byte(n)})
	s := harness.Scenario{
		Name: fmt.Sprintf("nftables/change-service/%d", n),
		Size: 1,
		Note: fmt.Sprintf("one service added (its chain of 2 rules, its map element: a new goto, so the kernel validates the jump graph) to a kube-proxy-style table of %d", n),
		Variants: []harness.Variant{
			nftChangeOurs(d, change, func(_ *harness.Env, _ usage, tbl *nftables.Table, before nftables.WorkStats) error {
				if tx := tbl.WorkStats().Transactions - before.Transactions; tx != 1 {
					return fmt.Errorf("change-service wrote %d transactions, want 1", tx)
				}
				return nil
			}),
			nftKnftPeer("nft -f add chain+element (knftables)", key, d, change, func(text string) string {
				return knftService(text, ch.Name, vip.String()+" . tcp . 80 : goto "+ch.Name)
			}),
			floorVariant(key, d, change),
		},
	}
	if n >= 10_000 {
		s.Trials = 3
	}
	return s
}

// nftEndpointService returns service i of endpoints/N with the endpoint
// chain of generation g: the service's chain (mark for masquerade, jump to
// the endpoint's chain), the endpoint's chain (DNAT) and the map element.
func nftEndpointService(i, g int) (svc, ep netfilter.Chain, el nftables.Element) {
	vip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
	addr := netip.AddrFrom4([4]byte{10, 244 + byte(g), byte(i >> 8), byte(i)})
	name := fmt.Sprintf("svc-%05d", i)
	tcp := netfilter.Protocol(netfilter.ProtoTCP)
	ep = netfilter.Chain{Name: fmt.Sprintf("ep-%05d-%d", i, g), Rules: []netfilter.Rule{
		{Matches: []netfilter.Match{tcp}, Action: netfilter.DNAT(netip.AddrPortFrom(addr, 8080))},
	}}
	svc = netfilter.Chain{Name: name, Rules: []netfilter.Rule{
		{Matches: []netfilter.Match{tcp}, Action: netfilter.SetMaskedMark(0x4000, 0x4000)},
		{Action: netfilter.Jump(ep.Name)},
	}}
	el = nftables.Element{Key: []nftables.Value{nftables.Addr(vip), nftables.Proto(netfilter.ProtoTCP), nftables.Port(80)}, Verdict: netfilter.Goto(name)}
	return svc, ep, el
}

// nftEndpointServices is the state of change-endpoints/N: kube-proxy/N
// with each service's DNAT in an endpoint chain of its own, as kube-proxy
// writes it.
func nftEndpointServices(n int) nftDecl {
	vm := nftables.Set{Name: "service-ips", Key: []nftables.KeyType{nftables.TypeAddr, nftables.TypeProto, nftables.TypePort}, Verdict: true}
	d := nftDecl{role: nftables.NAT, hook: netfilter.HookPrerouting,
		jumps: []netfilter.Rule{{Action: netfilter.VerdictMap("service-ips", netfilter.Dst, netfilter.Dst)}}}
	for i := range n {
		svc, ep, el := nftEndpointService(i, 0)
		d.chains = append(d.chains, svc, ep)
		vm.Elements = append(vm.Elements, el)
	}
	d.sets = []nftables.Set{vm}
	return d
}

// nftChangeEndpoints is one service's endpoint replaced in a table of N
// services: a new endpoint chain, the service's chain jumping to it, the
// old endpoint chain removed — a change of what is programmed, which ours
// follows in time proportional to the change.
func nftChangeEndpoints(n int) harness.Scenario {
	d := nftEndpointServices(n)
	m := n / 2
	svc, ep, _ := nftEndpointService(m, 1)
	_, old, _ := nftEndpointService(m, 0)
	change := func(tbl *nftables.Table) error {
		if err := tbl.SetChains(svc, ep); err != nil {
			return err
		}
		return tbl.RemoveChains(old.Name)
	}
	key := fmt.Sprintf("endpoints/%d/change", n)
	s := harness.Scenario{
		Name: fmt.Sprintf("nftables/change-endpoints/%d", n),
		Size: 1,
		Note: fmt.Sprintf("one service's endpoint replaced (a new endpoint chain, the service's chain jumping to it, the old one deleted) in a kube-proxy-style table of %d services with one endpoint chain each", n),
		Variants: []harness.Variant{
			nftChangeOurs(d, change, func(_ *harness.Env, _ usage, tbl *nftables.Table, before nftables.WorkStats) error {
				if tx := tbl.WorkStats().Transactions - before.Transactions; tx != 1 {
					return fmt.Errorf("change-endpoints wrote %d transactions, want 1", tx)
				}
				return nil
			}),
			nftKnftPeer("nft -f add+flush chains, delete chain (knftables)", key, d, change, func(text string) string {
				return fmt.Sprintf("add chain ip %s %s\n", nftTable, ep.Name) + knftChain(text, ep.Name) + knftChain(text, svc.Name) +
					fmt.Sprintf("delete chain ip %s %s\n", nftTable, old.Name)
			}),
			floorVariant(key, d, change),
		},
	}
	if n >= 10_000 {
		s.Trials = 3
	}
	return s
}

func nftElement(n int) harness.Scenario {
	d := nftSet(n)
	change := func(tbl *nftables.Table) error { return tbl.AddElements("addrs", nftElem) }
	key := fmt.Sprintf("set/%d/change", n)
	return harness.Scenario{
		Name: fmt.Sprintf("nftables/element/%d", n),
		Size: 1,
		Note: fmt.Sprintf("one address added to a set of %d in sync", n),
		Variants: []harness.Variant{
			nftChangeOurs(d, change, func(env *harness.Env, u usage, _ *nftables.Table, _ nftables.WorkStats) error {
				env.Report("us", micros(time.Since(u.start)))
				return nil
			}),
			{
				Name: "nft add element (exec)", Role: harness.Peer,
				Setup: func(ctx context.Context, env *harness.Env) error {
					c, err := capture(key, d, change)
					if err != nil {
						return err
					}
					return replay(env, c.initial)
				},
				Run: func(ctx context.Context, env *harness.Env) error {
					_, err := env.NS.Run(ctx, nil, "nft", "add", "element", "ip", nftTable, "addrs", "{", "192.0.2.1", "}")
					return err
				},
			},
			floorVariant(key, d, change),
		},
	}
}

// nftPeerElementsCap bounds the one-exec-per-element peer.
const nftPeerElementsCap = 1_000

func nftElements(n int) harness.Scenario {
	d := nftSet(n)
	key := fmt.Sprintf("set/%d", n)
	s := harness.Scenario{
		Name: fmt.Sprintf("nftables/elements/%d", n),
		Size: n,
		Note: fmt.Sprintf("a set of %d addresses and the rule using it, into an empty namespace; ours declares them (SetSets) and adds %d elements per transaction; the floors replay prebuilt bytes: all in one transaction, and ours' transactions as captured", n, nftables.DefaultElementsPerTransaction),
		Variants: []harness.Variant{
			nftProgramOurs(d),
			replayFloor("one netlink transaction (hand-built)", key, d, nil, true),
			replayFloor("ours' transactions (hand-built, replayed)", key, d, nil, false),
		},
	}
	if n <= nftPeerElementsCap {
		s.Variants = append(s.Variants, harness.Variant{
			Name: "nft add element (exec per element)", Role: harness.Peer,
			Setup: func(ctx context.Context, env *harness.Env) error {
				return nftFile(ctx, env, fmt.Sprintf("table ip %s { set addrs { type ipv4_addr; }; }", nftTable))
			},
			Run: func(ctx context.Context, env *harness.Env) error {
				for i := range n {
					a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
					if _, err := env.NS.Run(ctx, nil, "nft", "add", "element", "ip", nftTable, "addrs", "{", a.String(), "}"); err != nil {
						return err
					}
				}
				return nil
			},
		})
	} else {
		s.Note += fmt.Sprintf("; the exec-per-element peer runs at %d only (see nftables/elements/%d)", nftPeerElementsCap, nftPeerElementsCap)
	}
	return s
}

// oneBatch merges transactions into one: the requests of all between the
// first's begin and the last's end.
func oneBatch(batches [][]byte) []byte {
	const marker = 20
	if len(batches) == 1 {
		return batches[0]
	}
	var out []byte
	out = append(out, batches[0][:marker]...)
	for _, b := range batches {
		out = append(out, b[marker:len(b)-marker]...)
	}
	return append(out, batches[len(batches)-1][len(batches[len(batches)-1])-marker:]...)
}

func nftHeap(what string, n int) harness.Scenario {
	d := nftRules(n)
	unit := "rule"
	size := n + n/10
	if what == "elements" {
		d, unit, size = nftSet(n), "element", n
	}
	return harness.Scenario{
		Name: fmt.Sprintf("nftables/heap/%s/%d", what, n),
		Size: size,
		Note: fmt.Sprintf("heapB/%s: the heap a Table keeps per %s (declared and kernel views) once applied, the declared values excluded", unit, unit),
		Variants: []harness.Variant{{
			Name: "nodeplane nftables", Role: harness.Ours,
			Setup: func(ctx context.Context, env *harness.Env) error { return openOurs(ctx, env, d, false) },
			Run: func(ctx context.Context, env *harness.Env) error {
				defer closeOurs(env)
				st := env.State.(*nftState)
				runtime.GC()
				base := benchutil.HeapInUse()
				tbl, err := nftables.New(d.options(st.k))
				if err != nil {
					return err
				}
				st.tbl = tbl
				if err := d.declare(tbl); err != nil {
					return err
				}
				if _, err := tbl.Apply(ctx); err != nil {
					return err
				}
				runtime.GC()
				env.Report("heapB/"+unit, float64(benchutil.HeapInUse()-base)/float64(size))
				runtime.KeepAlive(tbl)
				return nil
			},
		}},
	}
}

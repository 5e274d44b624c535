//go:build linux

package scenarios

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	goipt "github.com/coreos/go-iptables/iptables"

	"github.com/nodeplane/nodeplane/bench/internal/harness"
	"github.com/nodeplane/nodeplane/internal/testkit/benchutil"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// The iptables scenarios, each for the legacy and the nft backend (IPv4
// filter table). N rules live in N/10 owned chains of 10 rules each
// (`-s <addr>/32 -p tcp -m tcp --dport <port> -j ACCEPT`, plus our hash
// comment), and FORWARD jumps to every chain (N/10 more rules).
//
//   - iptables/initial/<backend>/N: program everything into an empty
//     table. Ours is New + SetChains + InsertRules + Apply
//     (one in-process read to adopt, one iptables-restore); the floor is one
//     hand-written iptables-restore of exactly the same lines (rendered in
//     Setup); the peer is github.com/coreos/go-iptables v0.8.0, NewChain
//     and one Append exec per rule, as agents built on it do (capped).
//   - iptables/change-one/<backend>/10000: one rule of one chain changes in
//     a table already programmed and in sync. Ours is SetChains + Apply
//     (no read: the Table trusts its last write); the floor is a restore of
//     the one `-R` line; the peer one go-iptables Replace exec.
//   - iptables/noop/<backend>/10000: nothing changed. Ours is a restarted
//     agent: a new Table declares the same state and applies (one read, in
//     process, and zero restores), then applies again (runs nothing,
//     reported as again_*); the floor is one iptables-save.
//   - iptables/heap/nft/10000: heap the Table keeps per programmed rule
//     (heapB/rule), and again after the whole state was declared again
//     unchanged and one chain changed and was applied
//     (heapB/rule_updated): the kept rendering must not grow it.
//
// Ours reaches the trial's namespace through a kernel.Namespace (the one
// kernel option), opened in Setup and closed by Run, so it reads the table
// in process (xtables getsockopt for legacy, nf_tables netlink for nft):
// saves=0. Reading with iptables-save instead (as ours did for a while)
// took a restart at 10k legacy rules from 32-40 to 75-85 ms of CPU.
//
// Ours reports where its time goes: bin_ms is wall time inside the save and
// restore binaries (for legacy that includes the kernel replacing the whole
// table, O(total rules) however small the change), go_ms the rest of the
// wall time (our userspace work: rendering, hashing, parsing, diffing),
// self_cpu_ms the CPU of this process only and child_cpu_ms that of the
// binaries (user and kernel).
const (
	iptPrefix = "np-"
	// iptPeerCap is the largest size the one-exec-per-rule peer runs at:
	// it is O(n²) (every exec copies the whole table), minutes at 10k.
	iptPeerCap = 1_000
	// iptChangeRule is the rule change-one changes (1-based), in the chain
	// in the middle of the table.
	iptChangeRule = 5
)

// iptFamily is the IP family of every scenario.
const iptFamily = ipfamily.IPv4

var iptBackends = []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT}

func init() {
	for _, b := range iptBackends {
		for _, n := range []int{100, 1_000, 10_000} {
			harness.Register(iptInitial(b, n))
		}
	}
	for _, b := range iptBackends {
		harness.Register(iptChangeOne(b, 10_000))
	}
	for _, b := range iptBackends {
		harness.Register(iptNoop(b, 10_000))
	}
	harness.Register(iptHeap(iptables.BackendNFT, 10_000))
}

// iptDecl is the declared state: chains and the FORWARD jumps to them.
type iptDecl struct {
	chains []netfilter.Chain
	jumps  []netfilter.Rule
}

// iptRule is rule j of chain c.
func iptRule(c, j int) netfilter.Rule {
	k := c*10 + j + 1
	addr := netip.AddrFrom4([4]byte{10, byte(k >> 16), byte(k >> 8), byte(k)})
	return netfilter.Rule{
		Matches: []netfilter.Match{
			netfilter.SourceNet(netip.PrefixFrom(addr, 32)),
			netfilter.Protocol(netfilter.ProtoTCP),
			netfilter.DestPorts(netfilter.Port(uint16(1000 + j))),
		},
		Action: netfilter.Accept(),
	}
}

func iptChainName(c int) string { return fmt.Sprintf("%s%04d", iptPrefix, c) }

func iptDeclare(n int) iptDecl {
	var d iptDecl
	for c := 0; c < n/10; c++ {
		rules := make([]netfilter.Rule, 10)
		for j := range rules {
			rules[j] = iptRule(c, j)
		}
		d.chains = append(d.chains, netfilter.Chain{Name: iptChainName(c), Rules: rules})
		d.jumps = append(d.jumps, netfilter.Rule{Action: netfilter.Jump(iptChainName(c))})
	}
	return d
}

// iptChanged returns the chain that change-one sets: one rule differs.
func iptChanged(n int) netfilter.Chain {
	c := n / 20 // a chain in the middle
	ch := iptDeclare(n).chains[c]
	ch.Rules = append([]netfilter.Rule(nil), ch.Rules...)
	ch.Rules[iptChangeRule-1] = netfilter.Rule{
		Matches: []netfilter.Match{netfilter.SourceNet(netip.MustParsePrefix("192.0.2.1/32")),
			netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestPorts(netfilter.Port(9))},
		Action: netfilter.Drop(),
	}
	return ch
}

// iptOptions are the options of ours on the namespace k, no rechecks.
func iptOptions(b iptables.Backend, k kernel.Commands) iptables.Options {
	return iptables.Options{
		Table: "filter", Family: iptFamily, Backend: b, ChainPrefix: iptPrefix,
		Kernel: k, PostWriteRecheck: []time.Duration{},
	}
}

// iptProgram declares d on a new Table and applies it.
func iptProgram(ctx context.Context, o iptables.Options, d iptDecl) (*iptables.Table, error) {
	tbl, err := iptables.New(o)
	if err != nil {
		return nil, err
	}
	if err := tbl.SetChains(d.chains...); err != nil {
		return nil, err
	}
	if err := tbl.InsertRules("bench", netfilter.HookForward, d.jumps); err != nil {
		return nil, err
	}
	_, err = tbl.Apply(ctx)
	return tbl, err
}

// iptRendered returns the restore inputs ours writes for d (initial) and
// for the change-one change, rendered through the fake kernel.
func iptRendered(b iptables.Backend, n int) (initial, change []byte, err error) {
	ns := kernelfake.New(kernelfake.Options{})
	k := ns.IPTables()
	tbl, err := iptProgram(context.Background(), iptOptions(b, ns), iptDeclare(n))
	if err != nil {
		return nil, nil, err
	}
	last := func() []byte {
		calls := k.Calls()
		return []byte(calls[len(calls)-1].Stdin)
	}
	initial = last()
	if err := tbl.SetChains(iptChanged(n)); err != nil {
		return nil, nil, err
	}
	if _, err := tbl.Apply(context.Background()); err != nil {
		return nil, nil, err
	}
	change = last()
	if bytes.Count(change, []byte("\n")) != 3 {
		return nil, nil, fmt.Errorf("change-one writes %q, want one line", change)
	}
	return initial, change, nil
}

// iptRestore runs a hand-written restore in the trial's namespace.
func iptRestore(ctx context.Context, env *harness.Env, b iptables.Backend, input []byte) error {
	_, err := env.NS.Run(ctx, bytes.NewReader(input), b.RestoreCommand(iptFamily), "-w", "5", "--noflush")
	return err
}

// usage measures a Run for the ours metrics.
type usage struct {
	start      time.Time
	self, kids time.Duration
}

func startUsage() usage {
	self, kids := benchutil.CPU()
	return usage{start: time.Now(), self: self, kids: kids}
}

// reportCPU records the CPU time of this process and of its children since
// u started.
func (u usage) reportCPU(env *harness.Env) {
	self, kids := benchutil.CPU()
	env.Report("self_cpu_ms", float64(self-u.self)/float64(time.Millisecond))
	env.Report("child_cpu_ms", float64(kids-u.kids)/float64(time.Millisecond))
}

// report records where the time of a Run went, given the tables it used.
func (u usage) report(env *harness.Env, tables ...*iptables.Table) {
	wall := time.Since(u.start)
	var bin time.Duration
	restores, saves := 0, 0
	for _, t := range tables {
		st := t.WorkStats()
		bin += st.SaveTime + st.RestoreTime
		restores += st.Restores
		saves += st.Saves
	}
	env.Report("bin_ms", millis(bin))
	env.Report("go_ms", millis(wall-bin))
	u.reportCPU(env)
	env.Report("restores", float64(restores))
	env.Report("saves", float64(saves))
}

// iptState is what a variant's Setup hands to its Run.
type iptState struct {
	k     *kernel.Namespace // ours: the trial's namespace, closed by Run
	decl  iptDecl
	tbl   *iptables.Table
	peer  *goipt.IPTables
	specs [][]string // peer: per rule, chain then rulespec
}

// iptOpen opens the trial's namespace for ours, whose Run declares decl
// (and closes the namespace).
func iptOpen(env *harness.Env, decl iptDecl) (*iptState, error) {
	k, err := kernel.Open(env.NS.Path())
	st := &iptState{k: k, decl: decl}
	env.State = st
	return st, err
}

// iptProgramOurs is ours' measured programming: a new Table declares what
// iptOpen was given and applies it, and u.report records where the time
// went. The namespace stays open for the Run to close.
func iptProgramOurs(ctx context.Context, env *harness.Env, b iptables.Backend) (*iptables.Table, error) {
	st := env.State.(*iptState)
	u := startUsage()
	tbl, err := iptProgram(ctx, iptOptions(b, st.k), st.decl)
	if err != nil {
		return nil, err
	}
	u.report(env, tbl)
	return tbl, nil
}

// iptOpenProgrammed is iptOpen after which a Table (st.tbl, for Run to
// change) applies programmed there; settle follows.
func iptOpenProgrammed(ctx context.Context, env *harness.Env, b iptables.Backend, decl, programmed iptDecl) error {
	st, err := iptOpen(env, decl)
	if err != nil {
		return err
	}
	if st.tbl, err = iptProgram(ctx, iptOptions(b, st.k), programmed); err != nil {
		return err
	}
	return settle(ctx)
}

// iptLoadByRestore loads the table of n rules in the trial's namespace by a
// hand-written restore and settles; it returns the restore input of the
// change-one change.
func iptLoadByRestore(ctx context.Context, env *harness.Env, b iptables.Backend, n int) ([]byte, error) {
	in, change, err := iptRendered(b, n)
	if err != nil {
		return nil, err
	}
	if err := iptRestore(ctx, env, b, in); err != nil {
		return nil, err
	}
	return change, settle(ctx)
}

// iptRestoreChange is the hand-written change-one change on the table of n
// rules, loaded by a restore: one restore of the `-R` line.
func iptRestoreChange(name string, role harness.Role, b iptables.Backend, n int) harness.Variant {
	return harness.Variant{
		Name: name, Role: role,
		Setup: keep(func(ctx context.Context, env *harness.Env) ([]byte, error) { return iptLoadByRestore(ctx, env, b, n) }),
		Run: func(ctx context.Context, env *harness.Env) error {
			return iptRestore(ctx, env, b, env.State.([]byte))
		},
	}
}

func iptInitial(b iptables.Backend, n int) harness.Scenario {
	s := harness.Scenario{
		Name: fmt.Sprintf("iptables/initial/%s/%d", b, n),
		Size: n + n/10,
		Note: fmt.Sprintf("%d rules in %d chains of 10 plus %d FORWARD jumps; ours includes the initial read of the table (in process)", n, n/10, n/10),
		Variants: []harness.Variant{
			{
				Name: "nodeplane iptables", Role: harness.Ours,
				Setup: func(_ context.Context, env *harness.Env) error {
					_, err := iptOpen(env, iptDeclare(n))
					return err
				},
				Run: func(ctx context.Context, env *harness.Env) error {
					defer env.State.(*iptState).k.Close()
					_, err := iptProgramOurs(ctx, env, b)
					return err
				},
			},
			{
				Name: "iptables-restore (hand-written)", Role: harness.Floor,
				Setup: func(_ context.Context, env *harness.Env) error {
					in, _, err := iptRendered(b, n)
					env.State = in
					return err
				},
				Run: func(ctx context.Context, env *harness.Env) error {
					return iptRestore(ctx, env, b, env.State.([]byte))
				},
			},
		},
	}
	if n <= iptPeerCap {
		s.Variants = append(s.Variants, harness.Variant{
			Name: "go-iptables (exec per rule)", Role: harness.Peer,
			Setup: func(_ context.Context, env *harness.Env) error {
				in, _, err := iptRendered(b, n)
				if err != nil {
					return err
				}
				st := &iptState{specs: iptSpecs(in)}
				st.peer, err = iptPeer(env, b)
				env.State = st
				return err
			},
			Run: func(ctx context.Context, env *harness.Env) error {
				st := env.State.(*iptState)
				return env.NS.Do(func() error {
					for c := 0; c < n/10; c++ {
						if err := st.peer.NewChain("filter", iptChainName(c)); err != nil {
							return err
						}
					}
					for _, spec := range st.specs {
						if err := st.peer.Append("filter", spec[0], spec[1:]...); err != nil {
							return err
						}
					}
					return nil
				})
			},
		})
	} else {
		s.Note += fmt.Sprintf("; peer (go-iptables, one exec per rule) capped at %d rules: it is O(n²) and would take minutes per trial here", iptPeerCap)
	}
	return s
}

// iptSpecs turns rendered restore input into go-iptables arguments: for
// each -A line, the chain and the rule spec (our hash comments need no
// quotes).
func iptSpecs(input []byte) [][]string {
	var out [][]string
	for _, line := range strings.Split(string(input), "\n") {
		if !strings.HasPrefix(line, "-A ") && !strings.HasPrefix(line, "-I ") {
			continue
		}
		f := strings.Fields(line)
		args := f[1:]
		if f[0] == "-I" {
			args = append([]string{f[1]}, f[3:]...) // drop the index: appending in order is the same
		}
		for i, a := range args {
			args[i] = strings.Trim(a, `"`)
		}
		out = append(out, args)
	}
	return out
}

// iptPeer returns a go-iptables handle on the backend's binary. Its
// constructor runs `iptables --version` once (not measured).
func iptPeer(env *harness.Env, b iptables.Backend) (*goipt.IPTables, error) {
	bin := "iptables-" + string(b)
	path, err := exec.LookPath(bin)
	if err != nil {
		path = "/usr/sbin/" + bin
	}
	var ipt *goipt.IPTables
	err = env.NS.Do(func() error {
		var err error
		ipt, err = goipt.New(goipt.IPFamily(goipt.ProtocolIPv4), goipt.Timeout(5), goipt.Path(path))
		return err
	})
	return ipt, err
}

func iptChangeOne(b iptables.Backend, n int) harness.Scenario {
	return harness.Scenario{
		Name: fmt.Sprintf("iptables/change-one/%s/%d", b, n),
		Size: 1,
		Note: fmt.Sprintf("rule %d of chain %s changes in a table of %d rules already in sync; legacy's kernel replaces the whole table on every write (O(total)), see bin_ms vs go_ms", iptChangeRule, iptChainName(n/20), n+n/10),
		Variants: []harness.Variant{
			{
				Name: "nodeplane iptables", Role: harness.Ours,
				Setup: func(ctx context.Context, env *harness.Env) error {
					return iptOpenProgrammed(ctx, env, b, iptDecl{chains: []netfilter.Chain{iptChanged(n)}}, iptDeclare(n))
				},
				Run: func(ctx context.Context, env *harness.Env) error {
					st := env.State.(*iptState)
					defer st.k.Close()
					before := st.tbl.WorkStats()
					u := startUsage()
					if err := st.tbl.SetChains(st.decl.chains[0]); err != nil {
						return err
					}
					if _, err := st.tbl.Apply(ctx); err != nil {
						return err
					}
					after := st.tbl.WorkStats()
					if after.Restores-before.Restores != 1 || after.Saves != before.Saves || after.LinesWritten-before.LinesWritten != 1 {
						return fmt.Errorf("change-one ran %d restores (%d lines) and %d saves, want 1 (1) and 0",
							after.Restores-before.Restores, after.LinesWritten-before.LinesWritten, after.Saves-before.Saves)
					}
					wall := time.Since(u.start)
					bin := after.RestoreTime - before.RestoreTime
					env.Report("bin_ms", millis(bin))
					env.Report("go_ms", millis(wall-bin))
					u.reportCPU(env)
					return nil
				},
			},
			iptRestoreChange("iptables-restore -R (hand-written)", harness.Floor, b, n),
			{
				Name: "go-iptables Replace (exec)", Role: harness.Peer,
				Setup: func(ctx context.Context, env *harness.Env) error {
					change, err := iptLoadByRestore(ctx, env, b, n)
					if err != nil {
						return err
					}
					// "-R CHAIN N spec…" from the rendered change.
					f := strings.Fields(strings.Split(string(change), "\n")[1])
					for i := range f {
						f[i] = strings.Trim(f[i], `"`)
					}
					st := &iptState{specs: [][]string{f[1:]}}
					st.peer, err = iptPeer(env, b)
					env.State = st
					return err
				},
				Run: func(ctx context.Context, env *harness.Env) error {
					st := env.State.(*iptState)
					spec := st.specs[0]
					pos, err := strconv.Atoi(spec[1])
					if err != nil {
						return err
					}
					return env.NS.Do(func() error { return st.peer.Replace("filter", spec[0], pos, spec[2:]...) })
				},
			},
		},
	}
}

func iptNoop(b iptables.Backend, n int) harness.Scenario {
	return harness.Scenario{
		Name: fmt.Sprintf("iptables/noop/%s/%d", b, n),
		Size: n + n/10,
		Note: "nothing changed: a restarted agent's new Table adopts the state with one read and restores=0 (the floor is that read); again_us/again_runs: the next Apply of the same table runs no binary",
		Variants: []harness.Variant{
			{
				Name: "nodeplane iptables (restart)", Role: harness.Ours,
				Setup: func(ctx context.Context, env *harness.Env) error {
					d := iptDeclare(n)
					return iptOpenProgrammed(ctx, env, b, d, d)
				},
				Run: func(ctx context.Context, env *harness.Env) error {
					defer env.State.(*iptState).k.Close()
					tbl, err := iptProgramOurs(ctx, env, b)
					if err != nil {
						return err
					}
					st := tbl.WorkStats()
					if st.Restores != 0 {
						return fmt.Errorf("a restart on an in-sync table ran %d restores", st.Restores)
					}
					// And the next Apply of that table, with nothing changed,
					// runs nothing at all.
					t0 := time.Now()
					if _, err := tbl.Apply(ctx); err != nil {
						return err
					}
					env.Report("again_us", micros(time.Since(t0)))
					again := tbl.WorkStats()
					env.Report("again_runs", float64(again.Restores+again.Saves-st.Restores-st.Saves))
					return nil
				},
			},
			{
				Name: "iptables-save (the read)", Role: harness.Floor,
				Setup: func(ctx context.Context, env *harness.Env) error {
					_, err := iptLoadByRestore(ctx, env, b, n)
					return err
				},
				Run: func(ctx context.Context, env *harness.Env) error {
					_, err := env.NS.Run(ctx, nil, b.SaveCommand(iptFamily), "-t", "filter")
					return err
				},
			},
		},
	}
}

func iptHeap(b iptables.Backend, n int) harness.Scenario {
	return harness.Scenario{
		Name: fmt.Sprintf("iptables/heap/%s/%d", b, n),
		Size: n + n/10,
		Note: "heapB/rule: heap the Table keeps per programmed rule (desired and kernel views) once applied, the declared Rule values excluded; heapB/rule_updated: the same after declaring everything again unchanged and changing one chain; times include forced GCs",
		Variants: []harness.Variant{{
			Name: "nodeplane iptables", Role: harness.Ours,
			Setup: func(_ context.Context, env *harness.Env) error {
				_, err := iptOpen(env, iptDeclare(n))
				return err
			},
			Run: func(ctx context.Context, env *harness.Env) error {
				st := env.State.(*iptState)
				defer st.k.Close()
				before := benchutil.HeapInUse()
				tbl, err := iptProgram(ctx, iptOptions(b, st.k), st.decl)
				if err != nil {
					return err
				}
				env.Report("heapB/rule", heapPer(before, n+n/10))
				// The same state declared again (kept as rendered) and one
				// chain changed: the heap must stay where it was.
				if err := tbl.SetChains(st.decl.chains...); err != nil {
					return err
				}
				if err := tbl.InsertRules("bench", netfilter.HookForward, st.decl.jumps); err != nil {
					return err
				}
				if err := tbl.SetChains(iptChanged(n)); err != nil {
					return err
				}
				if _, err := tbl.Apply(ctx); err != nil {
					return err
				}
				env.Report("heapB/rule_updated", heapPer(before, n+n/10))
				runtime.KeepAlive(tbl)
				runtime.KeepAlive(st)
				return nil
			},
		}},
	}
}

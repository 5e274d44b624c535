package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/kernel"
)

// ErrInjected is the cause of every failure a Recorder injects (with
// syscall.EIO for the netlink writes).
var ErrInjected = errors.New("drivertest: injected failure")

// maxLogged bounds the lines of a restore input kept in the write log.
const maxLogged = 12

// Recorder wraps a kernel.Kernel for a driver under test: it counts and
// logs every write that goes through it, and fails the next n writes on
// request (FailWrites). Reads and subscriptions pass through untouched.
//
// A write is a call that changes the namespace: each operation of a
// batched write (ApplyRoutes, ApplyNeighbors, ApplyFDB) counts once, and so
// does each call of AddRule, DeleteRule, the link, address and sysctl
// changes, DeleteConntrack, and each run of a binary that writes (see
// RunWrites: iptables-restore, ipset restore, ipset add…). A Recorder is
// safe for concurrent use.
type Recorder struct {
	k kernel.Kernel

	mu       sync.Mutex
	fail     int
	writes   int
	failed   int
	failedOp int
	log      []string
}

// Record returns a Recorder in front of k.
func Record(k kernel.Kernel) *Recorder { return &Recorder{k: k} }

// FailWrites makes the next n writes fail with an error wrapping
// ErrInjected, before they reach the namespace; n <= 0 disarms it. A
// netlink write fails with a *kernel.OpError wrapping ErrInjected and
// syscall.EIO (for a batched write, that operation alone). A binary fails
// as one the kernel refused: a *command.Error with exit status 1 whose
// standard error names the first line of a restore input that is not a
// table header, comment or COMMIT, in the binary's own words
// ("iptables-restore: line 2 failed", "ipset v7.17: Error in line 1: …").
func (r *Recorder) FailWrites(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = max(n, 0)
}

// Writes returns how many writes were made since the last ResetCounts.
func (r *Recorder) Writes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes
}

// Failed returns how many writes failed since the last ResetCounts, and
// how many of those were netlink object writes (an operation of a batched
// write, a rule, a link or address change), whose failure is an object's
// failure; the rest were runs of binaries. Failures injected by the
// Recorder count, and so do those the namespace returned.
func (r *Recorder) Failed() (total, objects int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed, r.failedOp
}

// Log returns the writes made since the last ResetCounts, one entry per
// write, such as "replace route 10.0.0.0/24 table 1000" or "run
// iptables-nft-restore --noflush" followed by the input's first lines.
func (r *Recorder) Log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// ResetCounts sets the write and failure counts back to zero and empties
// the log. It does not disarm FailWrites.
func (r *Recorder) ResetCounts() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes, r.failed, r.failedOp, r.log = 0, 0, 0, nil
}

// enter counts one write described by what and returns the injected
// failure it must fail with, if any.
func (r *Recorder) enter(what string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	r.log = append(r.log, what)
	if r.fail == 0 {
		return nil
	}
	r.fail--
	return ErrInjected
}

// done records the outcome of a write; object says it was a netlink
// object write rather than a run of a binary.
func (r *Recorder) done(err error, object bool) error {
	if err != nil {
		r.mu.Lock()
		r.failed++
		if object {
			r.failedOp++
		}
		r.mu.Unlock()
	}
	return err
}

// write performs one netlink write described by op and object.
func (r *Recorder) write(op, object string, fn func() error) error {
	if err := r.enter(op + " " + object); err != nil {
		return r.done(&kernel.OpError{Op: op, Object: object, Err: fmt.Errorf("%w (%w)", err, syscall.EIO)}, true)
	}
	return r.done(fn(), true)
}

// batch performs a batched write: operations that fail by injection get
// their own error and are left out of the batch; the others go to apply
// in one call, in their order.
func batch[T any](r *Recorder, ops []T, describe func(T) (op, object string), apply func([]T) []error) []error {
	errs := make([]error, len(ops))
	var pass []T
	var at []int
	for i, o := range ops {
		op, object := describe(o)
		if err := r.enter(op + " " + object); err != nil {
			errs[i] = r.done(&kernel.OpError{Op: op, Object: object, Err: fmt.Errorf("%w (%w)", err, syscall.EIO)}, true)
			continue
		}
		pass = append(pass, o)
		at = append(at, i)
	}
	if len(pass) == 0 {
		return errs
	}
	got := apply(pass)
	for j, i := range at {
		var err error
		if j < len(got) {
			err = got[j]
		} else {
			err = fmt.Errorf("drivertest: the namespace returned %d errors for %d operations", len(got), len(pass))
		}
		errs[i] = r.done(err, true)
	}
	return errs
}

// Links implements kernel.Links.
func (r *Recorder) Links(ctx context.Context) ([]kernel.Link, error) { return r.k.Links(ctx) }

// LinkByName implements kernel.Links.
func (r *Recorder) LinkByName(ctx context.Context, name string) (kernel.Link, error) {
	return r.k.LinkByName(ctx, name)
}

// AddLink implements kernel.Links; it is a write.
func (r *Recorder) AddLink(ctx context.Context, l kernel.Link) (kernel.Link, error) {
	var out kernel.Link
	err := r.write("add link", l.Name, func() (err error) {
		out, err = r.k.AddLink(ctx, l)
		return err
	})
	return out, err
}

// DeleteLink implements kernel.Links; it is a write.
func (r *Recorder) DeleteLink(ctx context.Context, index int) error {
	return r.write("delete link", fmt.Sprint(index), func() error { return r.k.DeleteLink(ctx, index) })
}

// SetLinkUp implements kernel.Links; it is a write.
func (r *Recorder) SetLinkUp(ctx context.Context, index int, up bool) error {
	return r.write("set link up", fmt.Sprintf("%d %v", index, up), func() error { return r.k.SetLinkUp(ctx, index, up) })
}

// SetLinkMTU implements kernel.Links; it is a write.
func (r *Recorder) SetLinkMTU(ctx context.Context, index, mtu int) error {
	return r.write("set link mtu", fmt.Sprintf("%d %d", index, mtu), func() error { return r.k.SetLinkMTU(ctx, index, mtu) })
}

// SetLinkMAC implements kernel.Links; it is a write.
func (r *Recorder) SetLinkMAC(ctx context.Context, index int, mac net.HardwareAddr) error {
	return r.write("set link mac", fmt.Sprintf("%d %v", index, mac), func() error { return r.k.SetLinkMAC(ctx, index, mac) })
}

// Addrs implements kernel.Addrs.
func (r *Recorder) Addrs(ctx context.Context, family kernel.Family) ([]kernel.Addr, error) {
	return r.k.Addrs(ctx, family)
}

// AddAddr implements kernel.Addrs; it is a write.
func (r *Recorder) AddAddr(ctx context.Context, a kernel.Addr) error {
	return r.write("add address", fmt.Sprintf("%v dev %d", a.Prefix, a.LinkIndex), func() error { return r.k.AddAddr(ctx, a) })
}

// DeleteAddr implements kernel.Addrs; it is a write.
func (r *Recorder) DeleteAddr(ctx context.Context, a kernel.Addr) error {
	return r.write("delete address", fmt.Sprintf("%v dev %d", a.Prefix, a.LinkIndex), func() error { return r.k.DeleteAddr(ctx, a) })
}

// DumpRoutes implements kernel.Routes.
func (r *Recorder) DumpRoutes(ctx context.Context, family kernel.Family, table uint32, fn func(*kernel.Route) error, reset func()) error {
	return r.k.DumpRoutes(ctx, family, table, fn, reset)
}

// DumpInterfaceRoutes implements kernel.Routes.
func (r *Recorder) DumpInterfaceRoutes(ctx context.Context, family kernel.Family, table uint32, oif int, fn func(*kernel.Route) error, reset func()) error {
	return r.k.DumpInterfaceRoutes(ctx, family, table, oif, fn, reset)
}

// ApplyRoutes implements kernel.Routes; each operation is a write.
func (r *Recorder) ApplyRoutes(ctx context.Context, ops []kernel.RouteOp) []error {
	return batch(r, ops, func(o kernel.RouteOp) (string, string) {
		return o.Kind.String() + " route", fmt.Sprintf("%v table %d", o.Route.Dst, o.Route.Table)
	}, func(ops []kernel.RouteOp) []error { return r.k.ApplyRoutes(ctx, ops) })
}

// Rules implements kernel.Rules.
func (r *Recorder) Rules(ctx context.Context, family kernel.Family) ([]kernel.Rule, error) {
	return r.k.Rules(ctx, family)
}

// AddRule implements kernel.Rules; it is a write.
func (r *Recorder) AddRule(ctx context.Context, rule kernel.Rule) error {
	return r.write("add rule", describeRule(rule), func() error { return r.k.AddRule(ctx, rule) })
}

// DeleteRule implements kernel.Rules; it is a write.
func (r *Recorder) DeleteRule(ctx context.Context, rule kernel.Rule) error {
	return r.write("delete rule", describeRule(rule), func() error { return r.k.DeleteRule(ctx, rule) })
}

func describeRule(r kernel.Rule) string {
	return fmt.Sprintf("%v priority %d action %d table %d", r.Family, r.Priority, r.Action, r.Table)
}

// Neighbors implements kernel.Neighbors.
func (r *Recorder) Neighbors(ctx context.Context, family kernel.Family, linkIndex int) ([]kernel.Neighbor, error) {
	return r.k.Neighbors(ctx, family, linkIndex)
}

// ApplyNeighbors implements kernel.Neighbors; each operation is a write.
func (r *Recorder) ApplyNeighbors(ctx context.Context, ops []kernel.NeighborOp) []error {
	return batch(r, ops, func(o kernel.NeighborOp) (string, string) {
		return o.Kind.String() + " neighbor", fmt.Sprintf("%v dev %d", o.Neighbor.IP, o.Neighbor.LinkIndex)
	}, func(ops []kernel.NeighborOp) []error { return r.k.ApplyNeighbors(ctx, ops) })
}

// FDB implements kernel.FDB.
func (r *Recorder) FDB(ctx context.Context, linkIndex int) ([]kernel.FDBEntry, error) {
	return r.k.FDB(ctx, linkIndex)
}

// ApplyFDB implements kernel.FDB; each operation is a write.
func (r *Recorder) ApplyFDB(ctx context.Context, ops []kernel.FDBOp) []error {
	return batch(r, ops, func(o kernel.FDBOp) (string, string) {
		return o.Kind.String() + " fdb", fmt.Sprintf("%v dst %v dev %d", o.Entry.MAC, o.Entry.Dst, o.Entry.LinkIndex)
	}, func(ops []kernel.FDBOp) []error { return r.k.ApplyFDB(ctx, ops) })
}

// Sysctl implements kernel.Sysctls.
func (r *Recorder) Sysctl(ctx context.Context, key string) (string, error) {
	return r.k.Sysctl(ctx, key)
}

// SetSysctl implements kernel.Sysctls; it is a write.
func (r *Recorder) SetSysctl(ctx context.Context, key, value string) error {
	return r.write("set sysctl", key+"="+value, func() error { return r.k.SetSysctl(ctx, key, value) })
}

// DeleteConntrack implements kernel.Conntrack; it is a write.
func (r *Recorder) DeleteConntrack(ctx context.Context, family kernel.Family, addrs []netip.Addr) (int, error) {
	var n int
	err := r.write("delete conntrack", fmt.Sprint(addrs), func() (err error) {
		n, err = r.k.DeleteConntrack(ctx, family, addrs)
		return err
	})
	return n, err
}

// Subscribe implements kernel.Events.
func (r *Recorder) Subscribe(ctx context.Context, kinds kernel.EventKinds, opts ...kernel.SubscribeOptions) (<-chan kernel.Event, error) {
	return r.k.Subscribe(ctx, kinds, opts...)
}

// Do implements kernel.Doer by passing fn through: what fn writes (through
// sockets of its own) is neither counted nor failed.
func (r *Recorder) Do(fn func() error) error { return r.k.Do(fn) }

// WireGuardDevice implements kernel.WireGuard.
func (r *Recorder) WireGuardDevice(ctx context.Context, name string) (kernel.WireGuardDevice, error) {
	return r.k.WireGuardDevice(ctx, name)
}

// ConfigureWireGuard implements kernel.WireGuard; it is a write.
func (r *Recorder) ConfigureWireGuard(ctx context.Context, name string, cfg kernel.WireGuardConfig) error {
	return r.write("configure wireguard", name, func() error { return r.k.ConfigureWireGuard(ctx, name, cfg) })
}

// OpenNFTablesSocket implements kernel.NFTables by passing through: what
// is written on the socket is neither counted nor failed (drivers on
// nf_tables are checked on the fake's own nf_tables view).
func (r *Recorder) OpenNFTablesSocket() (kernel.NFTablesSocket, error) {
	return r.k.OpenNFTablesSocket()
}

// Runner implements kernel.Commands: runs of binaries that write (see
// RunWrites) are counted, logged and failed as FailWrites says; the others
// pass through.
func (r *Recorder) Runner() command.Runner {
	inner := r.k.Runner()
	return command.RunnerFunc(func(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
		if !RunWrites(name, args) {
			return inner.Run(ctx, stdin, name, args...)
		}
		var input []byte
		if stdin != nil {
			var err error
			if input, err = io.ReadAll(stdin); err != nil {
				return nil, fmt.Errorf("drivertest: reading the input of %s: %w", name, err)
			}
			stdin = bytes.NewReader(input)
		}
		argv := append([]string{name}, args...)
		what := "run " + strings.Join(argv, " ")
		if lines := strings.Split(strings.TrimRight(string(input), "\n"), "\n"); len(input) > 0 {
			if len(lines) > maxLogged {
				lines = append(lines[:maxLogged], fmt.Sprintf("… %d lines in all", len(lines)))
			}
			what += "\n\t" + strings.Join(lines, "\n\t")
		}
		if err := r.enter(what); err != nil {
			return nil, r.done(refusal(argv, input, err), false)
		}
		out, err := inner.Run(ctx, stdin, name, args...)
		return out, r.done(err, false)
	})
}

// refusal is the error of an injected failure of a binary: what the binary
// prints when the kernel refuses the first line of its input that belongs
// to an object.
func refusal(argv []string, input []byte, cause error) error {
	base := filepath.Base(argv[0])
	line := firstObjectLine(input)
	var msg string
	switch {
	case base == "ipset" && line > 0:
		msg = fmt.Sprintf("ipset v7.17: Error in line %d: Kernel error received: injected failure", line)
	case base == "ipset":
		msg = "ipset v7.17: Kernel error received: injected failure"
	case strings.HasSuffix(base, "-restore") && line > 0:
		msg = fmt.Sprintf("%s: line %d failed", base, line)
	default:
		msg = base + ": injected failure"
	}
	return &command.Error{Argv: argv, ExitCode: 1, Stderr: []byte(msg + "\n"), Err: fmt.Errorf("%w: exit status 1", cause)}
}

// firstObjectLine returns the 1-based number of the first line of a
// restore input that is not blank, a table header (*filter), a comment or
// COMMIT; 0 when there is none.
func firstObjectLine(input []byte) int {
	for i, line := range strings.Split(string(input), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line == "COMMIT" || strings.HasPrefix(line, "*") || strings.HasPrefix(line, "#") {
			continue
		}
		return i + 1
	}
	return 0
}

// RunWrites reports whether running the binary name with args changes the
// kernel: the iptables restore binaries and the single iptables commands
// that change a table; ipset restore and the ipset commands that change
// sets; nft unless it only lists. The save and list commands are reads.
// A binary it does not know counts as a write.
func RunWrites(name string, args []string) bool {
	base := filepath.Base(name)
	switch {
	case strings.HasPrefix(base, "iptables") || strings.HasPrefix(base, "ip6tables"):
		switch {
		case strings.HasSuffix(base, "-save"):
			return false
		case strings.HasSuffix(base, "-restore"):
			return true
		}
		for _, a := range args {
			switch a {
			case "-A", "--append", "-I", "--insert", "-D", "--delete", "-R", "--replace", "-N", "--new-chain",
				"-X", "--delete-chain", "-F", "--flush", "-P", "--policy", "-E", "--rename-chain", "-Z", "--zero":
				return true
			}
		}
		return false
	case base == "ipset":
		for _, a := range args {
			if strings.HasPrefix(a, "-") {
				continue
			}
			switch a {
			case "list", "save", "test", "version", "help":
				return false
			}
			return true
		}
		return false
	case base == "nft":
		return !slices.Contains(args, "list")
	}
	return true
}

package drivertest_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
)

// toy is a small driver for the suite's own tests: it keeps blackhole
// routes with its protocol in one table equal to a declared set. bug, when
// set, breaks it in one of the ways the suite must catch.
type toy struct {
	k   kernel.Routes
	fam ipfamily.Family
	clk clock.Clock
	bug string

	mu    sync.Mutex
	want  map[netip.Prefix]bool
	have  map[netip.Prefix]bool
	stale bool
	retry map[netip.Prefix]dataplane.Retry
	// failing and writes are what Stats reports.
	failing int
	writes  uint64
}

// Stats implements dataplane.StatsReporter.
func (d *toy) Stats() dataplane.DriverStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := dataplane.DriverStats{Desired: len(d.want), InKernel: len(d.have), Failing: d.failing, Writes: d.writes}
	if d.bug == "stats-failing-zero" {
		st.Failing = 0
	}
	return st
}

const (
	toyTable   = 100
	toyOther   = 101
	toyProto   = 99
	toyForeign = 4
)

func newToy(k kernel.Routes, fam ipfamily.Family, clk clock.Clock, bug string) *toy {
	return &toy{k: k, fam: fam, clk: clk, bug: bug, want: map[netip.Prefix]bool{}, have: map[netip.Prefix]bool{},
		stale: bug != "no-adoption", retry: map[netip.Prefix]dataplane.Retry{}}
}

// Set replaces the declared routes.
func (d *toy) Set(ps []netip.Prefix) error {
	for _, p := range ps {
		if d.bug != "accepts-bad-input" && (!p.IsValid() || p.Addr().Is4() != (d.fam == ipfamily.IPv4) || p != p.Masked()) {
			return fmt.Errorf("toy: bad prefix %v", p)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.want)
	for _, p := range ps {
		d.want[p] = true
		delete(d.retry, p)
	}
	return nil
}

func (d *toy) Phase() dataplane.Phase { return dataplane.PhaseRoutes }

func (d *toy) QueueResync() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stale = d.stale || d.bug != "ignores-resync"
}

func (d *toy) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bug == "leaks-goroutine" {
		go func() { select {} }()
	}
	if d.bug == "panics" && len(d.want) == 0 {
		panic("toy: nothing to do")
	}
	if err := d.read(ctx); err != nil {
		return dataplane.ApplyResult{}, err
	}
	now := d.clk.Now()
	ops := d.decide(now)
	var res dataplane.ApplyResult
	pe := &dataplane.PartialError{}
	tried := map[netip.Prefix]bool{}
	defer func() { d.failing = pe.Failed + pe.Waiting }()
	for i, err := range d.k.ApplyRoutes(ctx, ops) {
		p := ops[i].Route.Dst
		tried[p] = true
		if err != nil {
			d.retry[p] = d.retry[p].Failed(dataplane.Backoff{}, now, err)
			pe.Failed++
			pe.Errs = append(pe.Errs, err)
			continue
		}
		delete(d.retry, p)
		if d.bug != "stats-no-writes" {
			d.writes++
		}
		d.have[p] = ops[i].Kind != kernel.OpDelete
		if !d.have[p] {
			delete(d.have, p)
		}
	}
	for p, r := range d.retry {
		if r.Waiting(now) && !tried[p] {
			pe.Waiting++
			pe.Errs = append(pe.Errs, fmt.Errorf("%v: %w", p, r.Err))
		}
		if after := r.RetryAfter(now); after > 0 && (res.RetryAfter == 0 || after < res.RetryAfter) {
			res.RetryAfter = after
		}
	}
	switch {
	case pe.Failed+pe.Waiting == 0:
		return res, nil
	case d.bug == "fails-whole-on-objects":
		return res, errors.Join(pe.Errs...)
	case d.bug == "no-retry-after":
		return dataplane.ApplyResult{}, pe
	}
	return res, pe
}

// read reads the toy's routes when its view is stale.
func (d *toy) read(ctx context.Context) error {
	if !d.stale {
		return nil
	}
	have := map[netip.Prefix]bool{}
	err := d.k.DumpRoutes(ctx, d.fam, toyTable, func(r *kernel.Route) error {
		if r.Protocol == toyProto || d.bug == "deletes-foreign" {
			have[r.Dst] = true
		}
		return nil
	}, func() { clear(have) })
	if err != nil {
		return err
	}
	d.have, d.stale = have, false
	return nil
}

// decide returns the writes of an Apply at now.
func (d *toy) decide(now time.Time) []kernel.RouteOp {
	var ops []kernel.RouteOp
	for p := range d.want {
		if (!d.have[p] || d.bug == "writes-always") && !d.retry[p].Waiting(now) {
			ops = append(ops, kernel.RouteOp{Kind: kernel.OpReplace, Route: kernel.Route{Family: d.fam, Table: toyTable, Dst: p, Type: kernel.RTNBlackhole, Protocol: toyProto}})
		}
	}
	for p := range d.have {
		if !d.want[p] && d.bug != "keeps-withdrawn" && !d.retry[p].Waiting(now) {
			// By protocol too: the first route of the prefix may be
			// someone else's (another metric).
			del := kernel.Route{Family: d.fam, Table: toyTable, Dst: p, Protocol: toyProto}
			if d.bug == "deletes-foreign" {
				del.Protocol = 0
			}
			ops = append(ops, kernel.RouteOp{Kind: kernel.OpDelete, Route: del})
		}
	}
	return ops
}

// Plan implements dataplane.Planner with Apply's own decision.
func (d *toy) Plan(ctx context.Context) (dataplane.Plan, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	plan := dataplane.Plan{Driver: "toy"}
	if err := d.read(ctx); err != nil {
		return plan, err
	}
	if d.bug == "plan-lies" {
		return plan, nil
	}
	for _, op := range d.decide(d.clk.Now()) {
		w := dataplane.Write{Op: dataplane.WriteAdd, Kind: "route", Object: op.Route.Dst.String()}
		if op.Kind == kernel.OpDelete {
			w.Op = dataplane.WriteDelete
		}
		plan.Writes = append(plan.Writes, w)
	}
	return plan, nil
}

// toyPfx returns 10.<a>.<b>.0/24 or fd00:<a>:<b>::/64.
func toyPfx(fam ipfamily.Family, a, b int) netip.Prefix {
	if fam == ipfamily.IPv6 {
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, byte(a), 0, byte(b)}), 64)
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(a), byte(b), 0}), 24)
}

func toyState(fam ipfamily.Family) []netip.Prefix {
	var ps []netip.Prefix
	for i := range 30 {
		ps = append(ps, toyPfx(fam, 1, i))
	}
	return ps
}

// toySubject describes the toy, broken by bug, to the suite.
func toySubject(bug string) drivertest.Subject[*toy, ipfamily.Family] {
	route := func(fam ipfamily.Family, table uint32, p netip.Prefix, proto uint8) kernel.RouteOp {
		return kernel.RouteOp{Kind: kernel.OpAdd, Route: kernel.Route{Family: fam, Table: table, Dst: p, Type: kernel.RTNBlackhole, Protocol: proto}}
	}
	write := func(t testing.TB, k kernel.Kernel, ops ...kernel.RouteOp) {
		for i, err := range k.ApplyRoutes(context.Background(), ops) {
			if err != nil {
				t.Fatalf("%v %v: %v", ops[i].Kind, ops[i].Route.Dst, err)
			}
		}
	}
	dump := func(t testing.TB, k kernel.Kernel, fam ipfamily.Family) []string {
		var out []string
		for _, table := range []uint32{toyTable, toyOther} {
			err := k.DumpRoutes(context.Background(), fam, table, func(r *kernel.Route) error {
				out = append(out, fmt.Sprintf("table %d %v type %d proto %d metric %d", r.Table, r.Dst, r.Type, r.Protocol, r.Priority))
				return nil
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	return drivertest.Subject[*toy, ipfamily.Family]{
		Variants: []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6},
		New: func(k kernel.Kernel, clk clock.Clock, fam ipfamily.Family) (*toy, error) {
			return newToy(k, fam, clk, bug), nil
		},
		Declare:  func(d *toy, fam ipfamily.Family) error { return d.Set(toyState(fam)) },
		Withdraw: func(d *toy, _ ipfamily.Family) error { return d.Set(nil) },
		Check: func(t testing.TB, k kernel.Kernel, fam ipfamily.Family) {
			var got, want []string
			err := k.DumpRoutes(context.Background(), fam, toyTable, func(r *kernel.Route) error {
				if r.Protocol == toyProto {
					got = append(got, r.Dst.String())
				}
				return nil
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range toyState(fam) {
				want = append(want, p.String())
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("ours: %v, want %v", got, want)
			}
		},
		Dump: dump,
		Foreign: func(t testing.TB, k kernel.Kernel, fam ipfamily.Family, at drivertest.Stage) {
			switch at {
			case drivertest.BeforeApply:
				write(t, k, route(fam, toyTable, toyPfx(fam, 9, 1), toyForeign), route(fam, toyOther, toyPfx(fam, 1, 1), toyProto))
			case drivertest.AfterApply:
				write(t, k, route(fam, toyTable, toyPfx(fam, 9, 2), toyForeign))
			case drivertest.InPlace:
				r := route(fam, toyTable, toyPfx(fam, 1, 2), toyForeign)
				r.Route.Priority = 7
				write(t, k, r)
			}
		},
		Delete: func(t testing.TB, k kernel.Kernel, fam ipfamily.Family) {
			write(t, k, kernel.RouteOp{Kind: kernel.OpDelete, Route: kernel.Route{Family: fam, Table: toyTable, Dst: toyPfx(fam, 1, 2), Protocol: toyProto}})
		},
		BadInputs: []drivertest.BadInput[*toy, ipfamily.Family]{
			{Name: "host bits", Declare: func(d *toy, fam ipfamily.Family) error {
				p := toyPfx(fam, 1, 1)
				return d.Set([]netip.Prefix{netip.PrefixFrom(p.Addr().Next(), p.Bits())})
			}},
			{Name: "other family", Declare: func(d *toy, fam ipfamily.Family) error {
				other := ipfamily.IPv6
				if fam == ipfamily.IPv6 {
					other = ipfamily.IPv4
				}
				return d.Set([]netip.Prefix{toyPfx(other, 1, 1)})
			}},
		},
	}
}

// TestToyConforms runs the suite on the toy driver, on the fake.
func TestToyConforms(t *testing.T) { drivertest.Run(t, drivertest.Fake, toySubject("")) }

// TestKernelToyConforms runs the suite on the toy driver, on the kernel.
func TestKernelToyConforms(t *testing.T) { drivertest.Run(t, drivertest.Kernel, toySubject("")) }

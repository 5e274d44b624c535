package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/mtu"
)

// StartNote says what a plan never covers: what the agent writes outside
// its drivers as it starts, and the BPF proxy, which loads its programs as
// it starts.
const StartNote = `not planned: what the agent writes as it starts (forwarding sysctls, the pod MTU file) and the BPF proxy`

// Plans is what a dry run found.
type Plans struct {
	// Plans are the Plans of the drivers that can plan, in phase order.
	Plans []dataplane.Plan `json:"plans"`
	// Unplanned names the drivers that cannot plan (dataplane.Loop.Unplanned).
	Unplanned []string `json:"unplanned,omitempty"`
}

// Plan builds the agent's drivers on the node's kernel (cfg.Kernel, else cfg.NetNS),
// takes the first complete cluster from cfg.Datastore and the interfaces
// from the kernel, lets the managers turn them into desired state, and
// returns the Plan of every driver that can plan: what a `nodeagent run`
// starting now would write. It writes nothing to the kernel, and neither
// the pod MTU file nor a WireGuard key; the BPF proxy is left out (it
// loads its programs as it starts). Plans.Unplanned and StartNote say
// what a plan does not cover.
func Plan(ctx context.Context, cfg Config) (Plans, error) {
	if err := cfg.defaults(); err != nil {
		return Plans{}, err
	}
	if cfg.Datastore == nil {
		return Plans{}, errors.New("agent: a datastore is required")
	}
	cfg.planning = true
	ns, closeNS, err := openKernel(&cfg)
	if err != nil {
		return Plans{}, err
	}
	defer closeNS()
	exclude := append(mtu.DefaultExclude(), "^"+regexp.QuoteMeta(cfg.PodInterfacePrefix), "^"+regexp.QuoteMeta(cfg.WireGuardInterface))
	det, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Exclude: exclude})
	if err != nil {
		return Plans{}, err
	}
	host, err := det.Detect(ctx)
	if err != nil {
		return Plans{}, err
	}
	cluster, err := firstCluster(ctx, cfg.Datastore)
	if err != nil {
		return Plans{}, err
	}
	passed := make(chan struct{}, 1)
	lopts := dataplane.Options{Logger: cfg.Logger.With("component", "loop"), Inactive: true, Metrics: passSignal{passed}}
	p, err := build(ctx, ns, &cfg, lopts, host.MTU, false, nil)
	if err != nil {
		return Plans{}, err
	}
	defer p.close()
	loop := p.loop
	tr := newTranslator(cfg.NodeName)
	if cfg.NetworkPolicy {
		tr.netpol = newNetpolTranslator(cfg.NodeName)
	}
	for _, m := range tr.messages(cluster) {
		if err := loop.Send(ctx, m); err != nil {
			return Plans{}, err
		}
	}
	if err := loop.Send(ctx, host); err != nil { // the overlay devices follow the host MTU
		return Plans{}, err
	}
	loop.DatastoreInSync()
	mon, err := ifacemonitor.New(ifacemonitor.Options{Kernel: ns, Logger: cfg.Logger.With("component", "ifacemonitor"),
		OnLinkState: func(u ifacemonitor.LinkUpdate) { loop.OnLink(u.Link(), u.State) },
		OnAddrs:     loop.OnAddrs,
		OnInSync:    loop.InterfacesInSync,
	})
	if err != nil {
		return Plans{}, err
	}

	// The inactive loop delivers the messages and runs the managers that
	// only declare (a standby pass), never applying a driver.
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, run := range []func(context.Context) error{loop.Run, mon.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = run(runCtx) }()
	}
	select {
	case <-passed:
	case <-ctx.Done():
	}
	stop()
	wg.Wait()
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return Plans{}, fmt.Errorf("agent: plan: %w", err)
	}
	// The overlay managers read the host's links and addresses as they
	// declare, and the local pods' managers the links, which makes them
	// dataplane.Resyncers that a standby pass leaves out: the loop has
	// stopped, so they run here (they write nothing themselves). Without
	// the pods' managers the plan deleted every local pod's route.
	for _, o := range p.overlays {
		if err := o.CompleteDeferredWork(ctx); err != nil {
			return Plans{}, err
		}
	}
	for _, e := range p.endpoints {
		if err := e.CompleteDeferredWork(ctx); err != nil {
			return Plans{}, err
		}
	}
	plans, err := loop.Plan(ctx)
	return Plans{Plans: plans, Unplanned: loop.Unplanned()}, err
}

// WritePlan prints plans for people: each driver's plan, a blank line
// between them, the drivers that cannot plan, then StartNote.
func WritePlan(out io.Writer, p Plans) error {
	for _, pl := range p.Plans {
		if _, err := fmt.Fprintf(out, "%s\n\n", pl); err != nil {
			return err
		}
	}
	if len(p.Unplanned) > 0 {
		if _, err := fmt.Fprintf(out, "cannot plan: %s\n", strings.Join(p.Unplanned, ", ")); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(out, StartNote)
	return err
}

// firstCluster returns the first complete cluster ds reports.
func firstCluster(ctx context.Context, ds datastore.Datastore) (datastore.Cluster, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var c datastore.Cluster
	got := false
	err := ds.Watch(ctx, func(first datastore.Cluster) {
		if !got {
			c, got = first, true
			cancel()
		}
	})
	switch {
	case got:
		return c, nil
	case err != nil:
		return c, fmt.Errorf("agent: datastore: %w", err)
	}
	return c, fmt.Errorf("agent: datastore: %w", ctx.Err())
}

// passSignal tells of the loop's passes on a channel, without waiting.
type passSignal struct{ c chan<- struct{} }

func (passSignal) DriverApplied(dataplane.DriverApply)    {}
func (passSignal) ManagerCompleted(dataplane.ManagerWork) {}
func (passSignal) QueueDepth(int)                         {}
func (passSignal) Resynced(dataplane.ResyncEvent)         {}
func (s passSignal) PassCompleted(dataplane.PassStats) {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// DriverState is one driver's account of its slice of the kernel, in the
// status document.
type DriverState struct {
	// Driver is the driver's name.
	Driver string `json:"driver"`
	// Owned counts the objects of the driver in the kernel.
	Owned int `json:"owned"`
	// Drift lists the objects whose kernel form is not the desired one.
	Drift []string `json:"drift,omitempty"`
	// Failing lists the objects whose last write failed, and why.
	Failing []string `json:"failing,omitempty"`
}

// driverStates returns the state of every driver that reports one, and
// the errors of those that could not.
func (a *Agent) driverStates(ctx context.Context) ([]DriverState, string) {
	states, err := a.plane.loop.State(ctx)
	out := make([]DriverState, len(states))
	for i, s := range states {
		out[i] = DriverState{Driver: s.Driver, Owned: len(s.Owned)}
		for _, d := range s.Drift {
			out[i].Drift = append(out[i].Drift, d.String())
		}
		for _, f := range s.Failing {
			out[i].Failing = append(out[i].Failing, f.Error())
		}
	}
	if err != nil {
		return out, err.Error()
	}
	return out, ""
}

// writeDriverStates prints the drivers' states in the status table.
func writeDriverStates(w io.Writer, s Status) {
	if len(s.Drivers) == 0 && s.DriversError == "" {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "DRIVER\tOWNED\tDRIFTED\tFAILING")
	for _, d := range s.Drivers {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\n", d.Driver, d.Owned, len(d.Drift), len(d.Failing))
		for _, x := range d.Drift {
			fmt.Fprintf(w, "  drift\t\t\t\t%s\n", x)
		}
		for _, x := range d.Failing {
			fmt.Fprintf(w, "  failing\t\t\t\t%s\n", x)
		}
	}
	if s.DriversError != "" {
		fmt.Fprintf(w, "driver states not read: %s\n", s.DriversError)
	}
}

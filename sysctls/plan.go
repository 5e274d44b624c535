package sysctls

import (
	"context"
	"errors"
	"fmt"

	"github.com/nodeplane/nodeplane/dataplane"
)

// kindSysctl is the kind of the Driver's objects in its Plan, State and
// errors.
const kindSysctl dataplane.ObjectKind = "sysctl"

// Plan returns the sysctl writes the next Apply would make: for each
// setting it would check (see Apply), read now, a replace ("key = value",
// with the value it replaces) when the value read is not acceptable. It
// writes nothing; a setting that cannot be read (or whose machine-wide
// key the Driver may not reach) is not written by Apply either and is not
// in it. The values are those read before any write: when a write makes
// the kernel change another setting (writing IPv4 forwarding turns
// net.ipv4.conf.all.accept_redirects to its opposite), Apply, which checks
// the settings in order, writes that one too if it comes later, and Plan
// cannot list it. It implements dataplane.Planner. A nil ctx is
// context.Background().
func (m *Driver) Plan(ctx context.Context) (dataplane.Plan, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed.Begin()
	p := dataplane.Plan{Driver: m.o.Name}
	for _, s := range m.dueSettings() {
		if _, was, err := m.read(ctx, s); err == nil && !s.acceptable(was) {
			p.Writes = append(p.Writes, dataplane.Write{Op: dataplane.WriteReplace, Kind: kindSysctl,
				Object: s.Key + " = " + s.Value, Detail: "was " + was})
		}
	}
	if err := ctx.Err(); err != nil {
		return dataplane.Plan{Driver: m.o.Name}, fmt.Errorf("sysctls: %s: %w", m.o.Name, err)
	}
	return p, nil
}

// State reads every setting the Driver keeps and returns them as the
// kernel holds them ("key = value"), those whose value is not acceptable
// as drift (a key the kernel lacks: Have empty), and the failing settings.
// A machine-wide key the Driver may not reach is left out. It writes
// nothing. It implements dataplane.Stater. A nil ctx is
// context.Background().
func (m *Driver) State(ctx context.Context) (dataplane.State, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := dataplane.State{Driver: m.o.Name, Failing: m.failed.Errors()}
	for _, s := range m.desired() {
		_, was, err := m.read(ctx, s)
		switch {
		case errors.Is(err, ErrNoHostAccess):
			continue
		case err != nil:
			st.Drift = append(st.Drift, dataplane.Drift{Kind: kindSysctl, Name: s.Key, Want: s.Value})
			continue
		}
		st.Owned = append(st.Owned, dataplane.Object{Kind: kindSysctl, Text: s.Key + " = " + was})
		if !s.acceptable(was) {
			st.Drift = append(st.Drift, dataplane.Drift{Kind: kindSysctl, Name: s.Key, Want: s.Value, Have: was})
		}
	}
	if err := ctx.Err(); err != nil {
		return dataplane.State{Driver: m.o.Name}, fmt.Errorf("sysctls: %s: %w", m.o.Name, err)
	}
	dataplane.SortState(&st)
	return st, nil
}

var (
	_ dataplane.Planner = (*Driver)(nil)
	_ dataplane.Stater  = (*Driver)(nil)
)

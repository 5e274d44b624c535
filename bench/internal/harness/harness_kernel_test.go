//go:build linux

package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// TestKernelHarnessRunsEachTrialInAFreshNamespace checks the harness's
// promises with real namespaces: Setup's state reaches Run, no trial sees
// another's kernel state, variants are interleaved, failures are reported
// per variant, and medians and ratios are computed from the trials.
func TestKernelHarnessRunsEachTrialInAFreshNamespace(t *testing.T) {
	kerneltest.RequireKernel(t)
	var order []string
	seen := map[string]bool{}
	variant := func(name string, role Role, work int) Variant {
		return Variant{
			Name: name, Role: role,
			Setup: func(_ context.Context, env *Env) error {
				if seen[env.NS.Name()] {
					return errors.New("namespace reused")
				}
				seen[env.NS.Name()] = true
				links, err := env.NS.Handle().LinkList()
				if err != nil {
					return err
				}
				if len(links) != 1 {
					return errors.New("fresh namespace holds more than lo")
				}
				env.State = work
				return env.NS.Handle().LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "np-bench0"}})
			},
			Run: func(ctx context.Context, env *Env) error {
				order = append(order, name)
				for i := 0; i < env.State.(int); i++ {
					if _, err := env.NS.Run(ctx, nil, "true"); err != nil {
						return err
					}
				}
				env.Report("objects", float64(env.State.(int)))
				return nil
			},
		}
	}
	broken := Variant{Name: "broken", Role: Peer, Run: func(context.Context, *Env) error { return errors.New("no such binary") }}
	s := Scenario{Name: "selftest/exec/4", Size: 4, Note: "a note", Variants: []Variant{
		variant("ours", Ours, 1), variant("peer", Peer, 8), variant("floor", Floor, 1), broken,
	}}
	results := Run(context.Background(), []Scenario{s}, Options{Trials: 3})
	require.Len(t, results, 1)
	r := results[0]
	require.Equal(t, "selftest/exec/4", r.Scenario)
	require.Len(t, r.Measurements, 4)
	ours, peer, broke := r.Measurements[0], r.Measurements[1], r.Measurements[3]
	require.Equal(t, 3, ours.Trials)
	require.Equal(t, 3, peer.Trials)
	require.InDelta(t, 1.0, ours.WallRatio, 1e-9)
	// Eight execs against one: the peer must cost more CPU (children
	// included) than ours; by how much is not asserted.
	require.Greater(t, peer.CPURatio, 1.0)
	require.Equal(t, 8.0, peer.Metrics["objects"])
	require.Contains(t, broke.Error, "no such binary")
	require.Zero(t, broke.Trials)
	// Rotated order: the first variant run differs between rounds.
	require.Len(t, order, 9)
	require.Equal(t, "ours", order[0])
	require.Equal(t, "peer", order[3])
	require.Len(t, seen, 9)

	var table, js bytes.Buffer
	require.NoError(t, WriteTable(&table, results))
	require.Contains(t, table.String(), "error: no such binary")
	require.Contains(t, table.String(), "a note")
	require.NoError(t, WriteJSON(&js, results))
	var back []Result
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	require.Equal(t, results, back)
	require.True(t, strings.HasPrefix(strings.TrimSpace(table.String()), "scenario"))
}

func TestRegisteredFilters(t *testing.T) {
	registryMu.Lock()
	saved := registry
	registry = nil
	registryMu.Unlock()
	t.Cleanup(func() { registryMu.Lock(); registry = saved; registryMu.Unlock() })
	Register(Scenario{Name: "ipsets/initial/100"}, Scenario{Name: "iptables/initial/100"})
	require.Len(t, Registered(nil), 2)
	got := Registered(regexpMust(t, "^ipsets/"))
	require.Len(t, got, 1)
	require.Equal(t, "ipsets/initial/100", got[0].Name)
}

func TestMedianAndRole(t *testing.T) {
	require.Equal(t, 2.0, median([]float64{3, 1, 2}))
	require.Equal(t, 2.5, median([]float64{4, 1, 2, 3}))
	require.Equal(t, 0.0, median(nil))
	require.Equal(t, "ours", Ours.String())
	require.Equal(t, "peer", Peer.String())
	require.Equal(t, "floor", Floor.String())
	require.Equal(t, "role(7)", Role(7).String())
}

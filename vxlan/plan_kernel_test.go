//go:build linux

package vxlan_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
)

// TestKernelPlanProperties checks the Plan properties of
// TestPlanProperties in fresh namespaces of the running kernel, IPv4 and
// IPv6, for a few seeds and rounds: Plan writes nothing, the Apply after
// it makes exactly its writes (the device's and the entries'), and then
// Plan is empty and an Apply writes nothing, while the kernel drifts
// (entries deleted and rewritten, the device's MTU, up state and
// addresses changed, the device deleted) between rounds.
func TestKernelPlanProperties(t *testing.T) {
	kerneltest.RequireKernel(t)
	for _, fam := range bothFams {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%v/%d", fam, seed), func(t *testing.T) {
				ns := kerneltest.NewNS(t)
				k, err := kernel.Open(ns.Path())
				require.NoError(t, err)
				defer k.Close()
				w := newPlanWorld(t, k, fam, nil)
				planned := planProperty(w, seed, 6, 10, nil)
				t.Logf("%d writes planned", planned)
			})
		}
	}
}

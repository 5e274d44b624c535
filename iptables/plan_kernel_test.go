//go:build linux

package iptables_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/iptables"
)

// TestKernelPlanProperty checks the Plan properties against the real
// iptables binaries of both backends and families, in a fresh namespace
// per seed: Plan and State write nothing, the Apply after Plan writes its
// objects, then Plan is empty and an Apply writes nothing.
func TestKernelPlanProperty(t *testing.T) {
	forEachKernelFlavour(t, func(t *testing.T, f flavour) {
		writes := 0
		for seed := range uint64(3) {
			ns := kerneltest.NewNS(t)
			e := planEnv{b: f.b, v: f.v, k: iptables.OpenKernelForTest(t, ns), exec: func(args ...string) error {
				_, err := ns.Exec(context.Background(), f.cmd(), args...)
				return err
			}}
			writes += planProperty(t, e, seed, 6)
		}
		require.Positive(t, writes, "the property planned nothing")
	})
}

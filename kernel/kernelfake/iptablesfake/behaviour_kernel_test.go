//go:build linux

package iptablesfake_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
)

// TestKernelFakeMatchesKernel runs the behaviour table against the real
// binaries, each case in a fresh network namespace: the expectations the
// fake meets in TestFakeBehaviour hold for the kernel too.
func TestKernelFakeMatchesKernel(t *testing.T) {
	kerneltest.RequireCommands(t, "iptables-legacy-restore", "iptables-nft-restore", "ip6tables-legacy-restore", "ip6tables-nft-restore")
	forEachFlavour(t, func(t *testing.T, b iptablesfake.Backend, v ipfamily.Family) {
		for _, tc := range behaviourCases(v) {
			t.Run(tc.name, func(t *testing.T) {
				ns := kerneltest.NewNS(t)
				runBehaviour(t, ns, b, v, tc)
			})
		}
	})
}

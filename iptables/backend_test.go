package iptables_test

import (
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
)

func TestDetectBackend(t *testing.T) {
	type rule struct {
		b     iptables.Backend
		v     ipfamily.Family
		table string
		args  []string
	}
	hint := func(b iptables.Backend) rule {
		return rule{b, ipfamily.IPv4, "mangle", []string{"-N", "KUBE-IPTABLES-HINT"}}
	}
	add := func(b iptables.Backend, v ipfamily.Family) rule {
		return rule{b, v, "filter", []string{"-A", "INPUT", "-j", "ACCEPT"}}
	}
	tests := []struct {
		name    string
		rules   []rule
		missing string // binaries whose name contains this fail as not found
		want    iptables.Backend
		reason  string
	}{
		{"empty node", nil, "", iptables.BackendNFT, "as many rules in both (0)"},
		{"nft hint wins over legacy rules", []rule{hint(iptables.BackendNFT), add(iptables.BackendLegacy, ipfamily.IPv4), add(iptables.BackendLegacy, ipfamily.IPv6)}, "", iptables.BackendNFT, "hint chain KUBE-IPTABLES-HINT in nft"},
		{"legacy hint", []rule{hint(iptables.BackendLegacy), add(iptables.BackendNFT, ipfamily.IPv4)}, "", iptables.BackendLegacy, "hint chain KUBE-IPTABLES-HINT in legacy"},
		{"canary chain", []rule{{iptables.BackendLegacy, ipfamily.IPv6, "mangle", []string{"-N", "KUBE-KUBELET-CANARY"}}}, "", iptables.BackendLegacy, "hint chain KUBE-KUBELET-CANARY in legacy"},
		{"more legacy rules, counting IPv6", []rule{add(iptables.BackendNFT, ipfamily.IPv4), add(iptables.BackendLegacy, ipfamily.IPv6), add(iptables.BackendLegacy, ipfamily.IPv4)}, "", iptables.BackendLegacy, "more rules in legacy (2) than in nft (1)"},
		{"more nft rules", []rule{add(iptables.BackendNFT, ipfamily.IPv4), add(iptables.BackendNFT, ipfamily.IPv6), add(iptables.BackendLegacy, ipfamily.IPv4)}, "", iptables.BackendNFT, "more rules in nft (2) than in legacy (1)"},
		{"tie", []rule{add(iptables.BackendNFT, ipfamily.IPv4), add(iptables.BackendLegacy, ipfamily.IPv4)}, "", iptables.BackendNFT, "as many rules in both (1)"},
		{"only legacy installed", []rule{add(iptables.BackendNFT, ipfamily.IPv4)}, "-nft-", iptables.BackendLegacy, "only the legacy binaries ran"},
		{"only nft installed", []rule{add(iptables.BackendLegacy, ipfamily.IPv4)}, "-legacy-", iptables.BackendNFT, "only the nft binaries ran"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns, k := newFake()
			for _, r := range tc.rules {
				require.NoError(t, k.Exec(iptablesfake.Backend(r.b), r.v, append([]string{"-t", r.table}, r.args...)...))
			}
			runner := command.RunnerFunc(func(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
				if tc.missing != "" && strings.Contains(name, tc.missing) {
					return nil, &command.Error{Argv: []string{name}, ExitCode: -1, Err: exec.ErrNotFound}
				}
				return ns.Runner().Run(ctx, stdin, name, args...)
			})
			got, d, err := iptables.DetectBackend(context.Background(), commands(runner))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.want, d.Backend)
			assert.Contains(t, d.Reason, tc.reason)
			for _, c := range k.Calls() {
				assert.Equal(t, iptablesfake.OpSave, c.Op, "detection only reads")
				assert.Empty(t, c.Args, "without -t, so legacy creates no table")
			}
		})
	}
}

func TestDetectBackendNoBinaries(t *testing.T) {
	runner := command.RunnerFunc(func(context.Context, io.Reader, string, ...string) ([]byte, error) {
		return nil, exec.ErrNotFound
	})
	_, d, err := iptables.DetectBackend(context.Background(), commands(runner))
	require.ErrorIs(t, err, iptables.ErrNoBackend)
	require.ErrorIs(t, err, exec.ErrNotFound)
	assert.False(t, d.LegacyAvailable)
	assert.False(t, d.NFTAvailable)
}

func TestDetectBackendCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := iptables.DetectBackend(ctx, kernelfake.New(kernelfake.Options{}))
	require.ErrorIs(t, err, context.Canceled)
}

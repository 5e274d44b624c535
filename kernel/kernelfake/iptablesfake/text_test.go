package iptablesfake_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
)

func TestOpText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]iptablesfake.Op{
		"OpAny": iptablesfake.OpAny, "OpSave": iptablesfake.OpSave, "OpRestore": iptablesfake.OpRestore, "OpCommand": iptablesfake.OpCommand,
	})
}

func TestBackendText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]iptablesfake.Backend{
		"BackendLegacy": iptablesfake.BackendLegacy, "BackendNFT": iptablesfake.BackendNFT,
	})
	// The fake's backends are the driver's, value for value.
	assert.Equal(t, string(iptables.BackendLegacy), string(iptablesfake.BackendLegacy))
	assert.Equal(t, string(iptables.BackendNFT), string(iptablesfake.BackendNFT))
}

// TestCallJSON: a Call's Err marshals as its text, not {}.
func TestCallJSON(t *testing.T) {
	textformtest.Report(t, iptablesfake.Call{})
	textformtest.Report(t, iptablesfake.Call{Binary: "iptables-nft-restore", Args: []string{"--noflush"}, Stdin: "*filter\nCOMMIT\n",
		Op: iptablesfake.OpRestore, Backend: iptablesfake.BackendNFT, Family: ipfamily.IPv4,
		Err: errors.New("iptables-nft-restore: line 2 failed")})
}

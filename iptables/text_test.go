package iptables_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/iptables"
)

func TestBackendText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]iptables.Backend{"BackendLegacy": iptables.BackendLegacy, "BackendNFT": iptables.BackendNFT})
}

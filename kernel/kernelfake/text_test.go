package kernelfake_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

func TestOpText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]kernelfake.Op{
		"OpLinks":               kernelfake.OpLinks,
		"OpLinkByName":          kernelfake.OpLinkByName,
		"OpAddLink":             kernelfake.OpAddLink,
		"OpDeleteLink":          kernelfake.OpDeleteLink,
		"OpSetLinkUp":           kernelfake.OpSetLinkUp,
		"OpSetLinkMTU":          kernelfake.OpSetLinkMTU,
		"OpSetLinkMAC":          kernelfake.OpSetLinkMAC,
		"OpAddrs":               kernelfake.OpAddrs,
		"OpAddAddr":             kernelfake.OpAddAddr,
		"OpDeleteAddr":          kernelfake.OpDeleteAddr,
		"OpDumpRoutes":          kernelfake.OpDumpRoutes,
		"OpDumpInterfaceRoutes": kernelfake.OpDumpInterfaceRoutes,
		"OpApplyRoutes":         kernelfake.OpApplyRoutes,
		"OpRules":               kernelfake.OpRules,
		"OpAddRule":             kernelfake.OpAddRule,
		"OpDeleteRule":          kernelfake.OpDeleteRule,
		"OpNeighbors":           kernelfake.OpNeighbors,
		"OpApplyNeighbors":      kernelfake.OpApplyNeighbors,
		"OpFDB":                 kernelfake.OpFDB,
		"OpApplyFDB":            kernelfake.OpApplyFDB,
		"OpSysctl":              kernelfake.OpSysctl,
		"OpSetSysctl":           kernelfake.OpSetSysctl,
		"OpDeleteConntrack":     kernelfake.OpDeleteConntrack,
		"OpSubscribe":           kernelfake.OpSubscribe,
		"OpRun":                 kernelfake.OpRun,
		"OpDo":                  kernelfake.OpDo,
		"OpWireGuardDevice":     kernelfake.OpWireGuardDevice,
		"OpConfigureWireGuard":  kernelfake.OpConfigureWireGuard,
	})
}

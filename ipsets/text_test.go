package ipsets_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/ipsets"
)

func TestEnumText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]ipsets.Protocol{
		"ProtocolTCP": ipsets.ProtocolTCP, "ProtocolUDP": ipsets.ProtocolUDP, "ProtocolSCTP": ipsets.ProtocolSCTP,
	})
	textformtest.Enum(t, ".", map[string]ipsets.SetType{
		"HashIP": ipsets.HashIP, "HashNet": ipsets.HashNet, "HashIPPort": ipsets.HashIPPort,
		"HashNetNet": ipsets.HashNetNet, "BitmapPort": ipsets.BitmapPort,
	})
}

package nftables_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/nftables"
)

func TestEnumText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]nftables.Role{"Filter": nftables.Filter, "NAT": nftables.NAT, "Mangle": nftables.Mangle, "Raw": nftables.Raw})
	textformtest.Enum(t, ".", map[string]nftables.Policy{"PolicyAccept": nftables.PolicyAccept, "PolicyDrop": nftables.PolicyDrop})
	textformtest.Enum(t, ".", map[string]nftables.KeyType{
		"TypeAddr": nftables.TypeAddr, "TypeProto": nftables.TypeProto, "TypePort": nftables.TypePort,
		"TypeMark": nftables.TypeMark, "TypeIface": nftables.TypeIface,
	})
}

package policy_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/policy"
)

func TestActionText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]policy.Action{"Allow": policy.Allow, "Deny": policy.Deny, "Pass": policy.Pass, "Log": policy.Log})
}

func TestDenyActionText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]policy.DenyAction{"DenyDrop": policy.DenyDrop, "DenyReject": policy.DenyReject})
}

func TestToHostText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]policy.ToHost{"ToHostReturn": policy.ToHostReturn, "ToHostAccept": policy.ToHostAccept, "ToHostDeny": policy.ToHostDeny})
}

func TestSetKindText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]policy.SetKind{"SetNets": policy.SetNets, "SetAddrPorts": policy.SetAddrPorts})
}

func TestVerdictText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]policy.Verdict{"Denied": policy.Denied, "Allowed": policy.Allowed})
}

func TestDispatchText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]policy.Dispatch{"DispatchTree": policy.DispatchTree, "DispatchVerdictMap": policy.DispatchVerdictMap})
}

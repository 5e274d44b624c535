package iptables

import (
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// PlanFullyForTest makes t compare everything on every Apply, as it does
// after a read, instead of only what changed: the reference that the
// incremental planning is checked against.
func PlanFullyForTest(t *Table) { t.planFully = true }

// RandomRuleForTest builds a rule and an IP version from fuzz input, as
// FuzzRuleArgs does, for the fuzz tests of package iptables_test.
func RandomRuleForTest(data []byte) (netfilter.Rule, ipfamily.Family) { return rmFuzzRule(data) }

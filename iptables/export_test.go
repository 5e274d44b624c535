package iptables

// PlanFullyForTest makes t compare everything on every Apply, as it does
// after a read, instead of only what changed: the reference that the
// incremental planning is checked against.
func PlanFullyForTest(t *Table) { t.planFully = true }

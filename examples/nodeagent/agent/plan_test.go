package agent

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
)

// TestWritePlan: each driver's plan, then the drivers that cannot plan
// and what a plan never covers.
func TestWritePlan(t *testing.T) {
	var b bytes.Buffer
	err := WritePlan(&b, Plans{Plans: []dataplane.Plan{
		{Driver: "routetable-ipv4-254", Writes: []dataplane.Write{{Op: dataplane.WriteAdd, Kind: "route", Object: "10.244.2.0/24 via 198.18.0.2 dev eth0 proto 78"}}},
		{Driver: "routetable-ipv6-254"},
	}, Unplanned: []string{"toy-a", "toy-b"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "routetable-ipv4-254: 1 write\n+ route 10.244.2.0/24 via 198.18.0.2 dev eth0 proto 78\n\nroutetable-ipv6-254: no writes\n\ncannot plan: toy-a, toy-b\n" + StartNote + "\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestWriteTableDriverStates: the status table lists each driver's counts,
// its drift and its failures, and says when states could not be read.
func TestWriteTableDriverStates(t *testing.T) {
	now := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	s := Status{Node: "node1", StartedAt: now, Drivers: []DriverState{
		{Driver: "routetable-ipv4-254", Owned: 3, Drift: []string{"route 10.244.2.0/24: missing (want 10.244.2.0/24 via 198.18.0.2 dev eth0 proto 78)"}},
		{Driver: "routerule-v4", Owned: 1, Failing: []string{"routerule: add rule 100: from all lookup 200: file exists"}},
	}, DriversError: "dataplane: driver sysctls: State: permission denied"}
	var b bytes.Buffer
	if err := WriteTable(&b, s, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"DRIVER               OWNED  DRIFTED  FAILING",
		"routetable-ipv4-254  3      1        0",
		"  drift                                route 10.244.2.0/24: missing (want 10.244.2.0/24 via 198.18.0.2 dev eth0 proto 78)",
		"routerule-v4         1      0        1",
		"  failing                              routerule: add rule 100: from all lookup 200: file exists",
		"driver states not read: dataplane: driver sysctls: State: permission denied",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
}

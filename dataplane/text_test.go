package dataplane_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
)

func TestEnumText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]dataplane.Phase{
		"PhaseIPSetsUpdate": dataplane.PhaseIPSetsUpdate, "PhaseTunnelL2": dataplane.PhaseTunnelL2,
		"PhaseTables": dataplane.PhaseTables, "PhaseRoutes": dataplane.PhaseRoutes,
		"PhaseIPSetsDelete": dataplane.PhaseIPSetsDelete,
	})
	textformtest.Enum(t, ".", map[string]dataplane.Outcome{
		"OutcomeSucceeded": dataplane.OutcomeSucceeded, "OutcomePartial": dataplane.OutcomePartial,
		"OutcomeFailed": dataplane.OutcomeFailed,
	})
	textformtest.Enum(t, ".", map[string]dataplane.ResyncReason{
		"ResyncPeriodic": dataplane.ResyncPeriodic, "ResyncAfterFailure": dataplane.ResyncAfterFailure,
		"ResyncActivated": dataplane.ResyncActivated,
	})
}

// TestReportsJSON: the reports' errors marshal as their text, not {}.
func TestReportsJSON(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	err := errors.New("routes: route 10.0.0.0/24: file exists")
	for _, v := range []any{
		dataplane.Health{}, dataplane.DriverApply{}, dataplane.ManagerWork{}, dataplane.Retry{},
		dataplane.Health{Live: true, Ready: true, LastApply: at, LastError: err, LastErrorAt: at,
			ConsecutiveFailures: 2, FailingDrivers: []string{"routes"}, FailingObjects: 1, Applies: 7},
		dataplane.DriverApply{Driver: "routes", Phase: dataplane.PhaseRoutes, Duration: time.Second,
			Outcome: dataplane.OutcomePartial, FailedObjects: 1, Err: err},
		dataplane.ManagerWork{Manager: "overlay", Duration: time.Millisecond, Outcome: dataplane.OutcomeFailed, Err: err},
		dataplane.Retry{Failures: 3, Due: at, Err: err},
	} {
		textformtest.Report(t, v)
	}
}

package sysctls_test

import (
	"fmt"
	"testing"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/sysctls"
)

func TestOutcomeText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]sysctls.Outcome{"Kept": sysctls.Kept, "Changed": sysctls.Changed, "Failed": sysctls.Failed})
}

// TestResultJSON: a Result's Err marshals as its text, not {}.
func TestResultJSON(t *testing.T) {
	textformtest.Report(t, sysctls.Result{})
	textformtest.Report(t, sysctls.Result{
		Setting: sysctls.Setting{Key: "net.ipv4.ip_forward", Value: "1", Required: true, Why: "pods reach each other"},
		Was:     "0", Now: "0", Outcome: sysctls.Failed,
		Err: fmt.Errorf("%w: net.ipv4.ip_forward: %w", sysctls.ErrNotApplied, sysctls.ErrReadOnly),
	})
}

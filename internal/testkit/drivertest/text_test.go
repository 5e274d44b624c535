package drivertest_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
)

func TestStageText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]drivertest.Stage{"BeforeApply": drivertest.BeforeApply, "AfterApply": drivertest.AfterApply, "InPlace": drivertest.InPlace})
}

package serviceloop_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/serviceloop"
)

func TestVerdictText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]serviceloop.Verdict{"Drop": serviceloop.Drop, "Reject": serviceloop.Reject})
}

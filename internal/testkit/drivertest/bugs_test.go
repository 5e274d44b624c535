package drivertest_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
)

// envToyBug names the bug TestToyBroken gives the toy driver;
// envToyKnown, set, makes its Subject list the failure to remove what it
// withdrew as known.
const (
	envToyBug   = "DRIVERTEST_TOY_BUG"
	envToyKnown = "DRIVERTEST_TOY_KNOWN"
)

// TestToyBroken runs the suite on the toy driver broken by the bug
// envToyBug names. It is the child process of TestChecksCatchBugs and does
// nothing on its own.
func TestToyBroken(t *testing.T) {
	bug := os.Getenv(envToyBug)
	if bug == "" {
		return
	}
	drivertest.SetLeakWaitForTest(100 * time.Millisecond)
	s := toySubject(bug)
	if os.Getenv(envToyKnown) != "" {
		s.Known = []drivertest.Known{{
			Assertion: "Removal: after withdrawing everything, nothing of ours is left",
			Lines:     regexp.MustCompile(`proto 99`),
			Why:       "the toy keeps what it withdrew",
		}}
	}
	drivertest.Run(t, drivertest.Fake, s)
}

// TestChecksCatchBugs breaks the toy driver in each way the definition of
// done forbids and checks that the suite fails it, in the checks that
// should catch the bug and with a message that says what is wrong.
func TestChecksCatchBugs(t *testing.T) {
	cases := []struct {
		bug   string
		known bool
		fail  []string
		text  string
	}{
		{"writes-always", false, []string{"Idempotent", "RestartAdopts"}, "another Apply writes nothing"},
		{"no-adoption", false, []string{"RestartAdopts"}, "a new instance on the programmed kernel writes nothing"},
		{"deletes-foreign", false, []string{"ForeignSurvive", "Removal"}, "foreign objects are intact"},
		{"ignores-resync", false, []string{"ExternalDeletionRepaired"}, "the repair writes"},
		{"fails-whole-on-objects", false, []string{"FailureConverges/kernelfake-1", "FailureConverges/recorder-3"}, "only object writes failed"},
		{"no-retry-after", false, []string{"FailureConverges/kernelfake-1", "FailureConverges/recorder-3"}, "so nothing would retry them"},
		{"accepts-bad-input", false, []string{"BadInputRejected"}, "(host bits) accepted"},
		{"keeps-withdrawn", false, []string{"Removal", "ForeignSurvive"}, "nothing of ours is left"},
		{"leaks-goroutine", false, []string{"Converge", "Idempotent"}, "leakcheck: goroutine left"},
		{"stats-no-writes", false, []string{"Converge", "ExternalDeletionRepaired"}, "kernel writes succeeded, yet Writes stayed at 0"},
		{"stats-failing-zero", false, []string{"FailureConverges/kernelfake-1"}, "yet Failing is 0"},
		{"plan-lies", false, []string{"Converge", "RestartAdopts"}, "a pass whose Plan is empty writes nothing"},
		{"panics", false, []string{"BadInputRejected", "Removal"}, "panicked: toy: nothing to do"},
		// A known failure is excused, and only for the assertion and
		// lines it names; once fixed, it fails the check.
		{"keeps-withdrawn", true, []string{"ForeignSurvive"}, "KNOWN FAILURE, excused: the toy keeps what it withdrew"},
		{"none", true, []string{"Removal"}, "the known failure no longer happens"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/known=%v", c.bug, c.known), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestToyBroken$/^IPv4$", "-test.v")
			cmd.Env = append(os.Environ(), envToyBug+"="+c.bug)
			if c.known {
				cmd.Env = append(cmd.Env, envToyKnown+"=1")
			}
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed the toy with bug %s:\n%s", c.bug, out)
			}
			for _, check := range c.fail {
				if !regexp.MustCompile(`--- FAIL: TestToyBroken/IPv4/` + regexp.QuoteMeta(check) + ` `).Match(out) {
					t.Errorf("check %s did not fail", check)
				}
			}
			if !strings.Contains(string(out), c.text) {
				t.Errorf("no failure says %q", c.text)
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}

package nlutil_test

import (
	"fmt"
	"testing"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/kernel/internal/nlutil"
)

func TestKindsText(t *testing.T) {
	textformtest.Flags(t, ".", map[string]nlutil.Kinds{"Links": nlutil.Links, "Addrs": nlutil.Addrs, "Routes": nlutil.Routes})
}

// TestEventJSON: the errors of events marshal as their text, not {}.
func TestEventJSON(t *testing.T) {
	resync := nlutil.Resync{Kinds: nlutil.Links | nlutil.Routes, Reason: fmt.Errorf("%w: %w", nlutil.ErrSubscriptionLost, nlutil.ErrOverflow)}
	for _, v := range []any{
		nlutil.Event{}, nlutil.Resync{}, resync, nlutil.Event{Resync: &resync},
		nlutil.Event{Err: fmt.Errorf("%w: permission denied", nlutil.ErrSubscribe)},
	} {
		textformtest.Report(t, v)
	}
}

package kernel_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/kernel"
)

func TestEnumText(t *testing.T) {
	textformtest.Flags(t, ".", map[string]kernel.EventKinds{
		"EventLinks": kernel.EventLinks, "EventAddrs": kernel.EventAddrs, "EventRoutes": kernel.EventRoutes,
	})
	require.Equal(t, "links|routes", (kernel.EventLinks | kernel.EventRoutes).String())
	require.Equal(t, "none", kernel.EventKinds(0).String())
	require.Equal(t, "addrs|0x80", (kernel.EventAddrs | 0x80).String())
	textformtest.Enum(t, ".", map[string]kernel.LinkState{"LinkGone": kernel.LinkGone, "LinkDown": kernel.LinkDown, "LinkUp": kernel.LinkUp})
	textformtest.Enum(t, ".", map[string]kernel.OpKind{"OpReplace": kernel.OpReplace, "OpAdd": kernel.OpAdd, "OpDelete": kernel.OpDelete})
}

// TestEventJSON: the errors of events marshal as their text, not {}.
func TestEventJSON(t *testing.T) {
	reason := fmt.Errorf("%w: receive buffer full", kernel.ErrOverflow)
	resync := kernel.Resync{Kinds: kernel.EventLinks | kernel.EventAddrs, Reason: reason}
	for _, v := range []any{
		kernel.Event{}, kernel.Resync{}, resync,
		kernel.Event{Resync: &resync},
		kernel.Event{Err: fmt.Errorf("subscribe: %w", kernel.ErrOverflow)},
		kernel.Event{Link: &kernel.LinkEvent{Link: kernel.Link{Index: 2, Name: "eth0", Kind: kernel.KindDevice, MTU: 1500}}},
	} {
		textformtest.Report(t, v)
	}
	b, err := json.Marshal(kernel.Event{Resync: &resync})
	require.NoError(t, err)
	require.JSONEq(t, fmt.Sprintf(`{"Link":null,"Addr":null,"Route":null,"Barrier":null,"Err":null,
		"Resync":{"Kinds":"links|addrs","Reason":%q}}`, reason.Error()), string(b))
}

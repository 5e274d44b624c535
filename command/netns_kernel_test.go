//go:build linux

package command_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// A NetNS runner's processes act on the namespace, not on the caller's.
func TestKernelNetNSRunner(t *testing.T) {
	kerneltest.RequireKernel(t)
	kerneltest.RequireCommands(t, "ip")
	ns := kerneltest.NewNS(t)
	require.NoError(t, ns.Do(func() error {
		_, err := command.Local{}.Run(context.Background(), nil, "ip", "link", "add", "npcmdtest0", "type", "bridge")
		return err
	}))
	r := command.NetNS{FD: int(ns.NsHandle())}
	out, err := r.Run(context.Background(), nil, "ip", "-o", "link", "show")
	require.NoError(t, err)
	require.Contains(t, string(out), "npcmdtest0", "the link made in the namespace is seen")
	require.Equal(t, 2, strings.Count(string(out), "\n"), "only lo and the bridge: %s", out)

	// stdin reaches the process; the caller's thread stays where it was.
	out, err = r.Run(context.Background(), strings.NewReader("x"), "cat")
	require.NoError(t, err)
	require.Equal(t, "x", string(out))
	host, err := command.Local{}.Run(context.Background(), nil, "ip", "-o", "link", "show", "npcmdtest0")
	require.Error(t, err, "the host namespace has no such link: %s", host)

	same, err := command.SameNetNS(int(ns.NsHandle()), int(ns.NsHandle()))
	require.NoError(t, err)
	require.True(t, same)
	self, err := os.Open("/proc/self/ns/net")
	require.NoError(t, err)
	defer self.Close()
	same, err = command.SameNetNS(int(ns.NsHandle()), int(self.Fd()))
	require.NoError(t, err)
	require.False(t, same)

	// A descriptor that is not open is an *Error wrapping ErrNetNS.
	_, err = command.NetNS{FD: -1}.Run(context.Background(), nil, "true")
	require.ErrorIs(t, err, command.ErrNetNS)
	var ce *command.Error
	require.True(t, errors.As(err, &ce))
	_, err = command.SameNetNS(-1, int(self.Fd()))
	require.ErrorIs(t, err, command.ErrNetNS)
}

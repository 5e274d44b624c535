//go:build linux

package ifacemonitorfake_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/ifacemonitor/ifacemonitorfake"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// assertFakeError checks that err's text starts with the package prefix,
// holds it once and names no other package.
func assertFakeError(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "ifacemonitorfake: "), "%q", msg)
	assert.Equal(t, 1, strings.Count(msg, "ifacemonitorfake: "), "one package prefix: %q", msg)
	assert.NotContains(t, msg, "ifacemonitor: ")
	assert.NotContains(t, msg, "ipfamily: ")
}

// A route destination with host bits is refused, as the kernel does, with
// an error naming the prefix and the network that errors.Is matches
// against EINVAL and ipfamily.ErrHostBits; nothing changes.
func TestRouteHostBitsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(k *ifacemonitorfake.Kernel) error
		text string
	}{
		{"add IPv4", func(k *ifacemonitorfake.Kernel) error {
			return k.AddRoute(ifacemonitor.Route{Dst: pfx("10.3.0.1/16"), LinkIndex: 1})
		}, "add route: destination 10.3.0.1/16 has host bits set (the network is 10.3.0.0/16)"},
		{"add IPv6", func(k *ifacemonitorfake.Kernel) error {
			return k.AddRoute(ifacemonitor.Route{Dst: pfx("fd03::1/64"), LinkIndex: 1})
		}, "destination fd03::1/64 has host bits set (the network is fd03::/64)"},
		{"delete", func(k *ifacemonitorfake.Kernel) error {
			return k.DelRoute(ifacemonitor.RouteKey{Dst: pfx("10.2.0.9/16"), LinkIndex: 1})
		}, "delete route: destination 10.2.0.9/16 has host bits set (the network is 10.2.0.0/16)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := populated(t)
			before := snapshot(t, k)
			err := tc.call(k)
			assertFakeError(t, err)
			assert.Contains(t, err.Error(), tc.text)
			assert.ErrorIs(t, err, unix.EINVAL)
			assert.ErrorIs(t, err, ipfamily.ErrHostBits)
			assert.Equal(t, before, snapshot(t, k), "a failed call changes nothing")
		})
	}
}

// The Resync after Overflow names the fake once and matches both
// ifacemonitor.ErrOverflow and ENOBUFS.
func TestOverflowReasonText(t *testing.T) {
	k := ifacemonitorfake.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := k.Subscribe(ctx)
	require.NoError(t, err)
	require.NotNil(t, (<-ch).Resync)
	k.Overflow()
	select {
	case ev := <-ch:
		require.NotNil(t, ev.Resync)
		reason := ev.Resync.Reason
		assertFakeError(t, reason)
		assert.Contains(t, reason.Error(), "receive buffer overflow")
		assert.ErrorIs(t, reason, ifacemonitor.ErrOverflow)
		assert.ErrorIs(t, reason, unix.ENOBUFS)
	case <-time.After(10 * time.Second):
		t.Fatal("no Resync after Overflow")
	}
	cancel()
	for range ch {
	}
}

// Subscribe with a nil ctx streams as with context.Background(), without a
// panic. That stream never ends, so the check runs in a child process and
// leaves no goroutine behind in this one.
func TestSubscribeNilContext(t *testing.T) {
	if os.Getenv("IFACEMONITORFAKE_NIL_CTX") == "" {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSubscribeNilContext$", "-test.count=1")
		cmd.Env = append(os.Environ(), "IFACEMONITORFAKE_NIL_CTX=1", "GORACE=atexit_sleep_ms=0")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return
	}
	k := ifacemonitorfake.New()
	//lint:ignore SA1012 a nil context is documented to mean Background
	ch, err := k.Subscribe(nil)
	require.NoError(t, err)
	require.NotNil(t, (<-ch).Resync)
	_, err = k.AddLink("eth0", "veth", 1500)
	require.NoError(t, err)
	select {
	case ev := <-ch:
		require.NotNil(t, ev.Link)
		assert.Equal(t, "eth0", ev.Link.Attrs().Name)
	case <-time.After(10 * time.Second):
		t.Fatal("no event after AddLink")
	}
}

//go:build linux

package netnsutil_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netns"

	"github.com/nodeplane/nodeplane/internal/netnsutil"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

func TestKernelDoRunsInsideAndLeavesCallerAlone(t *testing.T) {
	ns := kerneltest.NewNS(t)
	before, err := netns.Get()
	require.NoError(t, err)
	defer before.Close()

	var inside netns.NsHandle
	boom := errors.New("boom")
	err = netnsutil.Do(ns.NsHandle(), func() error {
		cur, err := netns.Get()
		if err != nil {
			return err
		}
		inside = cur
		return boom
	})
	require.ErrorIs(t, err, boom, "fn's error comes back")
	defer inside.Close()
	require.True(t, inside.Equal(ns.NsHandle()), "fn ran inside the namespace")

	after, err := netns.Get()
	require.NoError(t, err)
	defer after.Close()
	require.True(t, after.Equal(before), "the caller's thread did not move")
}

func TestDoRejectsHandlesThatAreNotOpen(t *testing.T) {
	called := false
	fn := func() error { called = true; return nil }
	require.ErrorIs(t, netnsutil.Do(netns.None(), fn), netnsutil.ErrNotOpen)
	require.ErrorIs(t, netnsutil.Do(netns.NsHandle(0), fn), netnsutil.ErrNotOpen)
	require.False(t, called)
}

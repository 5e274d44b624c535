package proxy

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// An unsupported kernel feature found while loading or attaching prints
// the package's prefix once and matches both sentinels.
func TestReviewUnsupportedPrefixOnce(t *testing.T) {
	err := fmt.Errorf("%w: interface %s: %w", ErrAttach, "eth0", unsupported(errors.New("TCX: not supported")))
	require.Equal(t, "proxy: attach failed: interface eth0: TCX: not supported", err.Error())
	require.ErrorIs(t, err, ErrAttach)
	require.ErrorIs(t, err, ErrNotSupported)
}

// doHere is a Kernel that runs fn on the calling thread, for tests that
// attach nothing.
type doHere struct{}

func (doHere) Do(fn func() error) error { return fn() }

// A pod interface prefix is checked as an interface name is
// (ifname.Valid): one no interface name can start with is refused and
// named.
func TestReviewPodPrefixValid(t *testing.T) {
	for _, pre := range []string{"", "a\vb", "a\rb", "veth/", "0123456789abcdef"} {
		_, err := New(Options{Kernel: doHere{}, PinDir: "/sys/fs/bpf/np", PodInterfacePrefixes: []string{pre}})
		require.ErrorIs(t, err, ErrInvalidOptions, "%q", pre)
		require.Contains(t, err.Error(), "pod interface prefix", "%q", pre)
	}
	_, err := New(Options{Kernel: doHere{}, PinDir: "/sys/fs/bpf/np", PodInterfacePrefixes: []string{"veth", "cali"}})
	require.NoError(t, err)
}

package mtu_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/mtu"
)

// assertPackageError checks that err's text starts with the package prefix,
// holds it once and contains text, and that errors.Is matches each of is.
func assertPackageError(t *testing.T, err error, text string, is ...error) {
	t.Helper()
	require.Error(t, err)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "mtu: "), "%q", msg)
	assert.Equal(t, 1, strings.Count(msg, "mtu: "), "one package prefix: %q", msg)
	assert.Contains(t, msg, text)
	for _, s := range is {
		assert.ErrorIs(t, err, s)
	}
}

// Bad input, and failures, are errors whose text names the package once and
// says what is wrong, and that errors.Is matches against every sentinel they
// speak of.
func TestErrorTexts(t *testing.T) {
	detector := func(t *testing.T, ns *kernelfake.Namespace) *mtu.Detector {
		d, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: ns})
		require.NoError(t, err)
		return d
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
		return path
	}
	for _, tc := range []struct {
		name string
		call func(t *testing.T) error
		text string
		is   []error
	}{
		{"detector without kernel", func(*testing.T) error {
			_, err := mtu.NewDetector(mtu.DetectorOptions{})
			return err
		}, "mtu: invalid options: DetectorOptions.Kernel is required", []error{mtu.ErrInvalidOptions}},
		{"fallback out of range", func(*testing.T) error {
			_, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: mtu.FakeNode(t), Fallback: 10})
			return err
		}, "invalid MTU: DetectorOptions.Fallback 10 is outside 68–65535", []error{mtu.ErrInvalidOptions, mtu.ErrInvalidMTU}},
		{"bad include pattern", func(*testing.T) error {
			_, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: mtu.FakeNode(t), Include: []string{"eth("}})
			return err
		}, `invalid interface pattern: DetectorOptions.Include pattern "eth("`, []error{mtu.ErrInvalidOptions, mtu.ErrInvalidPattern}},
		{"bad exclude pattern", func(*testing.T) error {
			_, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: mtu.FakeNode(t), Exclude: []string{"[z-a]"}})
			return err
		}, `Exclude pattern "[z-a]"`, []error{mtu.ErrInvalidOptions, mtu.ErrInvalidPattern}},
		{"listing failure", func(t *testing.T) error {
			ns := mtu.FakeNode(t)
			ns.Fail(kernelfake.OpLinks, 1, os.ErrPermission)
			_, err := detector(t, ns).Detect(context.Background())
			return err
		}, "listing links failed: permission denied", []error{mtu.ErrListLinks, os.ErrPermission}},
		{"listing a closed namespace", func(t *testing.T) error {
			ns := mtu.FakeNode(t)
			ns.Fail(kernelfake.OpLinks, 1, kernel.ErrClosed)
			_, err := detector(t, ns).Detect(context.Background())
			return err
		}, "mtu: listing links failed: kernel: namespace closed", []error{mtu.ErrListLinks, kernel.ErrClosed}},
		{"negative extra", func(*testing.T) error {
			_, err := mtu.PodMTU(mtu.PodMTUOptions{HostMTU: 1500, Extra: -1})
			return err
		}, "invalid options: PodMTUOptions.Extra overhead must not be negative, got -1", []error{mtu.ErrInvalidOptions}},
		{"negative encapsulation overhead", func(*testing.T) error {
			_, err := mtu.PodMTU(mtu.PodMTUOptions{HostMTU: 1500, Encaps: []mtu.Encap{{Name: "odd", V4: -4}}})
			return err
		}, `PodMTUOptions.Encaps: encapsulation "odd"`, []error{mtu.ErrInvalidOptions}},
		{"negative override", func(*testing.T) error {
			_, err := mtu.PodMTU(mtu.PodMTUOptions{Override: -1})
			return err
		}, "invalid MTU: PodMTUOptions.Override must not be negative", []error{mtu.ErrInvalidOptions, mtu.ErrInvalidMTU}},
		{"override below the IPv6 floor", func(*testing.T) error {
			_, err := mtu.PodMTU(mtu.PodMTUOptions{Override: 1000, PodIPv6: true})
			return err
		}, "PodMTUOptions.Override 1000 is outside 1280–65535", []error{mtu.ErrInvalidOptions, mtu.ErrInvalidMTU}},
		{"no host MTU", func(*testing.T) error {
			_, err := mtu.PodMTU(mtu.PodMTUOptions{})
			return err
		}, "PodMTUOptions.HostMTU must be positive", []error{mtu.ErrInvalidOptions}},
		{"pod MTU too small", func(*testing.T) error {
			_, err := mtu.PodMTU(mtu.PodMTUOptions{HostMTU: 1300, Encaps: []mtu.Encap{mtu.WireGuard}, PodIPv6: true})
			return err
		}, "pod MTU too small: host MTU 1300 leaves 1240", []error{mtu.ErrMTUTooSmall}},
		{"monitor without detector", func(*testing.T) error {
			_, err := mtu.NewMonitor(mtu.MonitorOptions{})
			return err
		}, "MonitorOptions.Detector is required", []error{mtu.ErrInvalidOptions}},
		{"monitor with negative interval", func(t *testing.T) error {
			_, err := mtu.NewMonitor(mtu.MonitorOptions{Detector: detector(t, mtu.FakeNode(t)), PollInterval: -1})
			return err
		}, "intervals must not be negative", []error{mtu.ErrInvalidOptions}},
		{"monitor with bad pod options", func(t *testing.T) error {
			_, err := mtu.NewMonitor(mtu.MonitorOptions{Detector: detector(t, mtu.FakeNode(t)), PodMTU: mtu.PodMTUOptions{Override: 70000}})
			return err
		}, "invalid MTU: MonitorOptions.PodMTU.Override 70000", []error{mtu.ErrInvalidOptions, mtu.ErrInvalidMTU}},
		{"monitor run twice", func(t *testing.T) error {
			m, err := mtu.NewMonitor(mtu.MonitorOptions{Detector: detector(t, mtu.FakeNode(t))})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			require.NoError(t, m.Run(ctx))
			return m.Run(ctx)
		}, "mtu: monitor already started", []error{mtu.ErrAlreadyStarted}},
		{"write an MTU out of range", func(*testing.T) error {
			return mtu.WriteFile(filepath.Join(dir, "w"), 20)
		}, "mtu: invalid MTU: 20 is outside 68–65535", []error{mtu.ErrInvalidMTU}},
		{"write to an empty path", func(*testing.T) error {
			return mtu.WriteFile("", 1500)
		}, "mtu: write: empty path: invalid argument", []error{fs.ErrInvalid}},
		{"write to a directory path", func(*testing.T) error {
			return mtu.WriteFile(dir+"/", 1500)
		}, "the path names no file", []error{fs.ErrInvalid}},
		{"read a missing file", func(*testing.T) error {
			_, err := mtu.ReadFile(filepath.Join(dir, "missing"))
			return err
		}, "mtu: read ", []error{os.ErrNotExist}},
		{"read a word", func(*testing.T) error {
			_, err := mtu.ReadFile(write("word", "large\n"))
			return err
		}, `holds "large", not a number`, []error{mtu.ErrInvalidMTU}},
		{"read an MTU out of range", func(*testing.T) error {
			_, err := mtu.ReadFile(write("big", "70000"))
			return err
		}, "invalid MTU: 70000 is outside 68–65535 (in ", []error{mtu.ErrInvalidMTU}},
		{"read a long file", func(*testing.T) error {
			_, err := mtu.ReadFile(write("long", strings.Repeat("1", 100)))
			return err
		}, "is longer than 64 bytes", []error{mtu.ErrInvalidMTU}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertPackageError(t, tc.call(t), tc.text, tc.is...)
		})
	}
}

// Sentinels are distinct: an error about one never matches an unrelated
// one, and an MTU that is no option is no bad option.
func TestErrorSentinelsDistinct(t *testing.T) {
	_, err := mtu.PodMTU(mtu.PodMTUOptions{HostMTU: 1300, Encaps: []mtu.Encap{mtu.WireGuard}, PodIPv6: true})
	require.ErrorIs(t, err, mtu.ErrMTUTooSmall)
	for _, other := range []error{mtu.ErrInvalidOptions, mtu.ErrInvalidMTU, mtu.ErrListLinks} {
		assert.False(t, errors.Is(err, other), "%v", other)
	}
	err = mtu.WriteFile(filepath.Join(t.TempDir(), "mtu"), 1)
	require.ErrorIs(t, err, mtu.ErrInvalidMTU)
	assert.False(t, errors.Is(err, mtu.ErrInvalidOptions))
}

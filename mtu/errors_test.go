package mtu_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	detector := func(t *testing.T, lister mtu.LinkLister) *mtu.Detector {
		d, err := mtu.NewDetector(mtu.DetectorOptions{Lister: lister})
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
		{"detector without lister", func(*testing.T) error {
			_, err := mtu.NewDetector(mtu.DetectorOptions{})
			return err
		}, "DetectorOptions.Lister is required", []error{mtu.ErrInvalid}},
		{"fallback out of range", func(*testing.T) error {
			_, err := mtu.NewDetector(mtu.DetectorOptions{Lister: mtu.NewFakeLister(), Fallback: 10})
			return err
		}, "invalid MTU: DetectorOptions.Fallback 10 is outside 68–65535", []error{mtu.ErrInvalid, mtu.ErrInvalidMTU}},
		{"bad include pattern", func(*testing.T) error {
			_, err := mtu.NewDetector(mtu.DetectorOptions{Lister: mtu.NewFakeLister(), Include: []string{"eth("}})
			return err
		}, `invalid interface pattern: DetectorOptions.Include pattern "eth("`, []error{mtu.ErrInvalid, mtu.ErrInvalidPattern}},
		{"bad exclude pattern", func(*testing.T) error {
			_, err := mtu.NewDetector(mtu.DetectorOptions{Lister: mtu.NewFakeLister(), Exclude: []string{"[z-a]"}})
			return err
		}, `Exclude pattern "[z-a]"`, []error{mtu.ErrInvalid, mtu.ErrInvalidPattern}},
		{"lister failure", func(t *testing.T) error {
			lister := mtu.NewFakeLister()
			lister.SetError(os.ErrPermission)
			_, err := detector(t, lister).Detect(context.Background())
			return err
		}, "listing links failed: permission denied", []error{mtu.ErrListLinks, os.ErrPermission}},
		{"lister failure naming the package", func(t *testing.T) error {
			lister := mtu.NewFakeLister()
			lister.SetError(mtu.ErrInvalid)
			_, err := detector(t, lister).Detect(context.Background())
			return err
		}, "mtu: invalid input", []error{mtu.ErrListLinks, mtu.ErrInvalid}},
		{"negative extra", func(*testing.T) error {
			_, err := mtu.PodMTU(mtu.PodMTUOptions{HostMTU: 1500, Extra: -1})
			return err
		}, "PodMTUOptions.Extra overhead must not be negative, got -1", []error{mtu.ErrInvalid}},
		{"negative encapsulation overhead", func(*testing.T) error {
			_, err := mtu.PodMTU(mtu.PodMTUOptions{HostMTU: 1500, Encaps: []mtu.Encap{{Name: "odd", V4: -4}}})
			return err
		}, `PodMTUOptions.Encaps: encapsulation "odd"`, []error{mtu.ErrInvalid}},
		{"negative override", func(*testing.T) error {
			_, err := mtu.PodMTU(mtu.PodMTUOptions{Override: -1})
			return err
		}, "invalid MTU: PodMTUOptions.Override must not be negative", []error{mtu.ErrInvalid, mtu.ErrInvalidMTU}},
		{"override below the IPv6 floor", func(*testing.T) error {
			_, err := mtu.PodMTU(mtu.PodMTUOptions{Override: 1000, PodIPv6: true})
			return err
		}, "PodMTUOptions.Override 1000 is outside 1280–65535", []error{mtu.ErrInvalid, mtu.ErrInvalidMTU}},
		{"no host MTU", func(*testing.T) error {
			_, err := mtu.PodMTU(mtu.PodMTUOptions{})
			return err
		}, "PodMTUOptions.HostMTU must be positive", []error{mtu.ErrInvalid}},
		{"pod MTU too small", func(*testing.T) error {
			_, err := mtu.PodMTU(mtu.PodMTUOptions{HostMTU: 1300, Encaps: []mtu.Encap{mtu.WireGuard}, PodIPv6: true})
			return err
		}, "pod MTU too small: host MTU 1300 leaves 1240", []error{mtu.ErrMTUTooSmall}},
		{"monitor without detector", func(*testing.T) error {
			_, err := mtu.NewMonitor(mtu.MonitorOptions{})
			return err
		}, "MonitorOptions.Detector is required", []error{mtu.ErrInvalid}},
		{"monitor with negative interval", func(t *testing.T) error {
			_, err := mtu.NewMonitor(mtu.MonitorOptions{Detector: detector(t, mtu.NewFakeLister()), PollInterval: -1})
			return err
		}, "intervals must not be negative", []error{mtu.ErrInvalid}},
		{"monitor with bad pod options", func(t *testing.T) error {
			_, err := mtu.NewMonitor(mtu.MonitorOptions{Detector: detector(t, mtu.NewFakeLister()), PodMTU: mtu.PodMTUOptions{Override: 70000}})
			return err
		}, "invalid MTU: MonitorOptions.PodMTU.Override 70000", []error{mtu.ErrInvalid, mtu.ErrInvalidMTU}},
		{"monitor run twice", func(t *testing.T) error {
			m, err := mtu.NewMonitor(mtu.MonitorOptions{Detector: detector(t, mtu.NewFakeLister())})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			require.NoError(t, m.Run(ctx))
			return m.Run(ctx)
		}, "already started", []error{mtu.ErrStarted}},
		{"write an MTU out of range", func(*testing.T) error {
			return mtu.WriteFile(filepath.Join(dir, "w"), 20)
		}, "invalid MTU: 20 is outside 68–65535", []error{mtu.ErrInvalid, mtu.ErrInvalidMTU}},
		{"write to an empty path", func(*testing.T) error {
			return mtu.WriteFile("", 1500)
		}, "invalid input: empty path", []error{mtu.ErrInvalid}},
		{"write to a directory path", func(*testing.T) error {
			return mtu.WriteFile(dir+"/", 1500)
		}, "names no file", []error{mtu.ErrInvalid}},
		{"read a missing file", func(*testing.T) error {
			_, err := mtu.ReadFile(filepath.Join(dir, "missing"))
			return err
		}, "mtu: read ", []error{os.ErrNotExist}},
		{"read a word", func(*testing.T) error {
			_, err := mtu.ReadFile(write("word", "large\n"))
			return err
		}, `holds "large", not a number`, []error{mtu.ErrInvalid, mtu.ErrInvalidMTU}},
		{"read an MTU out of range", func(*testing.T) error {
			_, err := mtu.ReadFile(write("big", "70000"))
			return err
		}, "invalid MTU: 70000 is outside 68–65535 (in ", []error{mtu.ErrInvalid, mtu.ErrInvalidMTU}},
		{"read a long file", func(*testing.T) error {
			_, err := mtu.ReadFile(write("long", strings.Repeat("1", 100)))
			return err
		}, "is longer than 64 bytes", []error{mtu.ErrInvalid, mtu.ErrInvalidMTU}},
		{"fake without the link", func(*testing.T) error {
			return mtu.NewFakeLister().SetMTU("eth0", 1500)
		}, `fake lister: no link "eth0"`, []error{mtu.ErrInvalid}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertPackageError(t, tc.call(t), tc.text, tc.is...)
		})
	}
}

// Sentinels are distinct: an error about one never matches an unrelated one.
func TestErrorSentinelsDistinct(t *testing.T) {
	_, err := mtu.PodMTU(mtu.PodMTUOptions{HostMTU: 1300, Encaps: []mtu.Encap{mtu.WireGuard}, PodIPv6: true})
	require.ErrorIs(t, err, mtu.ErrMTUTooSmall)
	for _, other := range []error{mtu.ErrInvalid, mtu.ErrInvalidMTU, mtu.ErrListLinks} {
		assert.False(t, errors.Is(err, other), "%v", other)
	}
}

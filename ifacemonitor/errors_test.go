//go:build linux

package ifacemonitor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/ifacemonitor/ifacemonitorfake"
)

// streamSource lists a fake kernel, but its Subscribe returns err, or the
// stream ch that the test feeds and closes, and records the ctx it got.
type streamSource struct {
	*ifacemonitorfake.Kernel
	ch  chan ifacemonitor.Event
	err error
	ctx chan context.Context
}

func (s *streamSource) Subscribe(ctx context.Context) (<-chan ifacemonitor.Event, error) {
	if s.ctx != nil {
		s.ctx <- ctx
	}
	if s.err != nil {
		return nil, s.err
	}
	if s.ch == nil {
		return nil, nil // a broken Source
	}
	return s.ch, nil
}

// Bad options and failed starts are errors whose text names the package
// once and says what is wrong, and that errors.Is matches against every
// sentinel they speak of.
func TestErrorTexts(t *testing.T) {
	fake := ifacemonitorfake.New()
	kernelOpts := func(o ifacemonitor.Options) ifacemonitor.Options {
		o.Handle, o.Namespace = &netlink.Handle{}, 1 // New opens neither
		return o
	}
	start := func(t *testing.T, src ifacemonitor.Source) error {
		m, err := ifacemonitor.New(ifacemonitor.Options{Source: src})
		require.NoError(t, err)
		return m.Start(context.Background())
	}
	for _, tc := range []struct {
		name string
		call func(t *testing.T) error
		text string
		is   []error
	}{
		{"source and handle", func(*testing.T) error {
			_, err := ifacemonitor.New(ifacemonitor.Options{Source: fake, Handle: &netlink.Handle{}})
			return err
		}, "invalid options: Source replaces the kernel", []error{ifacemonitor.ErrInvalidOptions}},
		{"no handle", func(*testing.T) error {
			_, err := ifacemonitor.New(ifacemonitor.Options{})
			return err
		}, "Handle is required", []error{ifacemonitor.ErrInvalidOptions}},
		{"no namespace", func(*testing.T) error {
			_, err := ifacemonitor.New(ifacemonitor.Options{Handle: &netlink.Handle{}})
			return err
		}, "Namespace is required", []error{ifacemonitor.ErrInvalidOptions}},
		{"bad include", func(*testing.T) error {
			_, err := ifacemonitor.New(kernelOpts(ifacemonitor.Options{Include: []string{"eth("}}))
			return err
		}, `invalid options: Include pattern "eth("`, []error{ifacemonitor.ErrInvalidOptions}},
		{"bad exclude", func(*testing.T) error {
			_, err := ifacemonitor.New(ifacemonitor.Options{Source: fake, Exclude: []string{"[z-a]"}})
			return err
		}, `Exclude pattern "[z-a]"`, []error{ifacemonitor.ErrInvalidOptions}},
		{"negative damping", func(*testing.T) error {
			_, err := ifacemonitor.New(kernelOpts(ifacemonitor.Options{FlapDampingWindow: -time.Second}))
			return err
		}, "negative FlapDampingWindow -1s", []error{ifacemonitor.ErrInvalidOptions}},
		{"negative buffer", func(*testing.T) error {
			_, err := ifacemonitor.New(kernelOpts(ifacemonitor.Options{ReceiveBufferSize: -1}))
			return err
		}, "negative ReceiveBufferSize -1", []error{ifacemonitor.ErrInvalidOptions}},
		{"subscription refused", func(t *testing.T) error {
			return start(t, &streamSource{Kernel: fake, err: unix.EPERM})
		}, "subscribe failed: operation not permitted", []error{ifacemonitor.ErrSubscribe, unix.EPERM}},
		{"source without a stream", func(t *testing.T) error {
			return start(t, &streamSource{Kernel: fake})
		}, "subscribe failed: the Source returned no channel", []error{ifacemonitor.ErrSubscribe}},
		{"started twice", func(t *testing.T) error {
			src := &streamSource{Kernel: fake, ch: make(chan ifacemonitor.Event)}
			m, err := ifacemonitor.New(ifacemonitor.Options{Source: src})
			require.NoError(t, err)
			require.NoError(t, m.Start(context.Background()))
			err = m.Start(context.Background())
			close(src.ch)
			<-m.Done()
			return err
		}, "already started", []error{ifacemonitor.ErrAlreadyStarted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(t)
			require.Error(t, err)
			msg := err.Error()
			assert.True(t, strings.HasPrefix(msg, "ifacemonitor: "), "%q", msg)
			assert.Equal(t, 1, strings.Count(msg, "ifacemonitor: "), "one package prefix: %q", msg)
			assert.Contains(t, msg, tc.text)
			for _, s := range tc.is {
				assert.ErrorIs(t, err, s)
			}
		})
	}
	assert.False(t, errors.Is(ifacemonitor.ErrSubscribe, ifacemonitor.ErrInvalidOptions))
}

// Start with a nil ctx runs as with context.Background(), without a panic;
// the monitor stops when its Source ends the stream.
func TestStartNilContext(t *testing.T) {
	k := ifacemonitorfake.New()
	_, err := k.AddLink("eth0", "veth", 1500)
	require.NoError(t, err)
	src := &streamSource{Kernel: k, ch: make(chan ifacemonitor.Event), ctx: make(chan context.Context, 1)}
	links := make(chan string, 1)
	m, err := ifacemonitor.New(ifacemonitor.Options{Source: src, OnLinkState: func(u ifacemonitor.LinkUpdate) { links <- u.Name }})
	require.NoError(t, err)
	//lint:ignore SA1012 a nil context is documented to mean Background
	require.NoError(t, m.Start(nil))
	assert.NotNil(t, <-src.ctx, "the Source got a context")
	src.ch <- ifacemonitor.Event{Resync: &ifacemonitor.Resync{}}
	select {
	case name := <-links:
		assert.Equal(t, "eth0", name)
	case <-time.After(10 * time.Second):
		t.Fatal("the monitor reported nothing")
	}
	close(src.ch)
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the monitor did not stop when its stream ended")
	}
}

package proxy_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/bpf/proxy"
	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
)

func TestAttachModeText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]proxy.AttachMode{"AttachAuto": proxy.AttachAuto, "AttachTCX": proxy.AttachTCX,
		"AttachTC": proxy.AttachTC})
}

type runHere struct{}

func (runHere) Do(fn func() error) error { return fn() }

// An Attach no mode has is refused by New; before an Apply, Status says
// the mode asked for.
func TestAttachModeOptions(t *testing.T) {
	_, err := proxy.New(proxy.Options{Kernel: runHere{}, PinDir: "/sys/fs/bpf/x", Attach: proxy.AttachTC + 1})
	require.ErrorIs(t, err, proxy.ErrInvalidOptions)
	require.ErrorContains(t, err, "AttachMode(3)")
	for _, m := range []proxy.AttachMode{proxy.AttachAuto, proxy.AttachTCX, proxy.AttachTC} {
		p, err := proxy.New(proxy.Options{Kernel: runHere{}, PinDir: "/sys/fs/bpf/x", Attach: m})
		require.NoError(t, err)
		require.Equal(t, m, p.Status().Attach)
	}
}

// The attach mode reads from text (a flag, a configuration file) and
// prints as text: "auto", "tcx" or "tc". An agent that must run on kernels
// before Linux 6.6 leaves it at AttachAuto; AttachTC forces classic tc.
func ExampleAttachMode() {
	var mode proxy.AttachMode
	if err := mode.UnmarshalText([]byte("tc")); err != nil {
		fmt.Println(err)
		return
	}
	opts := proxy.Options{PinDir: "/sys/fs/bpf/nodeplane-proxy", Attach: mode}
	fmt.Println(opts.Attach, opts.Attach == proxy.AttachTC)
	fmt.Println(mode.UnmarshalText([]byte("legacy")))
	// Output:
	// tc true
	// proxy: unknown AttachMode "legacy"; valid: auto, tcx, tc
}

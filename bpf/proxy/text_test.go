package proxy_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/bpf/proxy"
	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
)

func TestProtocolText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]proxy.Protocol{"TCP": proxy.TCP, "UDP": proxy.UDP})
	b, err := proxy.Protocol(0).MarshalText()
	require.NoError(t, err)
	require.Equal(t, "TCP", string(b), "the zero Protocol is TCP")
}

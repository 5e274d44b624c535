package kerneltest_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
)

func TestTopologyText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]kerneltest.Underlay{"UnderlayBridge": kerneltest.UnderlayBridge, "UnderlayVeth": kerneltest.UnderlayVeth})
	textformtest.Enum(t, ".", map[string]kerneltest.Stack{"DualStack": kerneltest.DualStack, "IPv4Only": kerneltest.IPv4Only, "IPv6Only": kerneltest.IPv6Only})
}

package ipfamily_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/ipfamily"
)

func TestFamilyText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]ipfamily.Family{"IPv4": ipfamily.IPv4, "IPv6": ipfamily.IPv6})
}

package textformtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConstantsOf(t *testing.T) {
	require.Equal(t, []string{"ModeA", "ModeB", "ModeC", "ModeD", "ModeE", "ModeF"}, constantsOf(t, "testdata/consts", "Mode"))
}

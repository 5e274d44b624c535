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

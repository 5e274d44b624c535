package errs_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/errs"
)

var (
	errTarget = errors.New("pkg: invalid target")
	errIface  = errors.New("pkg: invalid interface name")
)

func TestAlso(t *testing.T) {
	require.NoError(t, errs.Also(nil, errIface))
	err := errs.Also(fmt.Errorf("%w 10.0.0.0/24: interface name %q is too long", errTarget, "x"), errIface)
	require.Equal(t, `pkg: invalid target 10.0.0.0/24: interface name "x" is too long`, err.Error())
	require.ErrorIs(t, err, errTarget)
	require.ErrorIs(t, err, errIface)
	wrapped := fmt.Errorf("outer: %w", err)
	require.ErrorIs(t, wrapped, errIface)
}

func ExampleAlso() {
	err := errs.Also(fmt.Errorf("%w 10.0.0.0/24: interface name too long", errTarget), errIface)
	fmt.Println(err, errors.Is(err, errIface))
	// Output: pkg: invalid target 10.0.0.0/24: interface name too long true
}

package kernelfake_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

// Do never runs its function (it would run in the caller's namespace): it
// fails with ErrNoThread, which wraps kernel.ErrNotSupported, counts as a
// call of OpDo, and takes injected failures as every method does.
func TestDoHasNoThread(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	ran := false
	err := ns.Do(func() error { ran = true; return nil })
	require.ErrorIs(t, err, kernelfake.ErrNoThread)
	require.ErrorIs(t, err, kernel.ErrNotSupported)
	assert.False(t, ran)
	assert.Equal(t, 1, ns.Calls(kernelfake.OpDo))
	require.ErrorIs(t, ns.Do(nil), kernel.ErrInvalid)
	boom := errors.New("boom")
	ns.Fail(kernelfake.OpDo, 1, boom)
	require.ErrorIs(t, ns.Do(func() error { return nil }), boom)
	var _ kernel.Doer = ns
}

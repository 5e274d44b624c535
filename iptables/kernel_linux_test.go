//go:build linux

package iptables

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
)

// OpenKernelForTest opens the test namespace ns as the Kernel of a Table:
// the one way a Table reaches a namespace. It is closed when the test
// ends.
func OpenKernelForTest(t testing.TB, ns *kerneltest.NS) *kernel.Namespace {
	t.Helper()
	k, err := kernel.Open(ns.Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close() })
	return k
}

//go:build linux

package managertest

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// Converge bounds every wait of the kernel tests for the loop and the
// kernel; it is a bound on a hung test, not a timing assertion.
const Converge = 30 * time.Second

// Pick returns the first address of family f among addrs, or the zero
// Addr when there is none.
func Pick(f ipfamily.Family, addrs ...netip.Addr) netip.Addr {
	for _, a := range addrs {
		if ipfamily.Of(a) == f {
			return a
		}
	}
	return netip.Addr{}
}

// RunMonitor builds an ifacemonitor.Monitor with opts and runs it until the
// test ends (then waits for Run to return).
func RunMonitor(t testing.TB, opts ifacemonitor.Options) {
	t.Helper()
	mon, err := ifacemonitor.New(opts)
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mon.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
}

//go:build linux

package nftables_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// closeCountingKernel is the fake, whose sockets count their Close calls.
type closeCountingKernel struct {
	*nftablesfake.Namespace
	mu    sync.Mutex
	socks []*closeCountingSocket
}

type closeCountingSocket struct {
	kernel.NFTablesSocket
	closes atomic.Int32
}

func (s *closeCountingSocket) Close() error {
	s.closes.Add(1)
	return s.NFTablesSocket.Close()
}

func (k *closeCountingKernel) OpenNFTablesSocket() (kernel.NFTablesSocket, error) {
	s, err := k.Namespace.OpenNFTablesSocket()
	if err != nil {
		return nil, err
	}
	cs := &closeCountingSocket{NFTablesSocket: s}
	k.mu.Lock()
	k.socks = append(k.socks, cs)
	k.mu.Unlock()
	return cs, nil
}

func (k *closeCountingKernel) sock(i int) *closeCountingSocket {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.socks[i]
}

// A socket is closed once: by Close, or when a Table dropped without Close
// is collected — never by both. (A socket that closes a bare descriptor
// number twice closes whatever file reused the number: the bench's
// capturing socket closed the pipes of a concurrent nft process.)
func TestSocketIsClosedOnce(t *testing.T) {
	k := &closeCountingKernel{Namespace: nftablesfake.New()}
	collected := make(chan struct{})
	program := func(closeIt bool) {
		tbl, err := nftables.New(fakeOpts(k))
		require.NoError(t, err)
		require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{acceptFrom("10.0.0.1/32")}))
		_, err = tbl.Apply(context.Background())
		require.NoError(t, err)
		if closeIt {
			require.NoError(t, tbl.Close())
			require.NoError(t, tbl.Close(), "a second Close does nothing")
			runtime.AddCleanup(tbl, func(ch chan struct{}) { close(ch) }, collected)
		}
	}
	program(true)  // socket 0: closed by Close
	program(false) // socket 1: dropped
	closed, dropped := k.sock(0), k.sock(1)
	require.Equal(t, int32(1), closed.closes.Load())
	require.Zero(t, dropped.closes.Load())

	// Both Tables are garbage: wait until both are collected and the
	// dropped one's socket closed, then give the collector's cleanups a
	// little more time.
	require.Eventually(t, func() bool {
		runtime.GC()
		select {
		case <-collected:
			return dropped.closes.Load() == 1
		default:
			return false
		}
	}, 10*time.Second, 5*time.Millisecond, "a Table dropped without Close closes its socket when collected")
	assert.Never(t, func() bool {
		runtime.GC()
		return closed.closes.Load() != 1 || dropped.closes.Load() != 1
	}, 200*time.Millisecond, 10*time.Millisecond, "a socket closed by Close is not closed again when its Table is collected")
}

package iptables_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// slowSave wraps the fake kernel k: a save signals started, then waits for
// release (or, if honorCtx, the end of its context) before running; done
// is set when the save call returns.
type slowSave struct {
	k        *iptablesfake.Kernel
	honorCtx bool
	started  chan struct{}
	release  chan struct{}
	done     atomic.Bool
}

func newSlowSave(k *iptablesfake.Kernel, honorCtx bool) *slowSave {
	return &slowSave{k: k, honorCtx: honorCtx, started: make(chan struct{}, 1), release: make(chan struct{})}
}

func (s *slowSave) Run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	if stdin != nil {
		return s.k.Run(ctx, stdin, name, args...)
	}
	defer s.done.Store(true)
	s.started <- struct{}{}
	if s.honorCtx {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		<-s.release
	}
	return s.k.Run(ctx, stdin, name, args...)
}

var _ command.Runner = (*slowSave)(nil)

func TestApplyCancelledDuringConcurrentRead(t *testing.T) {
	tests := []struct {
		name     string
		honorCtx bool
	}{
		{"runner honours the context", true},
		{"runner ignores the context", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns, k := newFake()
			s := newSlowSave(k, tc.honorCtx)
			opts := fakeOpts(ns)
			opts.Kernel = commands(s)
			tbl := newTable(t, opts)
			require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}}))
			require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-a")}))

			ctx, cancel := context.WithCancel(context.Background())
			type result struct {
				err      error
				joinedOK bool
			}
			done := make(chan result, 1)
			go func() {
				_, err := tbl.Apply(ctx)
				// The read started by Apply has ended before Apply returns.
				done <- result{err, s.done.Load()}
			}()
			<-s.started
			cancel()
			if !tc.honorCtx {
				select {
				case <-done:
					t.Fatal("Apply returned while its read was still running")
				case <-time.After(20 * time.Millisecond):
				}
				close(s.release)
			}
			r := <-done
			require.ErrorIs(t, r.err, context.Canceled)
			assert.True(t, r.joinedOK, "the read had returned when Apply returned")
			assert.Zero(t, k.Count(iptablesfake.OpRestore), "nothing written")
			assert.Empty(t, k.Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "INPUT"))

			// A later Apply converges.
			if tc.honorCtx {
				close(s.release)
			}
			s.started = make(chan struct{}, 1)
			apply(t, tbl)
			assert.Len(t, k.Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "INPUT"), 1)
			assert.Len(t, k.Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "np-a"), 1)
		})
	}
}

func TestApplyWithEndedContextRunsNothing(t *testing.T) {
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tbl.Apply(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, k.Calls())
	st := tbl.WorkStats()
	assert.Zero(t, st.Saves+st.SaveErrors+st.Restores, "no binary counted")
}

func TestSaveFailureOfConcurrentReadIsReturned(t *testing.T) {
	// The first read (started concurrently) fails: Apply fails as a whole
	// (the dataplane loop retries it with backoff) and writes nothing; the
	// next Apply reads again and writes.
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
	k.FailNext(iptablesfake.OpSave, 1)
	_, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, iptables.ErrSave)
	require.NotErrorIs(t, err, dataplane.ErrPartial)
	assert.Zero(t, k.Count(iptablesfake.OpRestore))
	apply(t, tbl)
	assert.Equal(t, 2, k.Count(iptablesfake.OpSave))
	assert.Equal(t, 1, k.Count(iptablesfake.OpRestore))
	st := tbl.WorkStats()
	assert.Equal(t, [2]int{2, 1}, [2]int{st.Saves, st.SaveErrors})
	assert.Len(t, k.Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "INPUT"), 1)
}

//go:build linux

package nlutil

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/vishvananda/netlink"
)

// DefaultDumpAttempts is how many times LinkList and AddrList try a dump
// that the kernel reports as interrupted before giving up.
const DefaultDumpAttempts = 5

// Dump retry backoff: the first retry waits dumpBackoffMin, each further one
// twice as long, up to dumpBackoffMax. A dump is interrupted by a concurrent
// change, so a short pause is usually enough for the next one to be clean.
const (
	dumpBackoffMin = time.Millisecond
	dumpBackoffMax = 50 * time.Millisecond
)

var (
	// ErrNilHandle is returned by the list helpers for a nil netlink
	// handle. nlutil never falls back to the process's namespace.
	ErrNilHandle = errors.New("nlutil: nil netlink handle")
	// ErrInvalidArgument is wrapped by every error about bad input.
	ErrInvalidArgument = errors.New("nlutil: invalid argument")
)

// retryDump calls fn, a netlink dump, until it returns a result that the
// kernel did not mark as interrupted (NLM_F_DUMP_INTR, reported by netlink
// as an error matching netlink.ErrDumpInterrupted), at most attempts times,
// pausing briefly (on clk) between attempts.
//
// Any other error is returned at once, as is. After attempts interrupted
// dumps, retryDump returns the last (possibly inconsistent or nil) result
// with an error that wraps netlink.ErrDumpInterrupted; callers that check
// the error never use such a result. If ctx ends first, the error wraps
// ctx.Err() (and netlink.ErrDumpInterrupted when a dump had been
// interrupted). attempts < 1, a nil fn or a nil ctx is an error wrapping
// ErrInvalidArgument, and fn is not called.
func retryDump[T any](ctx context.Context, clk clock.Clock, attempts int, fn func() ([]T, error)) ([]T, error) {
	if attempts < 1 {
		return nil, fmt.Errorf("%w: dump attempts must be at least 1, got %d", ErrInvalidArgument, attempts)
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: nil dump function", ErrInvalidArgument)
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	backoff := dumpBackoffMin
	for attempt := 1; ; attempt++ {
		res, err := fn()
		if err == nil || !errors.Is(err, netlink.ErrDumpInterrupted) {
			return res, err
		}
		if attempt == attempts {
			return res, fmt.Errorf("nlutil: dump interrupted %d times in a row: %w", attempts, err)
		}
		t := clk.NewTimer(backoff)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return res, fmt.Errorf("nlutil: dump interrupted, then %w (last attempt: %w)", ctx.Err(), err)
		}
		backoff = min(2*backoff, dumpBackoffMax)
	}
}

// LinkList lists the links in h's namespace, retrying interrupted dumps.
func LinkList(ctx context.Context, h *netlink.Handle) ([]netlink.Link, error) {
	if h == nil {
		return nil, ErrNilHandle
	}
	res, err := retryDump(ctx, clock.Real(), DefaultDumpAttempts, h.LinkList)
	if err != nil {
		return res, fmt.Errorf("nlutil: list links: %w", err)
	}
	return res, nil
}

// AddrList lists the addresses of link (nil for all links) of the given
// family (netlink.FAMILY_ALL, FAMILY_V4, FAMILY_V6) in h's namespace,
// retrying interrupted dumps.
func AddrList(ctx context.Context, h *netlink.Handle, link netlink.Link, family int) ([]netlink.Addr, error) {
	if h == nil {
		return nil, ErrNilHandle
	}
	res, err := retryDump(ctx, clock.Real(), DefaultDumpAttempts, func() ([]netlink.Addr, error) {
		return h.AddrList(link, family)
	})
	if err != nil {
		return res, fmt.Errorf("nlutil: list addresses: %w", err)
	}
	return res, nil
}

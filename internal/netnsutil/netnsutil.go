//go:build linux

package netnsutil

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// ErrNotOpen is returned by Do for a handle that is not an open file
// descriptor above 0 (a zero NsHandle is standard input, never a namespace).
var ErrNotOpen = errors.New("netnsutil: network namespace handle is not open")

// Do runs fn on a new goroutine locked to its OS thread inside the network
// namespace ns and returns fn's error. The calling goroutine's thread never
// changes namespace. If the worker thread cannot return to its original
// namespace, Do also returns that error (joined with fn's) and the thread is
// left locked so that it dies with the goroutine. fn must not call
// runtime.Goexit (t.FailNow and friends).
func Do(ns netns.NsHandle, fn func() error) error {
	if !ns.IsOpen() || ns <= 0 {
		return ErrNotOpen
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netnsutil: current network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netnsutil: entering the network namespace: %w", err)
			return
		}
		fnErr := fn()
		if err := netns.Set(orig); err != nil {
			done <- errors.Join(fnErr, fmt.Errorf("netnsutil: leaving the network namespace: %w", err))
			return // the thread stays locked and dies with the goroutine
		}
		runtime.UnlockOSThread()
		done <- fnErr
	}()
	return <-done
}

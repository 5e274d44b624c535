package mtu

import (
	"context"
	"slices"
	"sync"
)

// FakeLister is an in-memory LinkLister for tests, in this package and in
// the caller's: it returns the links it holds, can change one link's MTU or
// state as the kernel would, and can be made to fail. The zero FakeLister
// holds no links. It is safe for concurrent use.
type FakeLister struct {
	mu    sync.Mutex
	links []Link
	err   error
	calls int
}

// NewFakeLister returns a FakeLister holding a copy of links.
func NewFakeLister(links ...Link) *FakeLister {
	return &FakeLister{links: slices.Clone(links)}
}

// Links returns a copy of the links, or the injected error. It fails with
// ctx's error when ctx is done.
func (f *FakeLister) Links(ctx context.Context) ([]Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if ctx != nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if f.err != nil {
		return nil, f.err
	}
	return slices.Clone(f.links), nil
}

// SetLinks replaces every link with a copy of links.
func (f *FakeLister) SetLinks(links ...Link) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.links = slices.Clone(links)
}

// SetMTU changes the MTU of the link called name, as `ip link set NAME mtu
// MTU` would. It fails, with an error wrapping ErrInvalid, when there is no
// such link.
func (f *FakeLister) SetMTU(name string, mtu int) error {
	return f.update(name, func(l *Link) { l.MTU = mtu })
}

// SetUp changes whether the link called name is up. It fails, with an error
// wrapping ErrInvalid, when there is no such link.
func (f *FakeLister) SetUp(name string, up bool) error {
	return f.update(name, func(l *Link) { l.Up = up })
}

func (f *FakeLister) update(name string, fn func(*Link)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.links {
		if f.links[i].Name == name {
			fn(&f.links[i])
			return nil
		}
	}
	return invalidf(ErrInvalid, "fake lister: no link %q", name)
}

// SetError makes every later Links call fail with err, until it is called
// again with nil.
func (f *FakeLister) SetError(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// Calls reports how many times Links was called.
func (f *FakeLister) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

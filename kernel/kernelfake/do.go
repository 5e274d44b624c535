package kernelfake

import (
	"context"
	"fmt"

	"github.com/nodeplane/nodeplane/kernel"
)

// OpDo is Do, for Fail, Refuse and Calls.
const OpDo Op = "Do"

// ErrNoThread is what Do fails with (it wraps kernel.ErrNotSupported): a
// fake namespace has no thread on which work could run inside it.
var ErrNoThread = fmt.Errorf("kernelfake: no thread runs inside a fake namespace: %w", kernel.ErrNotSupported)

// Do implements kernel.Doer as a fake can: it never runs fn, which would
// run in the caller's namespace, and fails with ErrNoThread (or the
// failure injected for OpDo). Work that needs a thread inside the
// namespace (a userspace WireGuard device, a TCX attachment) takes its
// fakes from elsewhere in tests (wireguardfake's userspace provider); the
// kernel's WireGuard is the kernel.WireGuard capability here.
func (ns *Namespace) Do(fn func() error) error {
	unlock, err := ns.begin(context.Background(), OpDo)
	defer unlock()
	if err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("kernelfake: nil function: %w", kernel.ErrInvalid)
	}
	return ErrNoThread
}

var _ kernel.Doer = (*Namespace)(nil)

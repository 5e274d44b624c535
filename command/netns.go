package command

import (
	"context"
	"errors"
	"io"
)

// ErrNetNS reports a NetNS runner whose namespace descriptor is not open,
// or a platform without network namespaces.
var ErrNetNS = errors.New("command: cannot run in the network namespace")

// NetNS runs binaries as child processes inside another network namespace:
// each process is started from an OS thread that has entered the
// namespace, so iptables-restore, ipset or nft act on that namespace. The
// calling goroutine's thread never moves, and the process keeps the
// caller's mount namespace (unlike `ip netns exec`, /sys is not remounted).
//
// Drivers get one through kernel.Namespace.Runner, which also keeps the
// descriptor open while a process starts; SameNetNS tells whether two
// descriptors name the same namespace.
type NetNS struct {
	// FD is an open descriptor of the namespace: /run/netns/NAME,
	// /proc/PID/ns/net, or a netns.NsHandle. The caller owns it and keeps
	// it open while the runner is used.
	FD int
	// Env, when non-nil, replaces the child's environment.
	Env []string
}

// Run runs name with args inside the namespace, feeding it stdin, and
// returns its standard output. Failures are reported as for Local; a
// descriptor that is not open is an *Error wrapping ErrNetNS.
func (n NetNS) Run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	return run(ctx, n.Env, n.start, stdin, name, args)
}

//go:build !linux

package kernel

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"

	"github.com/nodeplane/nodeplane/command"
)

// errOS is the error of everything in this package off Linux.
var errOS = fmt.Errorf("%w: network namespaces are Linux-only (GOOS=%s)", ErrNotSupported, runtime.GOOS)

// Namespace is an open network namespace. Network namespaces are
// Linux-only: elsewhere no Namespace can be opened and every method fails
// with an error wrapping ErrNotSupported.
type Namespace struct{}

// Open fails with an error wrapping ErrNotSupported: network namespaces
// are Linux-only.
func Open(path string) (*Namespace, error) { return nil, errOS }

// OpenFD fails with an error wrapping ErrNotSupported.
func OpenFD(fd int) (*Namespace, error) { return nil, errOS }

// OpenCurrent fails with an error wrapping ErrNotSupported.
func OpenCurrent() (*Namespace, error) { return nil, errOS }

// Close does nothing.
func (ns *Namespace) Close() error { return nil }

// FD returns -1.
func (ns *Namespace) FD() int { return -1 }

// Do fails with ErrNotSupported.
func (ns *Namespace) Do(fn func() error) error { return errOS }

// OpenNFTablesSocket fails with ErrNotSupported.
func (ns *Namespace) OpenNFTablesSocket() (NFTablesSocket, error) { return nil, errOS }

// OpenNFTablesSocket fails with ErrNotSupported: nf_tables is Linux's.
func OpenNFTablesSocket() (NFTablesSocket, error) { return nil, errOS }

// Runner returns a runner that fails with ErrNotSupported.
func (ns *Namespace) Runner() command.Runner { return command.NetNS{FD: -1} }

// Links fails with ErrNotSupported.
func (ns *Namespace) Links(context.Context) ([]Link, error) { return nil, errOS }

// LinkByName fails with ErrNotSupported.
func (ns *Namespace) LinkByName(context.Context, string) (Link, error) { return Link{}, errOS }

// AddLink fails with ErrNotSupported.
func (ns *Namespace) AddLink(context.Context, Link) (Link, error) { return Link{}, errOS }

// DeleteLink fails with ErrNotSupported.
func (ns *Namespace) DeleteLink(context.Context, int) error { return errOS }

// SetLinkUp fails with ErrNotSupported.
func (ns *Namespace) SetLinkUp(context.Context, int, bool) error { return errOS }

// SetLinkMTU fails with ErrNotSupported.
func (ns *Namespace) SetLinkMTU(context.Context, int, int) error { return errOS }

// SetLinkMAC fails with ErrNotSupported.
func (ns *Namespace) SetLinkMAC(context.Context, int, net.HardwareAddr) error { return errOS }

// Addrs fails with ErrNotSupported.
func (ns *Namespace) Addrs(context.Context, Family) ([]Addr, error) { return nil, errOS }

// AddAddr fails with ErrNotSupported.
func (ns *Namespace) AddAddr(context.Context, Addr) error { return errOS }

// DeleteAddr fails with ErrNotSupported.
func (ns *Namespace) DeleteAddr(context.Context, Addr) error { return errOS }

// DumpRoutes fails with ErrNotSupported.
func (ns *Namespace) DumpRoutes(context.Context, Family, uint32, func(*Route) error, func()) error {
	return errOS
}

// DumpInterfaceRoutes fails with ErrNotSupported.
func (ns *Namespace) DumpInterfaceRoutes(context.Context, Family, uint32, int, func(*Route) error, func()) error {
	return errOS
}

// ApplyRoutes fails every op with ErrNotSupported.
func (ns *Namespace) ApplyRoutes(_ context.Context, ops []RouteOp) []error { return failAll(len(ops)) }

// Rules fails with ErrNotSupported.
func (ns *Namespace) Rules(context.Context, Family) ([]Rule, error) { return nil, errOS }

// AddRule fails with ErrNotSupported.
func (ns *Namespace) AddRule(context.Context, Rule) error { return errOS }

// DeleteRule fails with ErrNotSupported.
func (ns *Namespace) DeleteRule(context.Context, Rule) error { return errOS }

// Neighbors fails with ErrNotSupported.
func (ns *Namespace) Neighbors(context.Context, Family, int) ([]Neighbor, error) { return nil, errOS }

// ApplyNeighbors fails every op with ErrNotSupported.
func (ns *Namespace) ApplyNeighbors(_ context.Context, ops []NeighborOp) []error {
	return failAll(len(ops))
}

// FDB fails with ErrNotSupported.
func (ns *Namespace) FDB(context.Context, int) ([]FDBEntry, error) { return nil, errOS }

// ApplyFDB fails every op with ErrNotSupported.
func (ns *Namespace) ApplyFDB(_ context.Context, ops []FDBOp) []error { return failAll(len(ops)) }

// Sysctl fails with ErrNotSupported.
func (ns *Namespace) Sysctl(context.Context, string) (string, error) { return "", errOS }

// SetSysctl fails with ErrNotSupported.
func (ns *Namespace) SetSysctl(context.Context, string, string) error { return errOS }

// DeleteConntrack fails with ErrNotSupported.
func (ns *Namespace) DeleteConntrack(context.Context, Family, []netip.Addr) (int, error) {
	return 0, errOS
}

// Subscribe fails with ErrNotSupported.
func (ns *Namespace) Subscribe(context.Context, EventKinds, ...SubscribeOptions) (<-chan Event, error) {
	return nil, errOS
}

// WireGuardDevice fails with ErrNotSupported.
func (ns *Namespace) WireGuardDevice(context.Context, string) (WireGuardDevice, error) {
	return WireGuardDevice{}, errOS
}

// ConfigureWireGuard fails with ErrNotSupported.
func (ns *Namespace) ConfigureWireGuard(context.Context, string, WireGuardConfig) error { return errOS }

func failAll(n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = errOS
	}
	return errs
}

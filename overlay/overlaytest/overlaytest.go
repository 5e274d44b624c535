// Package overlaytest holds test helpers of the overlay (package overlay
// and its device drivers, vxlan and ipip): a kernel wrapper that counts and
// logs the writes a manager and its drivers make, so a test can prove that
// a restarted agent writes nothing and that a node moving between subnets
// costs one route replace; the fake host of their unit tests; one apply
// pass of a manager's stack, run until it converges on a fake clock; and
// the Subject of the driver conformance suite for an overlay of every
// encapsulation (Conformance, Stack).
package overlaytest

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/kernel"
)

// Counting wraps a kernel.Kernel and records every write: each operation
// of a batched write, each link and address change, each run of a binary
// that changes state (ipset restore, add, del, create, destroy, swap,
// flush). Reads pass through. It is safe for concurrent use.
type Counting struct {
	kernel.Kernel
	mu  sync.Mutex
	log []string
}

// Wrap returns a Counting around k.
func Wrap(k kernel.Kernel) *Counting { return &Counting{Kernel: k} }

func (c *Counting) note(s string) {
	c.mu.Lock()
	c.log = append(c.log, s)
	c.mu.Unlock()
}

// Writes returns the number of writes since the last Reset.
func (c *Counting) Writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.log)
}

// Log returns the writes since the last Reset, one line each, such as
// "replace route 10.244.2.0/24 via 10.244.2.250 dev 7 onlink".
func (c *Counting) Log() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

// Reset forgets the writes so far.
func (c *Counting) Reset() {
	c.mu.Lock()
	c.log = nil
	c.mu.Unlock()
}

// AddLink records and forwards.
func (c *Counting) AddLink(ctx context.Context, l kernel.Link) (kernel.Link, error) {
	c.note("add link " + l.Name)
	return c.Kernel.AddLink(ctx, l)
}

// DeleteLink records and forwards.
func (c *Counting) DeleteLink(ctx context.Context, index int) error {
	c.note(fmt.Sprintf("delete link %d", index))
	return c.Kernel.DeleteLink(ctx, index)
}

// SetLinkUp records and forwards.
func (c *Counting) SetLinkUp(ctx context.Context, index int, up bool) error {
	c.note(fmt.Sprintf("set link %d up %v", index, up))
	return c.Kernel.SetLinkUp(ctx, index, up)
}

// SetLinkMTU records and forwards.
func (c *Counting) SetLinkMTU(ctx context.Context, index, mtu int) error {
	c.note(fmt.Sprintf("set link %d mtu %d", index, mtu))
	return c.Kernel.SetLinkMTU(ctx, index, mtu)
}

// SetLinkMAC records and forwards.
func (c *Counting) SetLinkMAC(ctx context.Context, index int, mac net.HardwareAddr) error {
	c.note(fmt.Sprintf("set link %d mac %s", index, mac))
	return c.Kernel.SetLinkMAC(ctx, index, mac)
}

// AddAddr records and forwards.
func (c *Counting) AddAddr(ctx context.Context, a kernel.Addr) error {
	c.note(fmt.Sprintf("add addr %s dev %d", a.Prefix, a.LinkIndex))
	return c.Kernel.AddAddr(ctx, a)
}

// DeleteAddr records and forwards.
func (c *Counting) DeleteAddr(ctx context.Context, a kernel.Addr) error {
	c.note(fmt.Sprintf("delete addr %s dev %d", a.Prefix, a.LinkIndex))
	return c.Kernel.DeleteAddr(ctx, a)
}

// ApplyRoutes records each operation and forwards.
func (c *Counting) ApplyRoutes(ctx context.Context, ops []kernel.RouteOp) []error {
	for _, op := range ops {
		c.note(describeRoute(op))
	}
	return c.Kernel.ApplyRoutes(ctx, ops)
}

func describeRoute(op kernel.RouteOp) string {
	r := op.Route
	s := fmt.Sprintf("%s route %s", op.Kind, r.Dst)
	if r.Type == kernel.RTNBlackhole {
		s = fmt.Sprintf("%s route blackhole %s", op.Kind, r.Dst)
	}
	if r.Gateway.IsValid() {
		s += " via " + r.Gateway.String()
	}
	if r.OIF > 0 {
		s += fmt.Sprintf(" dev %d", r.OIF)
	}
	if r.Flags&kernel.FlagOnlink != 0 {
		s += " onlink"
	}
	return s
}

// ApplyNeighbors records each operation and forwards.
func (c *Counting) ApplyNeighbors(ctx context.Context, ops []kernel.NeighborOp) []error {
	for _, op := range ops {
		c.note(fmt.Sprintf("%s neigh %s dev %d", op.Kind, op.Neighbor.IP, op.Neighbor.LinkIndex))
	}
	return c.Kernel.ApplyNeighbors(ctx, ops)
}

// ApplyFDB records each operation and forwards.
func (c *Counting) ApplyFDB(ctx context.Context, ops []kernel.FDBOp) []error {
	for _, op := range ops {
		c.note(fmt.Sprintf("%s fdb %s dst %s dev %d", op.Kind, op.Entry.MAC, op.Entry.Dst, op.Entry.LinkIndex))
	}
	return c.Kernel.ApplyFDB(ctx, ops)
}

// SetSysctl records and forwards.
func (c *Counting) SetSysctl(ctx context.Context, key, value string) error {
	c.note("sysctl " + key + "=" + value)
	return c.Kernel.SetSysctl(ctx, key, value)
}

// Runner returns the wrapped runner, recording the runs that write.
func (c *Counting) Runner() command.Runner {
	r := c.Kernel.Runner()
	return command.RunnerFunc(func(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
		if writes(args) {
			c.note("run " + name + " " + strings.Join(args, " "))
		}
		return r.Run(ctx, stdin, name, args...)
	})
}

// writes reports whether an ipset (or iptables) invocation changes state.
func writes(args []string) bool {
	for _, a := range args {
		switch a {
		case "restore", "add", "del", "create", "destroy", "swap", "flush", "-A", "-D", "-I":
			return true
		}
	}
	return false
}

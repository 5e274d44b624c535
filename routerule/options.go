//go:build linux

package routerule

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/clock"
)

// DefaultRefreshInterval is how often, by default, Apply re-reads the
// kernel's rules to repair drift (rules deleted by systemd-networkd or by
// hand).
const DefaultRefreshInterval = 90 * time.Second

// Netlink is the part of *netlink.Handle that Rules uses. Pass a handle
// bound to the target namespace (netlink.NewHandleAt), or a fake such as
// routerulefake.Kernel in tests.
type Netlink interface {
	// RuleList dumps the rules of a family; it may return
	// netlink.ErrDumpInterrupted, and Rules then lists again.
	RuleList(family int) ([]netlink.Rule, error)
	// RuleAdd adds a rule (NLM_F_CREATE|NLM_F_EXCL).
	RuleAdd(rule *netlink.Rule) error
	// RuleDel deletes the first rule that matches.
	RuleDel(rule *netlink.Rule) error
}

// Options configure a Rules instance. Family, Handle and Priorities are
// required.
type Options struct {
	// Family is IPv4 or IPv6: one instance per family.
	Family Family
	// Handle reaches the kernel: a *netlink.Handle bound to the target
	// namespace, or a fake. It is required; a nil handle, or a zero
	// netlink.Handle (which would silently use the calling thread's
	// namespace), is refused.
	Handle Netlink
	// Priorities are the rule priorities this instance owns. At least one
	// is required. See the package documentation for what owning means.
	Priorities []uint32
	// Tables are the route tables that lookup rules at the owned
	// priorities must target to be ours. Table 0 is refused; TableMain and
	// the other well-known tables are allowed. May be empty when every
	// rule is a goto or a blackhole.
	Tables []uint32
	// RefreshInterval is how often Apply re-reads the kernel even when
	// nothing changed: zero means DefaultRefreshInterval, a negative value
	// turns the periodic refresh off (QueueResync still works).
	RefreshInterval time.Duration
	// Logger receives debug logs of every write and info logs of repaired
	// drift; nil discards them.
	Logger *slog.Logger
	// Clock drives the refresh; nil is the real clock.
	Clock clock.Clock
	// Name is returned by Name, for the loop's logs; empty means
	// "routerule-v4" or "routerule-v6".
	Name string
}

// options is the validated form of Options.
type options struct {
	family     Family
	nlFamily   int
	handle     Netlink
	priorities map[uint32]struct{}
	tables     map[uint32]struct{}
	refresh    time.Duration
	log        *slog.Logger
	clk        clock.Clock
	name       string
}

func optionsError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
}

func (o Options) validate() (options, error) {
	v := options{family: o.Family, refresh: o.RefreshInterval, name: o.Name}
	switch o.Family {
	case IPv4:
		v.nlFamily = netlink.FAMILY_V4
	case IPv6:
		v.nlFamily = netlink.FAMILY_V6
	default:
		return options{}, optionsError("family must be IPv4 or IPv6, got %v", o.Family)
	}
	switch h := o.Handle.(type) {
	case nil:
		return options{}, optionsError("Handle is required (a netlink handle bound to the target namespace)")
	case *netlink.Handle:
		if h == nil {
			return options{}, optionsError("Handle is a nil *netlink.Handle")
		}
		if !h.SupportsNetlinkFamily(unix.NETLINK_ROUTE) {
			return options{}, optionsError("Handle has no NETLINK_ROUTE socket (a zero netlink.Handle would use the calling thread's namespace); create it with netlink.NewHandleAt")
		}
	}
	v.handle = o.Handle
	if len(o.Priorities) == 0 {
		return options{}, optionsError("at least one owned priority is required")
	}
	v.priorities = make(map[uint32]struct{}, len(o.Priorities))
	for _, p := range o.Priorities {
		if uint64(p) > math.MaxInt {
			return options{}, optionsError("priority %d does not fit the netlink library's int on this platform", p)
		}
		v.priorities[p] = struct{}{}
	}
	v.tables = make(map[uint32]struct{}, len(o.Tables))
	for _, t := range o.Tables {
		if t == 0 {
			return options{}, optionsError("table 0 is not a route table")
		}
		if uint64(t) > math.MaxInt {
			return options{}, optionsError("table %d does not fit the netlink library's int on this platform", t)
		}
		v.tables[t] = struct{}{}
	}
	if v.refresh == 0 {
		v.refresh = DefaultRefreshInterval
	}
	v.log = o.Logger
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	v.clk = clock.OrReal(o.Clock)
	if v.name == "" {
		v.name = "routerule-v" + map[Family]string{IPv4: "4", IPv6: "6"}[o.Family]
	}
	return v, nil
}

// sortedKeys returns a set's members in increasing order, for logs.
func sortedKeys(m map[uint32]struct{}) []uint32 {
	out := make([]uint32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

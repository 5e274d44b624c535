package routetable

import (
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/kernel"
)

// DefaultProtocol is the route protocol a Table writes when Options.Protocol
// is 0: 0x4e, 'N' for nodeplane. iproute2 shows it as "proto 78". It is
// not in the kernel's or iproute2's list of assigned protocols (Calico uses
// 80, BIRD 12, static 4, boot 3), so a route carrying it is nodeplane's.
const DefaultProtocol uint8 = 0x4e

// DefaultGracePeriod is how long an unwanted route on one of our
// interfaces is left in place before it is deleted, when
// Options.GracePeriod is 0.
const DefaultGracePeriod = 10 * time.Second

// Options configure a Table.
type Options struct {
	// Kernel is the namespace the Table reads and writes: a
	// *kernel.Namespace (kernel.Open of the target namespace), or a
	// kernelfake.Namespace in tests. Required.
	Kernel Kernel
	// Family is IPv4 or IPv6: one Table per family. Required.
	Family Family
	// Table is the kernel routing table: kernel.TableMain (254) or a
	// table of the agent's own. Required: 0 is refused (the kernel would
	// take it for the main table). An Ownership that owns routes the
	// kernel or the system put there (ExclusivePolicy) is refused for the
	// reserved tables kernel.TableDefault, kernel.TableMain and
	// kernel.TableLocal (253 to 255), whose default, connected and local
	// routes the host needs.
	Table uint32
	// Protocol is the route protocol written on every route and static
	// neighbour entry and, with the default policy, the mark of ownership;
	// 0 means DefaultProtocol. kernel.ProtoKernel (RTPROT_KERNEL, 2) is
	// refused.
	Protocol uint8
	// InterfacePatterns are regular expressions (such as `^np-`): with
	// the default policy, routes on interfaces whose names match are ours
	// whatever their protocol, and get the grace period.
	InterfacePatterns []string
	// Ownership replaces the default policy (Protocol plus
	// InterfacePatterns). ExclusivePolicy owns a whole dedicated table.
	Ownership OwnershipPolicy
	// GracePeriod is how long an unwanted route on an interface with a
	// grace period is left before it is deleted; 0 means
	// DefaultGracePeriod, negative means none. The grace period ends early
	// once the interface has desired routes.
	GracePeriod time.Duration
	// NoConntrackCleanup turns off the deletion of conntrack entries of
	// addresses whose route moves or disappears (for a table that is an
	// overlay on top of the main routes).
	NoConntrackCleanup bool
	// BatchSize is the most route operations handed to Kernel.ApplyRoutes
	// at once; 0 means 1024.
	BatchSize int
	// Logger receives debug and warning logs; nil discards them.
	Logger *slog.Logger
	// Clock is the time source of the grace period and of the backoff of
	// failed writes; nil means clock.Real().
	Clock clock.Clock
}

const defaultBatchSize = 1024

func (o Options) withDefaults() (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		return o, fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	if isNil(o.Kernel) {
		return bad("Kernel is required (kernel.Open of the target namespace, or a kernelfake.Namespace)")
	}
	if !o.Family.Valid() {
		return bad("Family must be IPv4 or IPv6, not %v", o.Family)
	}
	if o.Table == 0 {
		return bad("Table is required (kernel.TableMain, or a table of the agent's own): table 0 is not a table")
	}
	if o.Protocol == 0 {
		o.Protocol = DefaultProtocol
	}
	if o.Protocol == kernel.ProtoKernel {
		return bad("protocol %d is the kernel's own (RTPROT_KERNEL)", o.Protocol)
	}
	if o.Ownership == nil {
		p, err := NewDefaultPolicy(o.Protocol, o.InterfacePatterns)
		if err != nil {
			return o, err
		}
		o.Ownership = p
	} else if len(o.InterfacePatterns) > 0 {
		return bad("InterfacePatterns only apply to the default policy; give them to your Ownership instead")
	}
	if o.Table >= kernel.TableDefault && o.Table <= kernel.TableLocal && ownsSystemRoutes(o.Ownership) {
		return bad("the policy owns routes the kernel and the system put in table %d (a reserved table): "+
			"it would delete the host's default, connected or local routes; give the Table a table of its own", o.Table)
	}
	switch {
	case o.GracePeriod == 0:
		o.GracePeriod = DefaultGracePeriod
	case o.GracePeriod < 0:
		o.GracePeriod = 0
	}
	if o.BatchSize < 0 {
		return bad("negative BatchSize %d", o.BatchSize)
	}
	if o.BatchSize == 0 {
		o.BatchSize = defaultBatchSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Clock = clock.OrReal(o.Clock)
	return o, nil
}

// isNil reports whether k is nil or a nil pointer in an interface.
func isNil(k any) bool {
	if k == nil {
		return true
	}
	v := reflect.ValueOf(k)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

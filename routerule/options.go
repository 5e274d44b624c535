package routerule

import (
	"fmt"
	"log/slog"
	"reflect"
	"slices"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/kernel"
)

// Options configure a Rules instance. Family, Kernel and Priorities are
// required.
type Options struct {
	// Family is IPv4 or IPv6: one instance per family.
	Family Family
	// Kernel reaches the namespace's rules: a *kernel.Namespace opened on
	// the target namespace (kernel.Open, kernel.OpenCurrent), or a
	// kernelfake.Namespace in tests. It is required.
	Kernel kernel.Rules
	// Priorities are the rule priorities this instance owns. At least one
	// is required, and 0 is refused (a rule is never written at priority
	// 0: the kernel would choose one). See the package documentation for
	// what owning means.
	Priorities []uint32
	// Tables are the route tables that lookup rules at the owned
	// priorities must target to be ours. Table 0 is refused;
	// kernel.TableMain and the other reserved tables are allowed. May be
	// empty when every rule is a goto or a blackhole.
	Tables []uint32
	// Logger receives debug logs of every write and info logs of repaired
	// drift; nil discards them.
	Logger *slog.Logger
	// Clock times the backoff of refused writes; nil is the real clock.
	Clock clock.Clock
	// Name is returned by Name, for the loop's logs; empty means
	// "routerule-v4" or "routerule-v6".
	Name string
}

// options is the validated form of Options.
type options struct {
	family     Family
	kernel     kernel.Rules
	priorities map[uint32]struct{}
	tables     map[uint32]struct{}
	log        *slog.Logger
	clk        clock.Clock
	name       string
}

func optionsError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
}

// isNil reports whether k is nil or a nil pointer in an interface.
func isNil(k any) bool {
	if k == nil {
		return true
	}
	v := reflect.ValueOf(k)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func (o Options) validate() (options, error) {
	v := options{family: o.Family, name: o.Name}
	if !o.Family.Valid() {
		return options{}, optionsError("family must be IPv4 or IPv6, got %v", o.Family)
	}
	if isNil(o.Kernel) {
		return options{}, optionsError("Kernel is required (kernel.Open of the target namespace, or a kernelfake.Namespace)")
	}
	v.kernel = o.Kernel
	if len(o.Priorities) == 0 {
		return options{}, optionsError("at least one owned priority is required")
	}
	v.priorities = make(map[uint32]struct{}, len(o.Priorities))
	for _, p := range o.Priorities {
		if p == 0 {
			return options{}, optionsError("priority 0 cannot be owned: a rule written without a priority gets one the kernel chooses")
		}
		v.priorities[p] = struct{}{}
	}
	v.tables = make(map[uint32]struct{}, len(o.Tables))
	for _, t := range o.Tables {
		if t == 0 {
			return options{}, optionsError("table 0 is not a route table")
		}
		v.tables[t] = struct{}{}
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

package managerutil

import (
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Check validates a manager's Options one field after another and keeps
// the first problem, as an error wrapping Sentinel (the package's
// ErrInvalidOptions): once a check has failed, the later ones do nothing,
// so a check may rely on the fields checked before it. The zero Check
// with Sentinel set has found no problem.
//
//	c := managerutil.Check{Sentinel: ErrInvalidOptions}
//	c.Family(opts.Family)
//	c.Driver("Table", opts.Table, opts.Family)
//	c.Chain("Chain", opts.Chain)
//	if err := c.Err(); err != nil {
//		return nil, err
//	}
type Check struct {
	// Sentinel is what every problem's error wraps and starts with.
	Sentinel error

	err error
}

// Err returns the first problem found, or nil.
func (c *Check) Err() error { return c.err }

// Refuse records the problem described by format and args when bad is
// true: "<Sentinel>: <problem>".
func (c *Check) Refuse(bad bool, format string, args ...any) {
	if c.err == nil && bad {
		c.err = Invalid(c.Sentinel, format, args...)
	}
}

// Family refuses an IP family that is neither IPv4 nor IPv6.
func (c *Check) Family(f ipfamily.Family) {
	c.Refuse(!f.Valid(), "invalid Family %v", f)
}

// Required refuses a nil v, or a nil pointer in it: "<field> is
// required".
func (c *Check) Required(field string, v any) {
	c.Refuse(IsNil(v), "%s is required", field)
}

// Familied is a driver of one IP family, such as a netfilter.Sets or a
// routetable.Table.
type Familied interface {
	// Family returns the driver's IP family.
	Family() ipfamily.Family
}

// Driver refuses a driver that is missing (Required) or of another family
// than f.
func (c *Check) Driver(field string, d Familied, f ipfamily.Family) {
	c.Required(field, d)
	if c.err == nil && d.Family() != f {
		c.Refuse(true, "%s is of family %v, not %v", field, d.Family(), f)
	}
}

// Quote records err, when it is not nil, quoted under field:
// "<Sentinel>: <field>: <err without its package prefix>", matching
// Sentinel and err's sentinels. It takes the error of another package's
// check of the field, such as netfilter.JumpPlacement.Validate.
func (c *Check) Quote(field string, err error) {
	if c.err == nil && err != nil {
		c.err = Quote(c.Sentinel, err, field)
	}
}

// Chain refuses a chain name the rule model refuses
// (netfilter.ValidateChainName), quoting its error under field.
func (c *Check) Chain(field, name string) {
	c.Quote(field, netfilter.ValidateChainName(name))
}

// Rules refuses rules the rule model refuses for family f
// (netfilter.Rule.Validate), quoting the first error under field.
func (c *Check) Rules(field string, f ipfamily.Family, rules ...netfilter.Rule) {
	for _, r := range rules {
		if c.err != nil {
			return
		}
		c.Quote(field, r.Validate(f))
	}
}

// KernelNamer names sets in the kernel, as netfilter.Sets does.
type KernelNamer interface {
	// KernelName returns the kernel's name of the set name, or why the
	// name is refused.
	KernelName(name string) (string, error)
}

// KernelName returns the kernel name of the set name, or refuses name,
// quoting the set driver's error under field, and returns "".
func (c *Check) KernelName(field string, sets KernelNamer, name string) string {
	if c.err != nil {
		return ""
	}
	kname, err := sets.KernelName(name)
	if err != nil {
		c.Quote(field, err)
		return ""
	}
	return kname
}

package ifname

import "fmt"

// MaxLen is the longest interface name the kernel accepts (IFNAMSIZ - 1
// bytes).
const MaxLen = 15

// Valid reports whether the kernel would accept name for an interface, as
// its dev_valid_name does: 1 to MaxLen bytes, not "." or "..", without '/',
// ':', NUL or white space. The error says what is wrong and names the
// interface; like Compile's, it wraps no sentinel, so callers add their
// own with fmt.Errorf("%w: %w", sentinel, err).
func Valid(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty interface name")
	case len(name) > MaxLen:
		return fmt.Errorf("interface name %q is longer than %d bytes", name, MaxLen)
	case name == "." || name == "..":
		return fmt.Errorf("interface name %q is not a valid name", name)
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case '/', ':', 0, ' ', '\t', '\n', '\v', '\f', '\r':
			return fmt.Errorf("interface name %q contains %q", name, c)
		}
	}
	return nil
}

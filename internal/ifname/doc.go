// Package ifname compiles interface-name patterns and matches names against
// them, for the packages that let their callers choose interfaces by regular
// expression (ifacemonitor, mtu, routetable), and holds the one check of an
// interface name against the kernel's rules (Valid).
//
// Compile turns a list of patterns into regular expressions, with an error
// that names the option and the bad pattern; callers wrap it with their own
// sentinel errors. MatchAny reports whether any expression matches a name.
// Filter combines an include list and an exclude list: a name passes when
// it matches an include pattern (or there are none) and no exclude
// pattern.
//
// Patterns are Go regular expressions (package regexp) and are not
// anchored: "eth" matches "veth0"; use "^eth" to match a prefix. The
// package does no I/O and its values are safe for concurrent use once
// built.
package ifname

package sysctls

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// Setting is one sysctl the Driver keeps at an acceptable value.
type Setting struct {
	// Key names the sysctl, dotted ("net.ipv4.ip_forward") or slashed
	// ("net/ipv4/conf/eth0.100/rp_filter", needed when a component
	// contains a dot), as package kernel reads keys. Keys under net are
	// the namespace's (Options.Kernel); any other key is machine-wide
	// (Options.Host).
	Key string
	// Value is written when the current value is not acceptable. Values
	// compare as the kernel parses them: fields split by blanks, each the
	// same text or the same decimal integer ("20000 30000" is the
	// "20000\t30000" the kernel prints, "01" is "1").
	Value string
	// Accept lists other values that are acceptable as they are and are
	// left alone (Value always is).
	Accept []string
	// Required makes a failure to apply the setting fail the Driver's
	// Apply as a whole, so the loop reports the Driver failed, backs it
	// off and resyncs it. A setting that is not required fails on its own
	// (a *dataplane.PartialError) and is retried on its own backoff.
	Required bool
	// Why says, in a few words, what the setting is for; it is quoted in
	// logs.
	Why string
}

// acceptable reports whether v, as read, needs no write: it is Value or
// one of Accept in the form the kernel prints (sameValue).
func (s Setting) acceptable(v string) bool {
	return sameValue(v, s.Value) || slices.ContainsFunc(s.Accept, func(a string) bool { return sameValue(v, a) })
}

// sameValue reports whether the sysctl values a and b are the same once
// the kernel has parsed them: fields separated by any run of blanks (it
// prints "20000\t30000" for "20000 30000"), each the same text or the same
// decimal integer ("01" is read back "1").
func sameValue(a, b string) bool {
	if a == b {
		return true
	}
	fa, fb := strings.Fields(a), strings.Fields(b)
	if len(fa) != len(fb) || len(fa) == 0 {
		return false
	}
	for i := range fa {
		if fa[i] == fb[i] {
			continue
		}
		x, errA := strconv.ParseInt(fa[i], 10, 64)
		y, errB := strconv.ParseInt(fb[i], 10, 64)
		if errA != nil || errB != nil || x != y {
			return false
		}
	}
	return true
}

// namespaced reports whether the key is under net, whose entries are per
// network namespace.
func (s Setting) namespaced() bool {
	first, _, _ := strings.Cut(s.Key, sep(s.Key))
	return first == "net"
}

func sep(key string) string {
	if strings.Contains(key, "/") {
		return "/"
	}
	return "."
}

// path returns the key's path under /proc/sys, or an error for a malformed
// key: empty, absolute, with a NUL byte, or with an empty, "." or ".."
// component.
func path(key string) (string, error) {
	if key == "" || strings.HasPrefix(key, "/") || strings.ContainsRune(key, 0) {
		return "", fmt.Errorf("sysctl key %q: empty, absolute or with a NUL byte", key)
	}
	parts := strings.Split(key, sep(key))
	if len(parts) < 2 {
		return "", fmt.Errorf("sysctl key %q has a single component", key)
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return "", fmt.Errorf("sysctl key %q has an empty or relative component", key)
		}
	}
	return strings.Join(parts, "/"), nil
}

// Defaults returns the settings a node agent's start-of-day configuration
// needs, for the families given (both when none is):
//
//   - net.ipv4.ip_forward = 1 and net.ipv6.conf.all.forwarding = 1, so the
//     node routes pod traffic (required). Turning IPv6 forwarding on makes
//     the kernel ignore router advertisements on interfaces whose accept_ra
//     is 1: a host that takes its IPv6 default route from them needs
//     accept_ra = 2 on that interface.
//   - net.ipv4.conf.all.rp_filter: 0 (off) and 2 (loose) are left alone;
//     1 (strict) becomes 2. The kernel applies the larger of the
//     interface's value and all's, so a strict all would drop traffic that
//     comes back by another path than it left (overlays, several uplinks);
//     with all at 0 the interfaces' own values decide (the endpoints
//     manager makes workload interfaces strict).
//   - kernel.unprivileged_bpf_disabled: 1 and 2 (off) are left alone; 0
//     (unprivileged BPF allowed) becomes 2, off but still changeable by a
//     privileged user (1 could only be undone by a reboot). It is
//     machine-wide, not per namespace, so it needs Options.Host.
func Defaults(families ...ipfamily.Family) []Setting {
	if len(families) == 0 {
		families = ipfamily.All[:]
	}
	var out []Setting
	for _, f := range families {
		switch f {
		case ipfamily.IPv4:
			out = append(out,
				Setting{Key: "net.ipv4.ip_forward", Value: "1", Required: true, Why: "route pod traffic (IPv4)"},
				Setting{Key: "net.ipv4.conf.all.rp_filter", Value: "2", Accept: []string{"0"}, Why: "no strict reverse-path filter for every interface"},
			)
		case ipfamily.IPv6:
			out = append(out, Setting{Key: "net.ipv6.conf.all.forwarding", Value: "1", Required: true, Why: "route pod traffic (IPv6)"})
		}
	}
	return append(out, Setting{Key: "kernel.unprivileged_bpf_disabled", Value: "2", Accept: []string{"1"}, Why: "no BPF for unprivileged users"})
}

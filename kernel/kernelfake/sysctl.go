package kernelfake

import (
	"bufio"
	"context"
	_ "embed"
	"maps"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/kernel"
)

//go:embed sysctl_defaults.txt
var sysctlDefaults string

// freshSysctls returns the sysctls of a fresh namespace, keyed by path
// ("net/ipv4/ip_forward"), and the leaves of each per-interface directory
// (those lo has); parsed once.
var freshSysctls = sync.OnceValues(func() (map[string]string, map[string][]string) {
	values, leaves := map[string]string{}, map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(sysctlDefaults))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		key, value, _ := strings.Cut(line, " = ")
		path := strings.ReplaceAll(key, ".", "/")
		values[path] = strings.TrimSuffix(value, " ")
		for _, dir := range linkDirs {
			if leaf, ok := strings.CutPrefix(path, dir+"/lo/"); ok {
				leaves[dir] = append(leaves[dir], leaf)
			}
		}
	}
	return values, leaves
})

// defaultSysctls returns a copy of the sysctls of a fresh namespace.
func defaultSysctls() map[string]string {
	values, _ := freshSysctls()
	return maps.Clone(values)
}

// Per-interface sysctl directories.
var linkDirs = []string{"net/ipv4/conf", "net/ipv6/conf", "net/ipv4/neigh", "net/ipv6/neigh"}

// linkKey returns the key of leaf in dir for the interface name.
func linkKey(dir, name, leaf string) string { return dir + "/" + name + "/" + leaf }

// addLinkSysctls creates l's per-interface sysctls: conf from the
// family's "default" entries as they are now, neigh as lo's are in a
// fresh namespace, and IPv6's mtu from the link's. lo's own are in the
// defaults.
func (s *state) addLinkSysctls(l *link) {
	if _, ok := s.sysctls[linkKey("net/ipv4/conf", l.Name, "forwarding")]; ok {
		return
	}
	fresh, leaves := freshSysctls()
	for _, dir := range linkDirs {
		from, src := linkKey(dir, "default", ""), s.sysctls
		if strings.HasSuffix(dir, "neigh") {
			from, src = linkKey(dir, "lo", ""), fresh
		}
		for _, leaf := range leaves[dir] {
			if v, ok := src[from+leaf]; ok {
				s.sysctls[linkKey(dir, l.Name, leaf)] = v
			}
		}
	}
	s.setLinkSysctl(l, "net/ipv6/conf", "mtu", itoa(l.MTU))
}

// removeLinkSysctls removes l's per-interface sysctls.
func (s *state) removeLinkSysctls(l *link) {
	_, leaves := freshSysctls()
	for _, dir := range linkDirs {
		for _, leaf := range leaves[dir] {
			delete(s.sysctls, linkKey(dir, l.Name, leaf))
		}
	}
}

// setLinkSysctl sets one of l's sysctls if it exists.
func (s *state) setLinkSysctl(l *link, dir, leaf, value string) {
	k := linkKey(dir, l.Name, leaf)
	if _, ok := s.sysctls[k]; ok {
		s.sysctls[k] = value
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// intSysctl returns the integer value of the sysctl at path, 0 if it is
// missing or not an integer.
func (s *state) intSysctl(path string) int {
	n, _ := strconv.Atoi(s.sysctls[path])
	return n
}

// Sysctl implements kernel.Sysctls. The namespace holds the net.*
// sysctls of a fresh namespace (this project's machines' values) and the
// per-interface ones of its links; any other key wraps kernel.ErrNotFound
// and ENOENT.
func (ns *Namespace) Sysctl(ctx context.Context, key string) (string, error) {
	unlock, err := ns.begin(ctx, OpSysctl)
	defer unlock()
	if err != nil {
		return "", err
	}
	path, err := kernel.SysctlPath(key)
	if err != nil {
		return "", err
	}
	v, ok := ns.s.sysctls[path]
	if !ok {
		return "", errnof(syscall.ENOENT, "sysctl %q", key)
	}
	return v, nil
}

// SetSysctl implements kernel.Sysctls. An integer sysctl takes an integer
// (surrounding white space allowed; anything else is EINVAL) and stores
// it as the kernel prints it. Turning IPv4 forwarding on or off
// (net.ipv4.ip_forward or net.ipv4.conf.all.forwarding) sets it on every
// interface and on default, and all.accept_redirects to the opposite, as
// the kernel does; net.ipv6.conf.all.forwarding likewise sets every
// interface's and default's. IPv6 forwarding on an interface gives its
// addresses' subnet-router anycast addresses local anycast routes.
func (ns *Namespace) SetSysctl(ctx context.Context, key, value string) error {
	unlock, err := ns.begin(ctx, OpSetSysctl)
	defer unlock()
	if err != nil {
		return err
	}
	path, err := kernel.SysctlPath(key)
	if err != nil {
		return err
	}
	if err := ns.refused(OpSetSysctl, Sysctl{Key: key, Value: value}); err != nil {
		return err
	}
	s := ns.s
	old, ok := s.sysctls[path]
	if !ok {
		return errnof(syscall.ENOENT, "sysctl %q", key)
	}
	stored, err := canonical(old, value)
	if err != nil {
		return errs.Also(errnof(syscall.EINVAL, "sysctl %q: value %q", key, value), kernel.ErrInvalid)
	}
	value = stored
	s.sysctls[path] = value
	switch path {
	case "net/ipv4/ip_forward", "net/ipv4/conf/all/forwarding":
		s.setEverywhere("net/ipv4/conf", "forwarding", value)
		s.sysctls["net/ipv4/ip_forward"] = value
		redirects := "1"
		if value != "0" {
			redirects = "0"
		}
		s.sysctls["net/ipv4/conf/all/accept_redirects"] = redirects
	case "net/ipv6/conf/all/forwarding":
		s.setEverywhere("net/ipv6/conf", "forwarding", value)
	}
	if strings.HasPrefix(path, "net/ipv6/conf/") && strings.HasSuffix(path, "/forwarding") {
		for _, l := range s.sortedLinks() {
			s.syncAnycast(l)
		}
	}
	return nil
}

// setEverywhere sets leaf in dir for all, default and every interface.
func (s *state) setEverywhere(dir, leaf, value string) {
	for _, name := range []string{"all", "default"} {
		s.sysctls[linkKey(dir, name, leaf)] = value
	}
	for _, l := range s.links {
		s.setLinkSysctl(l, dir, leaf, value)
	}
}

// canonical returns value as the kernel stores it for a sysctl whose
// present value is old: integers (one or several, as in
// ip_local_port_range) must stay integers.
func canonical(old, value string) (string, error) {
	oldFields := strings.Fields(old)
	if len(oldFields) == 0 {
		return strings.TrimSuffix(value, "\n"), nil
	}
	for _, f := range oldFields {
		if _, err := strconv.Atoi(f); err != nil {
			return strings.TrimSuffix(value, "\n"), nil
		}
	}
	fields := strings.Fields(value)
	if len(fields) == 0 || len(fields) > len(oldFields) {
		return "", syscall.EINVAL
	}
	for i, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil {
			return "", syscall.EINVAL
		}
		fields[i] = strconv.Itoa(n)
	}
	return strings.Join(fields, "\t"), nil
}

var _ kernel.Sysctls = (*Namespace)(nil)

package sysctls_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/sysctls"
)

// The Driver on a loop: the first pass checks every setting and reports
// what it changed and what it could not. The namespace here is
// kernelfake's, whose ip_forward is 0 as in a fresh namespace; without a
// Host, the machine-wide key is reported, not touched.
func Example() {
	ns := kernelfake.New(kernelfake.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := sysctls.New(sysctls.Options{
		Kernel:   ns,
		Settings: sysctls.Defaults(ipfamily.IPv4),
		OnReport: func(r sysctls.Report) { fmt.Println(r) },
	})
	if err != nil {
		panic(err)
	}
	loop, _ := dataplane.New(dataplane.Options{OnInSync: cancel}) // stop after the first pass
	_ = loop.AddDriver(m)
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	_ = loop.Run(ctx)
	// Output:
	// net.ipv4.ip_forward: changed 0 -> 1
	// net.ipv4.conf.all.rp_filter: kept 0
	// kernel.unprivileged_bpf_disabled: failed: no access to machine-wide sysctls
}

// Check runs a check at once, without a loop, as at an agent's start.
// ReadOnly makes it a dry run.
func ExampleDriver_Check() {
	ns := kernelfake.New(kernelfake.Options{})
	m, _ := sysctls.New(sysctls.Options{
		Kernel:   sysctls.ReadOnly(ns),
		Settings: []sysctls.Setting{{Key: "net.ipv6.conf.all.forwarding", Value: "1", Required: true}},
	})
	rep := m.Check(context.Background())
	fmt.Println(rep)
	fmt.Println(rep.Err() != nil)
	// Output:
	// net.ipv6.conf.all.forwarding: failed: read-only: not written: net.ipv6.conf.all.forwarding = 1
	// true
}

// Defaults lists the start-of-day settings.
func ExampleDefaults() {
	for _, s := range sysctls.Defaults() {
		fmt.Println(s.Key, s.Value, s.Accept, s.Required)
	}
	// Output:
	// net.ipv4.ip_forward 1 [] true
	// net.ipv4.conf.all.rp_filter 2 [0] false
	// net.ipv6.conf.all.forwarding 1 [] true
	// kernel.unprivileged_bpf_disabled 2 [1] false
}

// ProcSys reaches machine-wide keys through files; Root points it at a
// directory of its own (here a stand-in, as in tests).
func ExampleProcSys() {
	root, _ := os.MkdirTemp("", "procsys")
	defer os.RemoveAll(root)
	_ = os.MkdirAll(filepath.Join(root, "kernel"), 0o755)
	_ = os.WriteFile(filepath.Join(root, "kernel", "unprivileged_bpf_disabled"), []byte("0\n"), 0o644)
	p := sysctls.ProcSys{Root: root}
	_ = p.SetSysctl(context.Background(), "kernel.unprivileged_bpf_disabled", "2")
	v, _ := p.Sysctl(context.Background(), "kernel.unprivileged_bpf_disabled")
	fmt.Println(v)
	_, err := p.Sysctl(context.Background(), "net.ipv4.ip_forward")
	fmt.Println(err)
	// Output:
	// 2
	// sysctls: "net.ipv4.ip_forward" is per network namespace: use a kernel.Namespace
}

// ReadOnly lets reads through and refuses writes.
func ExampleReadOnly() {
	ns := kernelfake.New(kernelfake.Options{})
	ro := sysctls.ReadOnly(ns)
	v, _ := ro.Sysctl(context.Background(), "net.ipv4.ip_forward")
	fmt.Println(v, ro.SetSysctl(context.Background(), "net.ipv4.ip_forward", "1"))
	// Output:
	// 0 sysctls: read-only: not written: net.ipv4.ip_forward = 1
}

// New refuses a malformed setting.
func ExampleNew() {
	_, err := sysctls.New(sysctls.Options{Kernel: kernelfake.New(kernelfake.Options{}),
		Settings: []sysctls.Setting{{Key: "net/../kernel/x", Value: "1"}}})
	fmt.Println(err)
	// Output:
	// sysctls: invalid options: Settings[0]: sysctl key "net/../kernel/x" has an empty or relative component
}

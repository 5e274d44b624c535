package proxy_test

import (
	"errors"
	"fmt"

	"github.com/nodeplane/nodeplane/bpf/proxy"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

// Maglev tables for the connections from outside the node: every node of
// the cluster runs the same TableSize, so that a client reaches the same
// backend through any of them. New checks the options without touching
// the kernel: a table size that is not one of MaglevTableSizes is refused.
func ExampleMaglevOptions() {
	ns := kernelfake.New(kernelfake.Options{}) // a real node passes its *kernel.Namespace
	opts := proxy.Options{
		Kernel:         ns,
		PinDir:         "/sys/fs/bpf/nodeplane-proxy",
		HostInterfaces: []string{"eth0"},
		Maglev:         proxy.MaglevOptions{Enabled: true, TableSize: 1000},
	}
	_, err := proxy.New(opts)
	fmt.Println(errors.Is(err, proxy.ErrInvalidOptions))

	opts.Maglev.TableSize = 16381 // about 1% spread for services of up to 160 backends
	p, err := proxy.New(opts)
	fmt.Println(err, p != nil)
	// Output:
	// true
	// <nil> true
}

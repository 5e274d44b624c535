package overlay_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/overlay"
	"github.com/nodeplane/nodeplane/overlay/overlaytest"
)

// The overlays the conformance suite runs: VXLAN and None in both
// families, IPIP (IPv4 only) — each encapsulation through the one
// Manager, its Driver and a route table, across subnets, so that both
// tunnel and direct routes are checked.
var (
	vxlanVariants = []overlaytest.Variant{
		{Encap: overlay.VXLAN{}, Family: ipfamily.IPv4, CrossSubnet: true},
		{Encap: overlay.VXLAN{}, Family: ipfamily.IPv6, CrossSubnet: true},
	}
	noneVariants = []overlaytest.Variant{
		{Encap: overlay.None{}, Family: ipfamily.IPv4},
		{Encap: overlay.None{}, Family: ipfamily.IPv6},
	}
	ipipVariant = overlaytest.Variant{Encap: overlay.IPIP{Device: overlaytest.ConfIPIPDevice}, Family: ipfamily.IPv4, CrossSubnet: true}
)

// TestConformance runs the suite on fake namespaces that model a kernel
// with the ipip module, for every encapsulation.
func TestConformance(t *testing.T) {
	env := drivertest.FakeWith(kernelfake.Options{Name: "overlay", Kinds: append(kernelfake.DefaultKinds(), kernel.KindIPIP)})
	variants := append(append(append([]overlaytest.Variant(nil), vxlanVariants...), noneVariants...), ipipVariant)
	drivertest.Run(t, env, overlaytest.Conformance(variants...))
}

// TestKernelConformance runs it in fresh network namespaces of the running
// kernel: VXLAN and None always, IPIP where the kernel has it (this
// project's kernels do not: the test says so, and TestConformance covers
// IPIP on the fake).
func TestKernelConformance(t *testing.T) {
	kerneltest.RequireKernel(t)
	variants := append(append([]overlaytest.Variant(nil), vxlanVariants...), noneVariants...)
	if err := ipipSupported(t); err != nil {
		t.Logf("this kernel has no IPIP (%v): the IPIP overlay runs on kernelfake only (TestConformance)", err)
	} else {
		variants = append(variants, ipipVariant)
	}
	drivertest.Run(t, drivertest.Kernel, overlaytest.Conformance(variants...))
}

// ipipSupported returns why an IPIP link cannot be made in a fresh
// namespace (kernel.ErrNotSupported without the module), nil when it can.
func ipipSupported(t *testing.T) error {
	ns := kerneltest.NewNS(t)
	k, err := kernel.Open(ns.Path())
	if err != nil {
		t.Fatalf("opening %s: %v", ns, err)
	}
	defer k.Close()
	_, err = k.AddLink(context.Background(), kernel.Link{Name: "np-probe", Kind: kernel.KindIPIP, IPTunnel: &kernel.IPTunnel{}})
	if err != nil && !errors.Is(err, kernel.ErrNotSupported) {
		t.Fatalf("an IPIP link failed for another reason than a missing module: %v", err)
	}
	return err
}

package main

// root is the import path of the repository's main module; the other
// modules of the repository (examples/, bench/) live below it.
const root = "github.com/nodeplane/nodeplane"

// layer is one step of the import order. A package may import packages of
// its own layer and of the layers before it in layers, never of a later
// one.
type layer struct {
	name string
	// pkgs are the folders of the layer, relative to root: a folder holds
	// its subfolders too, unless a longer entry (here or in another layer)
	// claims them. "." is the root package alone.
	pkgs []string
	// testKit marks the test kit: only test files, other test-kit packages
	// and the layers with usesTestKit import it.
	testKit bool
	// usesTestKit lets the layer's production code import the test kit.
	usesTestKit bool
	// apart keeps the folders of the layer from importing each other: a
	// package imports only its own folder of the layer.
	apart bool
}

// layers is the one definition of nodeplane's layers, bottom up (the
// diagram in ARCHITECTURE.md draws them). A package that is in none of them
// fails the check: a new package is placed here when it is made.
//
// The package dataplane holds the contracts that every driver and manager
// implements (Driver, Manager, Retry, PartialError) beside the Loop that
// calls them through those interfaces; the Loop never imports a driver or
// a manager, so in the import order dataplane sits below them while the
// Loop drives them at run time.
var layers = []layer{
	{name: "vocabulary", pkgs: []string{
		"clock", "ipfamily", "cluster",
		"internal/errs", "internal/textform", "internal/ifname",
	}},
	// command runs the netfilter binaries inside a namespace: one of the
	// ways to reach the kernel, beside netlink, under the same namespace
	// switch.
	{name: "kernel seam", pkgs: []string{
		"command",
		"kernel", // kernel/kernelfake and kernel/internal/… with it
		"internal/netnsutil", "internal/nfnl", "internal/fib",
	}},
	{name: "allocators and monitors", pkgs: []string{
		"markbits", "idalloc", "ifacemonitor", "mtu",
	}},
	{name: "dataplane contracts and loop", pkgs: []string{
		"dataplane",
	}},
	{name: "rule model", pkgs: []string{
		"netfilter", "internal/nfcore", "internal/managerutil",
	}},
	// The fake kernel serves the iptables and ipset binaries from its
	// ipsetsfake and iptablesfake, which parse members and chain names with
	// the rule model's types: it stands on the seam and the rule model, and
	// never on the drivers it stands under.
	{name: "kernel fakes", pkgs: []string{"kernel/kernelfake"}},
	// Each driver stands on the rule model and the seam alone.
	{name: "drivers", apart: true, pkgs: []string{
		"ipsets", "iptables", "nftables", "routetable", "routerule", "sysctls", "bpf/maps",
	}},
	{name: "managers", pkgs: []string{
		"overlay", "vxlan", "ipip", "internal/tunnel", "wireguard",
		"endpoints", "masquerade", "hostips", "floatingips", "serviceloop", "bpf/proxy", "policy",
		"nfmigrate", // leftovers between netfilter backends: iptables and nftables together
		"policy/selector",
	}},
	{name: "test kit", testKit: true, pkgs: []string{
		"internal/testkit",
		"internal/textform/textformtest",
		"overlay/overlaytest",
	}},
	// bench is a measuring program, built on the test kit's namespaces and
	// timers; it is no part of the library.
	{name: "programs", usesTestKit: true, pkgs: []string{"bench"}},
	{name: "documentation and tools", pkgs: []string{".", "bpf", "internal/tools"}},
	{name: "examples", pkgs: []string{"examples"}},
	// e2e runs the reference agent against a real API server (make e2e);
	// it imports the library as a user does.
	{name: "end-to-end", pkgs: []string{"e2e"}},
}

// reserved are packages that only the listed folders (and tests) import,
// whatever their layer.
var reserved = map[string][]string{
	// The interface monitor feeds the loop, which hands link and address
	// updates to the managers and drivers that ask for them.
	"ifacemonitor": {"dataplane", "internal/testkit", "bench", "examples"},
}

// known are the imports that point back up, each with who removes it. The
// check passes over them and fails on one that is gone, so the list only
// shrinks. Issue 21 emptied it: none points back up.
var known = []exception{}

// exception is one known import that points back up.
type exception struct {
	from, to string // packages relative to root
	by       string // who removes it
}

// Package mtu works out the MTUs a node agent needs: the host MTU, detected
// from the node's links, and the pod MTU, which leaves room for the
// encapsulations the agent runs. It also writes the pod MTU to a file for
// CNI plugins and watches the host MTU for changes.
//
// # What it owns
//
// Nothing in the kernel. The package only reads links (through the
// kernel.Links it is given) and writes the one file a caller names in
// WriteFile. It never
// sets an MTU on any device, never restarts anything and never logs except
// through the Monitor's injected logger; applying a new MTU to tunnel
// devices, routes and the CNI file is the agent's decision.
//
// # Encapsulation overheads and the pod MTU
//
// An Encap names an encapsulation and the bytes it adds per packet when its
// outer header is IPv4 and when it is IPv6. IPIP (20/40), VXLAN (50/70) and
// WireGuard (60/80) are predefined; a caller describes any other with its
// own Encap. PodMTU takes the host MTU, the enabled encapsulations and an
// Extra overhead (for example a cloud's own encapsulation) and returns the
// smallest of HostMTU−Extra−overhead over the enabled encapsulations, or
// HostMTU−Extra when none is enabled. An explicit Override wins. A result
// below the IPv6 minimum of 1280 when pods use IPv6, or below 576 for
// IPv4-only pods, is an error rather than an MTU that silently breaks
// traffic:
//
//	podMTU, err := mtu.PodMTU(mtu.PodMTUOptions{
//		HostMTU: 1500,
//		Encaps:  []mtu.Encap{mtu.VXLAN, mtu.WireGuard},
//	}) // 1440
//
// # Host MTU detection
//
// A Detector lists the links of one namespace through the kernel.Links it
// is given (a *kernel.Namespace; a *kernelfake.Namespace in tests) and
// returns the smallest MTU among the links that are up (kernel.LinkUp),
// match one of its Include patterns and match none of its Exclude
// patterns:
//
//	ns, err := kernel.OpenCurrent() // or kernel.Open("/run/netns/NAME")
//	if err != nil { … }
//	det, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Exclude: mtu.DefaultExclude()})
//	host, err := det.Detect(ctx) // host.MTU, host.Interface
//
// Include and Exclude mean what they mean in ifacemonitor: an empty Include
// includes every name, an empty Exclude excludes none, and nothing is
// filtered by default. DefaultExclude lists loopback, pod veths and the
// tunnels, bridges and helper devices that node agents and container
// runtimes create, so that what remains is the node's uplinks; a node agent
// passes it (extended as it needs) unless it names its uplinks with
// Include. When nothing is left the Detector returns FallbackMTU (1460, the
// smallest MTU common among clouds) with FellBack set. Down links are
// ignored: an unplugged or unconfigured NIC says nothing about the path
// packets take.
//
// # The CNI file
//
// WriteFile replaces a file atomically (temporary file in the same
// directory, fsync, rename, fsync of the directory) with the MTU in decimal
// and no newline, the format CNI plugins read; ReadFile is its reader.
//
// # Watching for changes
//
// A Monitor re-detects the host MTU whenever the agent calls Trigger (from
// its interface monitor's link callback) and, as a backstop, on a slow poll,
// recomputes the pod MTU and calls OnChange with the old and the new values
// when they differ (the first successful detection is reported with a zero
// old value). Run owns its goroutine and stops with the context:
//
//	m, err := mtu.NewMonitor(mtu.MonitorOptions{
//		Detector: det,
//		PodMTU:   mtu.PodMTUOptions{Encaps: []mtu.Encap{mtu.VXLAN}},
//		OnChange: func(old, cur mtu.Result) { _ = mtu.WriteFile("/var/lib/agent/mtu", cur.PodMTU) },
//	})
//	go m.Run(ctx)
//	// in the interface monitor's link callback:
//	m.Trigger()
//
// Constructors (NewDetector, NewMonitor) validate their options, do no I/O
// and start no goroutines. Every error wraps one of the package's sentinel
// errors (or, for a WriteFile path that names no file, fs.ErrInvalid);
// every error about bad options wraps ErrInvalidOptions. A nil context is
// context.Background(). The package builds everywhere; a real namespace
// is Linux-only (kernel.Open).
package mtu

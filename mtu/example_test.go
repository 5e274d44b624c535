package mtu_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/mtu"
)

func ExamplePodMTU() {
	// VXLAN and WireGuard both enabled on a 1500-byte network: WireGuard's
	// larger overhead decides.
	pod, err := mtu.PodMTU(mtu.PodMTUOptions{
		HostMTU: 1500,
		Encaps:  []mtu.Encap{mtu.VXLAN, mtu.WireGuard},
	})
	fmt.Println(pod, err)

	// Tunnels over IPv6, plus 100 bytes of the cloud's own overhead.
	pod, err = mtu.PodMTU(mtu.PodMTUOptions{
		HostMTU:      9000,
		Encaps:       []mtu.Encap{mtu.VXLAN},
		UnderlayIPv6: true,
		Extra:        100,
	})
	fmt.Println(pod, err)

	// An explicit override wins.
	pod, _ = mtu.PodMTU(mtu.PodMTUOptions{HostMTU: 1500, Encaps: []mtu.Encap{mtu.IPIP}, Override: 1400})
	fmt.Println(pod)

	// IPv6 pods need at least 1280.
	_, err = mtu.PodMTU(mtu.PodMTUOptions{HostMTU: 1300, Encaps: []mtu.Encap{mtu.WireGuard}, PodIPv6: true})
	fmt.Println(errors.Is(err, mtu.ErrMTUTooSmall))
	// Output:
	// 1440 <nil>
	// 8830 <nil>
	// 1400
	// true
}

func ExampleEncap_Overhead() {
	for _, e := range []mtu.Encap{mtu.IPIP, mtu.VXLAN, mtu.WireGuard} {
		fmt.Printf("%-9s IPv4 %d, IPv6 %d\n", e, e.Overhead(false), e.Overhead(true))
	}
	// Any other encapsulation is described the same way.
	geneve := mtu.Encap{Name: "geneve", V4: 58, V6: 78}
	fmt.Println(geneve, geneve.Overhead(false))
	// Output:
	// ipip      IPv4 20, IPv6 40
	// vxlan     IPv4 50, IPv6 70
	// wireguard IPv4 60, IPv6 80
	// geneve 58
}

// addLink adds a link called name with mtu to the fake namespace ns, up or
// down; a bridge without ports stands in for a NIC.
func addLink(ns *kernelfake.Namespace, name string, mtuValue int, up bool) int {
	ctx := context.Background()
	l, err := ns.AddLink(ctx, kernel.Link{Name: name, Kind: kernel.KindBridge, MTU: mtuValue})
	if err != nil {
		panic(err)
	}
	if up {
		if err := ns.SetLinkUp(ctx, l.Index, true); err != nil {
			panic(err)
		}
	}
	return l.Index
}

func ExampleNewDetector() {
	// On a node: ns, err := kernel.OpenCurrent(); here a fake namespace.
	ns := kernelfake.New(kernelfake.Options{}) // with lo, MTU 65536
	addLink(ns, "eth0", 9001, true)
	addLink(ns, "ens5", 1500, true)
	addLink(ns, "eth1", 1280, false) // down: ignored
	addLink(ns, "vxlan.calico", 1450, true)
	addLink(ns, "veth1a2b", 1450, true)

	// The uplinks: everything but what DefaultExclude names.
	det, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Exclude: mtu.DefaultExclude()})
	if err != nil {
		fmt.Println(err)
		return
	}
	host, err := det.Detect(context.Background())
	fmt.Printf("%+v %v\n", host, err)

	// Only the eth interfaces.
	det, _ = mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Include: []string{"^eth"}})
	host, _ = det.Detect(context.Background())
	fmt.Printf("%+v\n", host)

	// No filter: every link counts, the pod veth and the tunnel too.
	det, _ = mtu.NewDetector(mtu.DetectorOptions{Kernel: ns})
	host, _ = det.Detect(context.Background())
	fmt.Printf("%+v\n", host)

	// Nothing qualifies: the fallback.
	det, _ = mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Include: []string{"^bond"}})
	host, _ = det.Detect(context.Background())
	fmt.Printf("%+v\n", host)

	// A bad pattern is rejected at construction.
	_, err = mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Include: []string{"^eth("}})
	fmt.Println(errors.Is(err, mtu.ErrInvalidPattern), errors.Is(err, mtu.ErrInvalidOptions))
	// Output:
	// {MTU:1500 Interface:ens5 FellBack:false} <nil>
	// {MTU:9001 Interface:eth0 FellBack:false}
	// {MTU:1450 Interface:veth1a2b FellBack:false}
	// {MTU:1460 Interface: FellBack:true}
	// true true
}

// A listing that fails is an error wrapping ErrListLinks and the cause;
// the fake namespace injects one here.
func ExampleDetector_Detect() {
	ns := kernelfake.New(kernelfake.Options{})
	addLink(ns, "eth0", 1500, true)
	det, _ := mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Include: []string{"^eth"}})
	host, err := det.Detect(context.Background())
	fmt.Println(host.MTU, err)

	ns.Fail(kernelfake.OpLinks, 1, kernel.ErrClosed)
	_, err = det.Detect(context.Background())
	fmt.Println(errors.Is(err, mtu.ErrListLinks), errors.Is(err, kernel.ErrClosed))
	// Output:
	// 1500 <nil>
	// true true
}

func ExampleDetector_Matches() {
	det, _ := mtu.NewDetector(mtu.DetectorOptions{Kernel: kernelfake.New(kernelfake.Options{}), Exclude: mtu.DefaultExclude()})
	for _, name := range []string{"eth0", "bond0", "lo", "veth12", "tunl0", "docker0"} {
		fmt.Println(name, det.Matches(name))
	}
	// Output:
	// eth0 true
	// bond0 true
	// lo false
	// veth12 false
	// tunl0 false
	// docker0 false
}

func ExampleDefaultExclude() {
	ns := kernelfake.New(kernelfake.Options{})
	addLink(ns, "eth0", 1500, true)
	addLink(ns, "storage0", 1400, true)
	// Keep the defaults and also skip a storage network.
	det, _ := mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Exclude: append(mtu.DefaultExclude(), "^storage")})
	host, _ := det.Detect(context.Background())
	fmt.Println(host.MTU, host.Interface)
	// Output:
	// 1500 eth0
}

func ExampleWriteFile() {
	dir, err := os.MkdirTemp("", "mtu-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "var", "lib", "agent", "mtu")

	if err := mtu.WriteFile(path, 1450); err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(path)
	fmt.Printf("%q\n", b)

	err = mtu.WriteFile(path, -1)
	fmt.Println(errors.Is(err, mtu.ErrInvalidMTU))
	// Output:
	// "1450"
	// true
}

func ExampleReadFile() {
	dir, err := os.MkdirTemp("", "mtu-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "mtu")
	_ = mtu.WriteFile(path, 1440)

	v, err := mtu.ReadFile(path)
	fmt.Println(v, err)
	// Output:
	// 1440 <nil>
}

func ExampleNewMonitor() {
	ns := kernelfake.New(kernelfake.Options{})
	eth0 := addLink(ns, "eth0", 1500, true)
	det, _ := mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Exclude: mtu.DefaultExclude()})

	changes := make(chan string, 10)
	m, err := mtu.NewMonitor(mtu.MonitorOptions{
		Detector:     det,
		PodMTU:       mtu.PodMTUOptions{Encaps: []mtu.Encap{mtu.VXLAN}},
		PollInterval: time.Hour, // the backstop; the Trigger below is what matters
		OnChange: func(old, cur mtu.Result) {
			// An agent would rewrite the CNI file and its tunnel MTUs here.
			changes <- fmt.Sprintf("host %d→%d, pod %d→%d", old.Host.MTU, cur.Host.MTU, old.PodMTU, cur.PodMTU)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	fmt.Println(<-changes) // the initial values

	// The interface monitor sees eth0's MTU change and triggers.
	_ = ns.SetLinkMTU(ctx, eth0, 9000)
	m.Trigger()
	fmt.Println(<-changes)

	cur, _ := m.Current()
	fmt.Println(cur.PodMTU)
	cancel()
	fmt.Println(<-done)
	// Output:
	// host 0→1500, pod 0→1450
	// host 1500→9000, pod 1450→8950
	// 8950
	// <nil>
}

package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/nodeplane/nodeplane/mtu"
)

// About is what the plugin prints on stderr when run without CNI_COMMAND.
const About = "nodeplane CNI plugin: a veth per pod, named by the node agent's convention (CNI spec 1.0.0, 1.1.0)"

// Funcs are the plugin's commands, as skel dispatches them.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, GC: cmdGC, Status: cmdStatus}
}

// Main is the plugin's command: it runs the command the environment names
// and exits, printing a CNI error on stdout when it fails.
func Main() {
	skel.PluginMainFuncs(Funcs(), Versions, About)
}

// handles opens a netlink handle on the plugin's own (the host's) namespace
// and, when podNS is not nil, one on the pod's.
func handles(podNS ns.NetNS) (host, pod *netlink.Handle, err error) {
	host, err = netlink.NewHandle()
	if err != nil {
		return nil, nil, fmt.Errorf("netlink: %w", err)
	}
	if podNS == nil {
		return host, nil, nil
	}
	pod, err = netlink.NewHandleAt(netns.NsHandle(podNS.Fd()))
	if err != nil {
		host.Close()
		return nil, nil, fmt.Errorf("netlink in %s: %w", podNS.Path(), err)
	}
	return host, pod, nil
}

// openNS opens the pod's namespace, which must not be the plugin's own.
func openNS(path string) (ns.NetNS, error) {
	n, err := ns.GetNS(path)
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("cannot open the pod's network namespace %q", path), err.Error())
	}
	self, err := netns.Get()
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("cannot open the plugin's own network namespace: %w", err)
	}
	defer self.Close()
	if self.Equal(netns.NsHandle(n.Fd())) {
		n.Close()
		return nil, types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("%q is the plugin's own network namespace, not a pod's", path), "")
	}
	return n, nil
}

// podName returns the host-side name of the pod CNI_ARGS names; ADD and
// CHECK cannot do without it.
func podName(cniArgs string) (string, error) {
	name, ok, err := hostInterface(cniArgs)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", types.NewError(types.ErrInvalidEnvironmentVariables,
			"CNI_ARGS must name the pod (K8S_POD_NAMESPACE and K8S_POD_NAME): its host-side interface is named after it", "")
	}
	return name, nil
}

func cmdAdd(args *skel.CmdArgs) (err error) {
	conf, err := ParseConf(args.StdinData)
	if err != nil {
		return err
	}
	m, err := conf.linkMTU()
	if err != nil {
		return err
	}
	at, err := openAttachment(conf, args)
	if err != nil {
		return err
	}
	defer at.close()
	hostName, alias, podNS, h, ph := at.hostName, at.alias, at.podNS, at.h, at.ph
	if err := clearHostName(h, hostName, conf.Name, args.ContainerID); err != nil {
		return err
	}

	ctx := context.Background()
	r, err := invoke.DelegateAdd(ctx, conf.IPAM.Type, args.StdinData, nil)
	if err != nil {
		return fmt.Errorf("IPAM %s: %w", conf.IPAM.Type, err)
	}
	// From here on a failure releases the addresses (and, further down,
	// deletes the veth first), so a retried ADD starts from nothing.
	defer func() {
		if err != nil {
			if derr := invoke.DelegateDel(ctx, conf.IPAM.Type, args.StdinData, nil); derr != nil {
				err = fmt.Errorf("%w (releasing the addresses failed too: %v)", err, derr)
			}
		}
	}()
	ipam, err := current.NewResultFromResult(r)
	if err != nil {
		return fmt.Errorf("IPAM %s: %w", conf.IPAM.Type, err)
	}
	var addrs []netip.Addr
	for _, ipc := range ipam.IPs {
		a, ok := netip.AddrFromSlice(ipc.Address.IP)
		if !ok {
			return fmt.Errorf("IPAM %s gave an invalid address %v", conf.IPAM.Type, ipc.Address)
		}
		addrs = append(addrs, a.Unmap())
	}
	if len(addrs) == 0 {
		return fmt.Errorf("IPAM %s gave no address", conf.IPAM.Type)
	}

	host, err := createVeth(h, podNS, hostName, args.IfName, alias, m)
	if host != nil {
		defer func() {
			if err != nil {
				if derr := deleteLink(h, host); derr != nil {
					err = fmt.Errorf("%w (deleting the veth failed too: %v)", err, derr)
				}
			}
		}()
	}
	if err != nil {
		return err
	}
	pod, err := configurePod(ph, args.IfName, addrs, host.Attrs().HardwareAddr)
	if err != nil {
		return err
	}

	res := &current.Result{CNIVersion: current.ImplementedSpecVersion, DNS: ipam.DNS,
		Interfaces: []*current.Interface{
			{Name: hostName, Mac: host.Attrs().HardwareAddr.String(), Mtu: host.Attrs().MTU},
			{Name: args.IfName, Mac: pod.Attrs().HardwareAddr.String(), Mtu: pod.Attrs().MTU, Sandbox: args.Netns},
		}}
	if !conf.DNS.IsEmpty() {
		res.DNS = conf.DNS
	}
	podIndex := 1
	routed := map[netip.Addr]bool{}
	for _, a := range addrs {
		gw := gateway(a)
		res.IPs = append(res.IPs, &current.IPConfig{Interface: &podIndex,
			Address: *ipNet(netip.PrefixFrom(a, a.BitLen())), Gateway: gw.AsSlice()})
		if !routed[gw] {
			routed[gw] = true
			res.Routes = append(res.Routes, &types.Route{Dst: *ipNet(defaultDst(gw)), GW: gw.AsSlice()})
		}
	}
	return types.PrintResult(res, conf.CNIVersion)
}

func cmdDel(args *skel.CmdArgs) error {
	conf, err := ParseConf(args.StdinData)
	if err != nil {
		return err
	}
	alias, err := attachment{conf.Name, args.ContainerID, args.IfName}.alias()
	if err != nil {
		return err
	}
	hostName, _, err := hostInterface(args.Args)
	if err != nil {
		return err
	}
	h, _, err := handles(nil)
	if err != nil {
		return err
	}
	defer h.Close()
	// The pod's namespace is never entered: it may be gone.
	if err := deleteAttachment(h, hostName, alias); err != nil {
		return err
	}
	if err := invoke.DelegateDel(context.Background(), conf.IPAM.Type, args.StdinData, nil); err != nil {
		return fmt.Errorf("IPAM %s: %w", conf.IPAM.Type, err)
	}
	return nil
}

func cmdCheck(args *skel.CmdArgs) error {
	conf, err := ParseConf(args.StdinData)
	if err != nil {
		return err
	}
	if conf.PrevResult == nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "CHECK needs a prevResult", "")
	}
	prev, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "cannot convert prevResult", err.Error())
	}
	if err := invoke.DelegateCheck(context.Background(), conf.IPAM.Type, args.StdinData, nil); err != nil {
		return fmt.Errorf("IPAM %s: %w", conf.IPAM.Type, err)
	}
	at, err := openAttachment(conf, args)
	if err != nil {
		return err
	}
	defer at.close()
	return check(at.h, at.ph, prev, at.hostName, at.alias, args)
}

// openedAttachment is what ADD and CHECK work on: the pod's host-side
// interface name and the alias that marks it ours, the pod's namespace,
// and netlink handles in the node's (h) and the pod's (ph) namespaces.
type openedAttachment struct {
	hostName, alias string
	podNS           ns.NetNS
	h, ph           *netlink.Handle
}

// openAttachment names the attachment of args and opens the pod's
// namespace and the handles; close releases them.
func openAttachment(conf *NetConf, args *skel.CmdArgs) (*openedAttachment, error) {
	hostName, err := podName(args.Args)
	if err != nil {
		return nil, err
	}
	alias, err := attachment{conf.Name, args.ContainerID, args.IfName}.alias()
	if err != nil {
		return nil, err
	}
	podNS, err := openNS(args.Netns)
	if err != nil {
		return nil, err
	}
	h, ph, err := handles(podNS)
	if err != nil {
		_ = podNS.Close()
		return nil, err
	}
	return &openedAttachment{hostName: hostName, alias: alias, podNS: podNS, h: h, ph: ph}, nil
}

func (a *openedAttachment) close() {
	a.ph.Close()
	a.h.Close()
	_ = a.podNS.Close()
}

func cmdGC(args *skel.CmdArgs) error {
	conf, err := ParseConf(args.StdinData)
	if err != nil {
		return err
	}
	valid := map[attachment]bool{}
	for _, v := range conf.ValidAttachments {
		valid[attachment{conf.Name, v.ContainerID, v.IfName}] = true
	}
	h, _, err := handles(nil)
	if err != nil {
		return err
	}
	defer h.Close()
	links, err := dump(h.LinkList)
	if err != nil {
		return fmt.Errorf("listing interfaces: %w", err)
	}
	var errs []error
	for _, l := range links {
		a, err := parseAlias(l.Attrs().Alias)
		if err != nil || a.network != conf.Name || valid[a] {
			continue
		}
		errs = append(errs, deleteLink(h, l))
	}
	if err := invoke.DelegateGC(context.Background(), conf.IPAM.Type, args.StdinData, nil); err != nil {
		errs = append(errs, fmt.Errorf("IPAM %s: %w", conf.IPAM.Type, err))
	}
	return errors.Join(errs...)
}

func cmdStatus(args *skel.CmdArgs) error {
	conf, err := ParseConf(args.StdinData)
	if err != nil {
		return err
	}
	if conf.MTU == 0 && conf.MTUFile != "" {
		if _, err := mtu.ReadFile(conf.MTUFile); err != nil {
			return types.NewError(types.ErrPluginNotAvailable, "the node agent has not written the pod MTU file yet", err.Error())
		}
	}
	if err := invoke.DelegateStatus(context.Background(), conf.IPAM.Type, args.StdinData, nil); err != nil {
		var te *types.Error
		if errors.As(err, &te) {
			return te
		}
		return types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("IPAM %s is not available", conf.IPAM.Type), err.Error())
	}
	return nil
}

// check compares the attachment in the kernel with prev: the host side
// hostName (a veth marked alias, up, its MAC), the pod side (a veth whose
// peer is the host side, up, its MAC and MTU), the pod's addresses, the
// gateways' permanent neighbour entries and the routes.
func check(h, ph *netlink.Handle, prev *current.Result, hostName, alias string, args *skel.CmdArgs) error {
	hostIdx, podIdx := -1, -1
	for i, itf := range prev.Interfaces {
		switch {
		case itf.Name == hostName && itf.Sandbox == "":
			hostIdx = i
		case itf.Name == args.IfName && itf.Sandbox == args.Netns:
			podIdx = i
		}
	}
	if hostIdx < 0 || podIdx < 0 {
		return fmt.Errorf("prevResult lists no host-side %s and pod-side %s in %s", hostName, args.IfName, args.Netns)
	}
	host, err := linkByName(h, hostName)
	if err != nil {
		return err
	}
	if host == nil {
		return fmt.Errorf("host-side interface %s is missing", hostName)
	}
	if err := checkLink(host, "host-side", alias, prev.Interfaces[hostIdx]); err != nil {
		return err
	}
	pod, err := ph.LinkByName(args.IfName)
	if err != nil {
		return fmt.Errorf("pod-side interface %s: %w", args.IfName, err)
	}
	if err := checkLink(pod, "pod-side", "", prev.Interfaces[podIdx]); err != nil {
		return err
	}
	if pod.Attrs().ParentIndex != host.Attrs().Index || host.Attrs().ParentIndex != pod.Attrs().Index {
		return fmt.Errorf("pod-side %s is not the peer of host-side %s", args.IfName, hostName)
	}

	addrs, err := dump(func() ([]netlink.Addr, error) { return ph.AddrList(pod, netlink.FAMILY_ALL) })
	if err != nil {
		return fmt.Errorf("listing the addresses of %s: %w", args.IfName, err)
	}
	gateways := map[netip.Addr]bool{}
	for _, ipc := range prev.IPs {
		if ipc.Interface == nil || *ipc.Interface != podIdx {
			continue
		}
		found := false
		for _, a := range addrs {
			found = found || (a.IP.Equal(ipc.Address.IP) && a.Mask.String() == ipc.Address.Mask.String())
		}
		if !found {
			return fmt.Errorf("address %s is missing from pod-side %s", ipc.Address.String(), args.IfName)
		}
		if gw, ok := netip.AddrFromSlice(ipc.Gateway); ok {
			gateways[gw.Unmap()] = true
		}
	}
	for gw := range gateways {
		if err := checkNeighbour(ph, pod, gw, host.Attrs().HardwareAddr); err != nil {
			return err
		}
	}
	for _, r := range prev.Routes {
		if err := checkRoute(ph, pod, r); err != nil {
			return err
		}
	}
	return nil
}

// checkLink compares l with its entry in the previous result: a veth, up,
// marked alias (when not empty), with the MAC and MTU it gave.
func checkLink(l netlink.Link, side, alias string, want *current.Interface) error {
	a := l.Attrs()
	if _, ok := l.(*netlink.Veth); !ok {
		return fmt.Errorf("%s interface %s is a %s, not a veth", side, a.Name, l.Type())
	}
	if alias != "" && a.Alias != alias {
		return fmt.Errorf("%s interface %s is not this attachment's (alias %q)", side, a.Name, a.Alias)
	}
	if a.Flags&net.FlagUp == 0 {
		return fmt.Errorf("%s interface %s is down", side, a.Name)
	}
	if want.Mac != "" && a.HardwareAddr.String() != want.Mac {
		return fmt.Errorf("%s interface %s has MAC %s, not %s", side, a.Name, a.HardwareAddr, want.Mac)
	}
	if want.Mtu != 0 && a.MTU != want.Mtu {
		return fmt.Errorf("%s interface %s has MTU %d, not %d", side, a.Name, a.MTU, want.Mtu)
	}
	return nil
}

// checkNeighbour checks the permanent neighbour entry of gw on pod.
func checkNeighbour(ph *netlink.Handle, pod netlink.Link, gw netip.Addr, mac net.HardwareAddr) error {
	neighs, err := dump(func() ([]netlink.Neigh, error) { return ph.NeighList(pod.Attrs().Index, family(gw)) })
	if err != nil {
		return fmt.Errorf("listing the neighbours of %s: %w", pod.Attrs().Name, err)
	}
	for _, n := range neighs {
		if n.IP.Equal(gw.AsSlice()) && n.State&netlink.NUD_PERMANENT != 0 && n.HardwareAddr.String() == mac.String() {
			return nil
		}
	}
	return fmt.Errorf("no permanent neighbour entry %s → %s on pod-side %s", gw, mac, pod.Attrs().Name)
}

// checkRoute checks that pod has route r (its destination and gateway).
func checkRoute(ph *netlink.Handle, pod netlink.Link, r *types.Route) error {
	dst, ok := netip.AddrFromSlice(r.Dst.IP)
	if !ok {
		return fmt.Errorf("prevResult has an invalid route %v", r)
	}
	dst = dst.Unmap()
	ones, _ := r.Dst.Mask.Size()
	want := netip.PrefixFrom(dst, ones).Masked()
	routes, err := dump(func() ([]netlink.Route, error) { return ph.RouteList(pod, family(dst)) })
	if err != nil {
		return fmt.Errorf("listing the routes of %s: %w", pod.Attrs().Name, err)
	}
	for _, kr := range routes {
		got := defaultDst(dst)
		if kr.Dst != nil {
			a, _ := netip.AddrFromSlice(kr.Dst.IP)
			n, _ := kr.Dst.Mask.Size()
			got = netip.PrefixFrom(a.Unmap(), n)
		}
		if got == want && (r.GW == nil || kr.Gw.Equal(r.GW)) {
			return nil
		}
	}
	return fmt.Errorf("route %s via %v is missing from pod-side %s", want, r.GW, pod.Attrs().Name)
}

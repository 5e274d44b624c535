//go:build linux

package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// attachModes runs test once per attach mode the Proxy can be forced to,
// TCX and classic tc, each as a subtest named by the mode.
func attachModes(t *testing.T, test func(t *testing.T, mode AttachMode)) {
	for _, mode := range []AttachMode{AttachTCX, AttachTC} {
		t.Run(mode.String(), func(t *testing.T) { test(t, mode) })
	}
}

// readTCFilters reads, inside the namespace of k and without the Proxy's
// code, the classic tc filters of ours on every interface: bpf filters at
// TCPriority and TCHandle named with TCFilterPrefix, as "tc
// <direction>_<interface>" with the ID of the program each runs.
func readTCFilters(t *testing.T, k Kernel) map[string]ebpf.ProgramID {
	t.Helper()
	out := map[string]ebpf.ProgramID{}
	require.NoError(t, k.Do(func() error {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		defer h.Close()
		links, err := h.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			for dir, parent := range map[string]uint32{"ingress": netlink.HANDLE_MIN_INGRESS, "egress": netlink.HANDLE_MIN_EGRESS} {
				fs, err := h.FilterList(l, parent)
				if err != nil {
					return err
				}
				for _, f := range fs {
					b, ok := f.(*netlink.BpfFilter)
					if ok && b.Priority == TCPriority && b.Handle == TCHandle && strings.HasPrefix(b.Name, TCFilterPrefix) {
						out["tc "+dir+"_"+l.Attrs().Name] = ebpf.ProgramID(b.Id)
					}
				}
			}
		}
		return nil
	}))
	return out
}

// foreignTC is a classic tc filter someone else put on an interface of a
// test namespace: a bpf program that lets every packet pass on to the
// next filter (TC_ACT_UNSPEC), at prio with handle 1, made with the
// clsact qdisc when missing.
type foreignTC struct {
	ns     *kerneltest.NS
	link   string
	parent uint32
	prio   uint16
	handle uint32
	prog   *ebpf.Program
}

func addForeignTC(t *testing.T, ns *kerneltest.NS, linkName, dir string, prio uint16, handle uint32) *foreignTC {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = prog.Close() })
	f := &foreignTC{ns: ns, link: linkName, parent: tcParent(dir), prio: prio, handle: handle, prog: prog}
	h := ns.Handle()
	l, err := h.LinkByName(linkName)
	require.NoError(t, err)
	if err := h.QdiscAdd(clsact(l.Attrs().Index)); err != nil {
		require.ErrorIs(t, err, unix.EEXIST)
	}
	require.NoError(t, h.FilterAdd(&netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: l.Attrs().Index,
		Parent: f.parent, Priority: prio, Handle: handle, Protocol: unix.ETH_P_ALL}, Fd: prog.FD(), Name: "someone-elses",
		DirectAction: true}))
	return f
}

// present says whether the foreign filter is still there, running its
// program.
func (f *foreignTC) present(t *testing.T) bool {
	t.Helper()
	h := f.ns.Handle()
	l, err := h.LinkByName(f.link)
	require.NoError(t, err)
	fs, err := h.FilterList(l, f.parent)
	require.NoError(t, err)
	info, err := f.prog.Info()
	require.NoError(t, err)
	id, _ := info.ID()
	for _, x := range fs {
		if b, ok := x.(*netlink.BpfFilter); ok && b.Priority == f.prio && b.Handle == f.handle && ebpf.ProgramID(b.Id) == id {
			return true
		}
	}
	return false
}

// hasClsact says whether interface name of ns has a clsact qdisc.
func hasClsact(t *testing.T, ns *kerneltest.NS, name string) bool {
	t.Helper()
	l, err := ns.Handle().LinkByName(name)
	require.NoError(t, err)
	qs, err := ns.Handle().QdiscList(l)
	require.NoError(t, err)
	return slices.ContainsFunc(qs, func(q netlink.Qdisc) bool { return q.Type() == "clsact" })
}

// watchTC starts counting the tc changes the kernel announces in ns (its
// RTNLGRP_TC messages); the function it returns stops and returns the
// counts by message type ("RTM_NEWTFILTER" …).
func watchTC(t *testing.T, ns *kerneltest.NS) func() map[string]int {
	t.Helper()
	var s *nl.NetlinkSocket
	require.NoError(t, ns.Do(func() (err error) {
		s, err = nl.Subscribe(unix.NETLINK_ROUTE, unix.RTNLGRP_TC)
		return err
	}))
	require.NoError(t, s.SetReceiveTimeout(&unix.Timeval{Usec: 200000}))
	names := map[uint16]string{unix.RTM_NEWQDISC: "RTM_NEWQDISC", unix.RTM_DELQDISC: "RTM_DELQDISC",
		unix.RTM_NEWTFILTER: "RTM_NEWTFILTER", unix.RTM_DELTFILTER: "RTM_DELTFILTER"}
	return func() map[string]int {
		t.Helper()
		defer s.Close()
		counts := map[string]int{}
		for {
			msgs, _, err := s.Receive()
			if errors.Is(err, unix.EAGAIN) {
				return counts // drained
			}
			require.NoError(t, err)
			for _, m := range msgs {
				n, ok := names[m.Header.Type]
				if !ok {
					n = fmt.Sprint(m.Header.Type)
				}
				counts[n]++
			}
		}
	}
}

// tcxAttached is attachedPrograms of the rig's host 1 without the classic
// tc filters and the cgroup: where one of ids is attached with TCX.
func tcxAttached(t *testing.T, r *proxyRig, ids []ebpf.ProgramID) []string {
	t.Helper()
	return slices.DeleteFunc(attachedPrograms(t, r.ns, -1, ids), func(w string) bool { return strings.Contains(w, "/tc ") })
}

// tcxPins returns the TCX attachment pins in p's links directory.
func tcxPins(t *testing.T, p *Proxy) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(p.o.PinDir, linksDir))
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if _, ok := tcxPinInterface(e.Name()); ok {
			out = append(out, e.Name())
		}
	}
	return out
}

// The wanted interfaces of host 1 in the rig: its underlay and its pods'
// host veths.
var rigInterfaces = []string{"eth0", "veth1", "veth2", "veth3"}

// wantTCFilters is what readTCFilters finds when p's filters are on every
// interface of the rig.
func wantTCFilters(p *Proxy) map[string]ebpf.ProgramID {
	want := map[string]ebpf.ProgramID{}
	for _, n := range rigInterfaces {
		want["tc ingress_"+n] = p.k.progIDs[p.k.progs[progIngress]]
		want["tc egress_"+n] = p.k.progIDs[p.k.progs[progEgress]]
	}
	return want
}

// AttachAuto (the zero value) picks TCX on a kernel that has it, as this
// one does: TCX attachments, no tc filter, and Status says so (and says
// "auto" before the first Apply decided).
func TestKernelProxyAttachAutoPicksTCX(t *testing.T) {
	r := newProxyRig(t)
	p := r.proxy(t)
	require.Equal(t, AttachAuto, p.Status().Attach)
	p.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)})
	apply(t, p)
	require.Equal(t, AttachTCX, p.Status().Attach)
	require.Len(t, tcxAttached(t, r, ourProgramIDs(p)), 2*len(rigInterfaces))
	require.Empty(t, readTCFilters(t, r.ns))
	require.Len(t, tcxPins(t, p), 2*len(rigInterfaces))
	require.Len(t, spread(t, r.topo.Hosts[0].Pods[0].NS, netip.AddrPortFrom(clusterV4, 80), 20), 3)
}

// Forced classic tc: filters on every wanted interface, no TCX attachment
// or pin; a second Apply and a resync write nothing (the filters run the
// loaded programs, by ID); a restarted Proxy takes the filters over,
// replacing each one's program in place (no filter made or deleted, an
// established connection keeps working) and then writes nothing; Cleanup
// removes the filters and the clsact qdiscs they left empty.
func TestKernelProxyTCRestart(t *testing.T) {
	ctx := context.Background()
	r := newProxyRig(t)
	r.attach = AttachTC
	p, err := New(r.options())
	require.NoError(t, err)
	r.feed(t, p)
	backends := r.backendsAt(false, echoPort)
	svcs := []cluster.Service{
		{Name: "default/echo:tcp", Port: 81, ClusterIPs: []netip.Addr{clusterV4}, Backends: backends},
		{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, NodePort: 30080, Backends: r.backends(false)},
	}
	for _, s := range svcs {
		p.OnUpdate(s)
	}
	apply(t, p)
	st := p.Status()
	require.Equal(t, AttachTC, st.Attach)
	require.Empty(t, st.Errors)
	require.Equal(t, rigInterfaces, st.Interfaces)
	require.Equal(t, wantTCFilters(p), readTCFilters(t, r.ns))
	require.Empty(t, tcxAttached(t, r, ourProgramIDs(p)), "no TCX attachment")
	require.Empty(t, tcxPins(t, p))
	require.Equal(t, 2*len(rigInterfaces), p.k.linkWrites)
	for _, n := range rigInterfaces {
		require.True(t, hasClsact(t, r.topo.Hosts[0].NS, n), n)
	}

	client := r.topo.Hosts[0].Pods[0].NS
	conn := dial(t, client, netip.AddrPortFrom(clusterV4, 81))
	require.NoError(t, exchange(conn))
	assert.Len(t, spread(t, r.topo.Hosts[1].NS, netip.AddrPortFrom(r.topo.Hosts[0].UnderlayIPv4.Addr(), 30080), 20), 3, "NodePort")

	// Nothing new: no tc write, also after a resync.
	watch := watchTC(t, r.topo.Hosts[0].NS)
	apply(t, p)
	p.QueueResync()
	pl, err := p.Plan(ctx)
	require.NoError(t, err)
	require.True(t, pl.Empty(), "%v", pl)
	apply(t, p)
	require.Equal(t, 2*len(rigInterfaces), p.k.linkWrites, "no tc write after the first Apply")
	require.Empty(t, watch(), "the kernel saw no tc change")
	require.Equal(t, rigInterfaces, p.Status().Interfaces)

	// Restart: the filters keep translating while no Proxy runs, and the
	// next one replaces their programs in place.
	before := readTCFilters(t, r.ns)
	require.NoError(t, p.Close())
	require.NoError(t, exchange(conn))
	p2, err := New(r.options())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p2.Cleanup(ctx) })
	r.feed(t, p2)
	for _, s := range svcs {
		p2.OnUpdate(s)
	}
	watch = watchTC(t, r.topo.Hosts[0].NS)
	apply(t, p2)
	require.Equal(t, map[string]int{"RTM_NEWTFILTER": 2 * len(rigInterfaces)}, watch(),
		"each filter changed in place: none deleted, no qdisc made or deleted")
	after := readTCFilters(t, r.ns)
	require.Equal(t, wantTCFilters(p2), after)
	for k, id := range before {
		require.NotEqual(t, id, after[k], "%s runs the new program", k)
	}
	require.Equal(t, 2*len(rigInterfaces), p2.k.linkWrites, "one replace per filter, nothing made or deleted")
	require.Zero(t, p2.k.feSync.Counters().Updated+p2.k.beSync.Counters().Updated)
	require.NoError(t, exchange(conn), "the established connection survives the restart")
	p2.QueueResync()
	pl, err = p2.Plan(ctx)
	require.NoError(t, err)
	require.True(t, pl.Empty(), "%v", pl)
	stt, err := p2.State(ctx)
	require.NoError(t, err)
	require.True(t, stt.InSync(), "%v", stt)
	require.Contains(t, stt.Owned, dataplane.Object{Kind: kindAttach, Text: "eth0 ingress np_ingress (tc)"})
	watch = watchTC(t, r.topo.Hosts[0].NS)
	apply(t, p2)
	require.Equal(t, 2*len(rigInterfaces), p2.k.linkWrites)
	require.Empty(t, watch())

	// Cleanup: no filter of ours, no clsact qdisc left (none had
	// another's filters), no translation.
	require.NoError(t, p2.Cleanup(ctx))
	require.Empty(t, readTCFilters(t, r.ns))
	for _, n := range rigInterfaces {
		require.False(t, hasClsact(t, r.topo.Hosts[0].NS, n), n)
	}
	_, err = whoami(client, netip.AddrPortFrom(clusterV4, 80))
	require.Error(t, err)
}

// A Proxy restarted with classic tc after one that used TCX attaches its
// filters and then detaches the TCX attachments (never leaving an
// interface untranslated); one restarted with TCX after it removes the
// filters once its TCX attachments are made. The Plan of each restart's
// second Apply is empty, and an established connection survives both.
func TestKernelProxyAttachModeSwitch(t *testing.T) {
	ctx := context.Background()
	r := newProxyRig(t)
	r.attach = AttachTCX
	svc := cluster.Service{Name: "default/echo:tcp", Port: 81, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)}
	for i := range svc.Backends {
		svc.Backends[i].Addr = netip.AddrPortFrom(svc.Backends[i].Addr.Addr(), echoPort)
	}
	start := func(mode AttachMode) *Proxy {
		r.attach = mode
		p, err := New(r.options())
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Cleanup(ctx) })
		r.feed(t, p)
		p.OnUpdate(svc)
		apply(t, p)
		require.Equal(t, mode, p.Status().Attach)
		require.Equal(t, rigInterfaces, p.Status().Interfaces)
		pl, err := p.Plan(ctx)
		require.NoError(t, err)
		require.True(t, pl.Empty(), "%v", pl)
		return p
	}
	p := start(AttachTCX)
	conn := dial(t, r.topo.Hosts[0].Pods[0].NS, netip.AddrPortFrom(clusterV4, 81))
	require.NoError(t, exchange(conn))
	ids := ourProgramIDs(p)
	require.Len(t, tcxAttached(t, r, ids), 2*len(rigInterfaces))
	require.NoError(t, p.Close())

	p = start(AttachTC)
	require.Equal(t, wantTCFilters(p), readTCFilters(t, r.ns))
	require.Empty(t, tcxPins(t, p))
	require.Empty(t, tcxAttached(t, r, ids), "the TCX attachments are detached")
	require.NoError(t, exchange(conn))
	require.NoError(t, p.Close())

	p = start(AttachTCX)
	require.Empty(t, readTCFilters(t, r.ns))
	require.Len(t, tcxPins(t, p), 2*len(rigInterfaces))
	require.Len(t, tcxAttached(t, r, ourProgramIDs(p)), 2*len(rigInterfaces))
	for _, n := range rigInterfaces {
		require.False(t, hasClsact(t, r.topo.Hosts[0].NS, n), "%s: the clsact qdisc left empty goes", n)
	}
	require.NoError(t, exchange(conn))
}

// Classic tc filters of others on the Proxy's interfaces (at other
// priorities, before and after its own) are left alone, through an Apply,
// a restart and Cleanup, which leaves their clsact qdiscs; traffic is
// translated all along. A foreign filter at the Proxy's own priority and
// handle holds that interface back alone: its attachment fails (ErrAttach,
// in Status and State), the filter stays, and the other interfaces are
// attached.
func TestKernelProxyTCForeignFilters(t *testing.T) {
	ctx := context.Background()
	r := newProxyRig(t)
	r.attach = AttachTC
	host := r.topo.Hosts[0]
	client := host.Pods[0]
	before := addForeignTC(t, host.NS, client.HostVeth, "ingress", 1, 1)
	after := addForeignTC(t, host.NS, "eth0", "egress", 0xc000, 1)
	afterIn := addForeignTC(t, host.NS, "eth0", "ingress", 0xc000, 7)
	foreign := []*foreignTC{before, after, afterIn}

	p := r.proxy(t)
	p.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, NodePort: 30080,
		Backends: r.backends(false)})
	apply(t, p)
	require.Equal(t, wantTCFilters(p), readTCFilters(t, r.ns))
	for _, f := range foreign {
		require.True(t, f.present(t), "%s", f.link)
	}
	require.Len(t, spread(t, client.NS, netip.AddrPortFrom(clusterV4, 80), 20), 3, "cluster IP")
	require.Len(t, spread(t, r.topo.Hosts[1].NS, netip.AddrPortFrom(host.UnderlayIPv4.Addr(), 30080), 20), 3, "NodePort")

	// Restarted: the foreign filters are still left alone.
	require.NoError(t, p.Close())
	p = r.proxy(t)
	p.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, NodePort: 30080,
		Backends: r.backends(false)})
	apply(t, p)
	for _, f := range foreign {
		require.True(t, f.present(t), "%s", f.link)
	}
	require.Len(t, spread(t, client.NS, netip.AddrPortFrom(clusterV4, 80), 20), 3)

	// A foreign filter at our priority and handle: that interface alone
	// fails, and the filter stays.
	veth2 := host.Pods[1].HostVeth
	require.NoError(t, p.Cleanup(ctx))
	squatter := addForeignTC(t, host.NS, veth2, "ingress", TCPriority, TCHandle)
	p = r.proxy(t)
	p.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)})
	require.NoError(t, p.CompleteDeferredWork(ctx))
	_, err := p.Apply(ctx)
	require.ErrorIs(t, err, ErrAttach)
	require.ErrorContains(t, err, veth2)
	require.ErrorContains(t, err, "foreign tc filter")
	require.True(t, squatter.present(t))
	st := p.Status()
	require.NotContains(t, st.Interfaces, veth2)
	require.Contains(t, st.Interfaces, client.HostVeth)
	require.Len(t, st.Errors, 1)
	state, err := p.State(ctx)
	require.NoError(t, err)
	require.Contains(t, state.Drift, dataplane.Drift{Kind: kindAttach, Name: veth2 + " ingress (tc)",
		Want: veth2 + " ingress np_ingress (tc)", Have: veth2 + ` ingress (tc) (foreign filter "someone-elses")`})
	require.Len(t, spread(t, client.NS, netip.AddrPortFrom(clusterV4, 80), 20), 3)

	// Cleanup removes ours only: the foreign filters and their qdiscs
	// stay; the qdiscs of interfaces without them go.
	require.NoError(t, p.Cleanup(ctx))
	require.Empty(t, readTCFilters(t, r.ns))
	for _, f := range append(foreign, squatter) {
		require.True(t, f.present(t), "%s", f.link)
	}
	for _, n := range rigInterfaces {
		require.Equal(t, n == "eth0" || n == client.HostVeth || n == veth2, hasClsact(t, host.NS, n), n)
	}
	_, err = whoami(client.NS, netip.AddrPortFrom(clusterV4, 80))
	require.Error(t, err)
}

//go:build linux

package proxy

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/bpf/maps"
	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/internal/testkit/bpftest"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
)

// ourProgramIDs returns the IDs of the programs p loaded: the tc ones and
// the connect-time ones.
func ourProgramIDs(p *Proxy) []ebpf.ProgramID {
	var ids []ebpf.ProgramID
	for _, id := range p.k.progIDs {
		ids = append(ids, id)
	}
	if p.k.cg != nil {
		for _, id := range p.k.cg.progIDs {
			ids = append(ids, id)
		}
	}
	return ids
}

// attachedPrograms returns where one of ids is attached now, as
// "interface/direction" and "cgroup/hook": the TCX hooks of every
// interface of ns, its classic tc filters of ours (readTCFilters, as
// "tc <direction>_<interface>") and the connect-time hooks of the cgroup
// cgFD (none when it is negative). It asks the kernel (BPF_PROG_QUERY,
// the tc filter dump), so it sees what is attached, not what is pinned.
func attachedPrograms(t *testing.T, ns *kernel.Namespace, cgFD int, ids []ebpf.ProgramID) []string {
	t.Helper()
	var where []string
	note := func(place string, q *link.QueryResult) {
		for _, a := range q.Programs {
			if slices.Contains(ids, a.ID) {
				where = append(where, fmt.Sprintf("%s: program %d", place, a.ID))
			}
		}
	}
	links, err := ns.Links(context.Background())
	require.NoError(t, err)
	for _, l := range links {
		for _, typ := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			var q *link.QueryResult
			require.NoError(t, ns.Do(func() error {
				var err error
				q, err = link.QueryPrograms(link.QueryOptions{Target: l.Index, Attach: typ})
				return err
			}))
			note(fmt.Sprintf("%s/%v", l.Name, typ), q)
		}
	}
	for key, id := range readTCFilters(t, ns) {
		if slices.Contains(ids, id) {
			dir, name, _ := strings.Cut(strings.TrimPrefix(key, "tc "), "_")
			where = append(where, fmt.Sprintf("%s/tc %s: program %d", name, dir, id))
		}
	}
	if cgFD >= 0 {
		for _, h := range cgroupHooks {
			q, err := link.QueryPrograms(link.QueryOptions{Target: cgFD, Attach: h.typ})
			require.NoError(t, err)
			note("cgroup/"+h.name, q)
		}
	}
	return where
}

// holdPins opens every attachment pinned in p's PinDir/links and keeps it
// open until the test ends, as another process reading them (bpftool, a
// monitor) would: removing a pin then no longer releases the attachment,
// so only a real detach takes the program off (and removing the pin
// alone, which lets the kernel detach it when it frees the pin's inode, a
// moment later, is not mistaken for one).
func holdPins(t *testing.T, p *Proxy) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(p.o.PinDir, linksDir))
	require.NoError(t, err)
	for _, e := range entries {
		l, err := link.LoadPinnedLink(filepath.Join(p.o.PinDir, linksDir, e.Name()), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
	}
}

// When Cleanup returns, no program of the Proxy is attached to any
// interface or to the cgroup any more, even while someone else holds the
// attachments open: it detaches them, it does not only remove their pins.
func TestKernelContractCleanupDetachesBeforeReturning(t *testing.T) {
	attachModes(t, testKernelContractCleanupDetachesBeforeReturning)
}

func testKernelContractCleanupDetachesBeforeReturning(t *testing.T, mode AttachMode) {
	r, cg := newCgroupRig(t)
	r.attach = mode
	p := r.cgroupProxy(t, cg)
	p.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)})
	apply(t, p)
	ids := ourProgramIDs(p)
	// Two directions on every interface the rig's host 1 has but lo, and
	// every connect-time hook.
	require.NotEmpty(t, attachedPrograms(t, r.ns, cg.fd, ids))
	holdPins(t, p)
	require.NoError(t, p.Cleanup(context.Background()))
	require.Empty(t, attachedPrograms(t, r.ns, cg.fd, ids), "attached after Cleanup returned")
}

// The same holds for what an Apply detaches: the programs of an interface
// that went away, and the connect-time programs of a Proxy restarted
// without Options.Cgroup, are detached when Apply returns.
func TestKernelContractApplyDetachesBeforeReturning(t *testing.T) {
	attachModes(t, testKernelContractApplyDetachesBeforeReturning)
}

func testKernelContractApplyDetachesBeforeReturning(t *testing.T, mode AttachMode) {
	r, cg := newCgroupRig(t)
	r.attach = mode
	p := r.cgroupProxy(t, cg)
	svc := cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)}
	p.OnUpdate(svc)
	apply(t, p)
	ids := ourProgramIDs(p)
	veth := r.topo.Hosts[0].Pods[0].HostVeth
	l, err := r.ns.LinkByName(context.Background(), veth)
	require.NoError(t, err)
	on := func(where []string, prefix string) []string {
		return slices.DeleteFunc(where, func(w string) bool { return !strings.HasPrefix(w, prefix) })
	}
	require.NotEmpty(t, on(attachedPrograms(t, r.ns, cg.fd, ids), veth+"/"))
	holdPins(t, p)

	p.OnLink(kernel.Link{Name: veth, Index: l.Index}, kernel.LinkGone)
	apply(t, p)
	require.Empty(t, on(attachedPrograms(t, r.ns, cg.fd, ids), veth+"/"), "attached to a gone interface after Apply returned")
	require.NoError(t, p.Close())

	p2 := r.proxy(t)
	p2.OnUpdate(svc)
	apply(t, p2)
	require.Empty(t, on(attachedPrograms(t, r.ns, cg.fd, ids), "cgroup/"), "connect-time programs attached after Apply returned")
}

// A PinDir that is not on a bpffs is refused before anything is made:
// Apply fails with maps.ErrNotBPFFS and leaves no directory behind, and
// Cleanup touches nothing there.
func TestContractPinDirNotBPFFS(t *testing.T) {
	tmp := t.TempDir() // a tmpfs or a disk, not a bpffs
	for _, dir := range []string{filepath.Join(tmp, "missing", "pins"), tmp} {
		p, err := New(Options{Kernel: doHere{}, PinDir: dir})
		require.NoError(t, err)
		_, err = p.Apply(context.Background())
		require.ErrorIs(t, err, maps.ErrNotBPFFS, dir)
		require.ErrorIs(t, err, ErrLoad, dir)
		_, err = os.Stat(filepath.Join(tmp, "missing"))
		require.ErrorIs(t, err, os.ErrNotExist, "created on the way")
		entries, err := os.ReadDir(tmp)
		require.NoError(t, err)
		require.Empty(t, entries, "made in a PinDir that is not a bpffs")
	}
	// A file named like an attachment's pin, in a PinDir that is not a
	// bpffs, is no pin of the Proxy's: Cleanup refuses and leaves it.
	require.NoError(t, os.MkdirAll(filepath.Join(tmp, linksDir), 0o700))
	file := filepath.Join(tmp, linksDir, "ingress_eth0")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	p, err := New(Options{Kernel: doHere{}, PinDir: tmp})
	require.NoError(t, err)
	require.ErrorIs(t, p.Cleanup(context.Background()), maps.ErrNotBPFFS)
	require.FileExists(t, file)
	// A PinDir that does not exist has nothing to clean up.
	p, err = New(Options{Kernel: doHere{}, PinDir: filepath.Join(tmp, "missing")})
	require.NoError(t, err)
	require.NoError(t, p.Cleanup(context.Background()))
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// An Apply while the Proxy knows no interface (the agent feeds it no link
// updates) says so: Status reports it, and each host interface it has not
// heard of, and the log has one warning, not one per Apply. Once the
// interface is known, the programs are attached and the report goes.
func TestKernelContractNoInterfaceKnown(t *testing.T) {
	ns := kerneltest.NewNS(t)
	out, err := ns.Exec(context.Background(), "ip", "link", "add", "eth0", "up", "type", "bridge")
	require.NoError(t, err, "%s", out)
	kns, err := kernel.Open(ns.Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = kns.Close() })
	var logs syncBuffer
	p, err := New(Options{Kernel: kns, PinDir: bpftest.Dir(t), HostInterfaces: []string{"eth0"}, PodInterfacePrefixes: []string{"veth"},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	apply(t, p)
	apply(t, p)
	st := p.Status()
	require.Empty(t, st.Interfaces)
	require.Len(t, st.Errors, 2)
	require.Contains(t, st.Errors[0], "interface eth0: no link update says it exists")
	require.Contains(t, st.Errors[1], "no interface known")
	require.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), "%s", logs.String())
	require.Contains(t, logs.String(), "no interface known")

	l, err := kns.LinkByName(context.Background(), "eth0")
	require.NoError(t, err)
	p.OnLink(kernel.Link{Name: "eth0", Index: l.Index}, l.State())
	apply(t, p)
	st = p.Status()
	require.Equal(t, []string{"eth0"}, st.Interfaces)
	require.Empty(t, st.Errors)
	require.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), "%s", logs.String())
}

//go:build linux

package proxy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/bpf/maps"
	"github.com/nodeplane/nodeplane/dataplane"
)

// Connect-time translation: the cgroup programs of c/sock.c on
// Options.Cgroup, for the processes of the node's own network namespace
// (and, with Options.ConnectTimePods, of every other one in the cgroup).

const (
	skRevMapName = "np_sk_rev"
	// cgroupPinPrefix starts the pins, in linksDir, of the cgroup
	// attachments: cgroup_<hook>.
	cgroupPinPrefix = "cgroup_"
	netnsCookieVar  = "netns_cookie"
)

// cgroupHook is one connect-time program and where it is attached.
type cgroupHook struct {
	name string // in the pin's name and in errors
	prog string // in the object
	typ  ebpf.AttachType
}

var cgroupHooks = []cgroupHook{
	{"connect4", "np_connect4", ebpf.AttachCGroupInet4Connect},
	{"connect6", "np_connect6", ebpf.AttachCGroupInet6Connect},
	{"sendmsg4", "np_sendmsg4", ebpf.AttachCGroupUDP4Sendmsg},
	{"sendmsg6", "np_sendmsg6", ebpf.AttachCGroupUDP6Sendmsg},
	{"recvmsg4", "np_recvmsg4", ebpf.AttachCGroupUDP4Recvmsg},
	{"recvmsg6", "np_recvmsg6", ebpf.AttachCGroupUDP6Recvmsg},
	{"getpeername4", "np_getpeername4", ebpf.AttachCgroupInet4GetPeername},
	{"getpeername6", "np_getpeername6", ebpf.AttachCgroupInet6GetPeername},
}

// cgroupState is the kernel side of the connect-time translation: its
// map, its loaded programs and their attachments to Options.Cgroup.
type cgroupState struct {
	path    string
	skRev   *ebpf.Map
	progs   map[string]*ebpf.Program // by hook name
	progIDs map[string]ebpf.ProgramID
	links   map[string]link.Link // attached, by hook name
	// created and updated count the attachments made and the pinned ones
	// whose program was replaced, for tests.
	created, updated int
}

// netnsCookie returns the cookie of the Proxy's network namespace, read
// from a socket made inside it.
func (p *Proxy) netnsCookie() (uint64, error) {
	var cookie uint64
	err := p.o.Kernel.Do(func() error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socket: %w", err)
		}
		defer unix.Close(fd)
		cookie, err = unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
		if errors.Is(err, unix.ENOPROTOOPT) {
			return unsupported(fmt.Errorf("SO_NETNS_COOKIE (Linux 5.14): %w", err))
		}
		if err != nil {
			return fmt.Errorf("SO_NETNS_COOKIE: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("the network namespace's cookie: %w", err)
	}
	return cookie, nil
}

// openCgroup opens (or creates) the socket reverse map and loads the
// connect-time programs on it and on the frontend and backend maps of k.
// With no Options.Cgroup it removes what an earlier Proxy with one left
// in PinDir instead, and returns nil.
func (p *Proxy) openCgroup(k *kstate) (*cgroupState, error) {
	if p.o.Cgroup == "" {
		p.removeCgroupPins()
		if err := maps.Remove(p.o.PinDir, skRevMapName); err != nil {
			return nil, err
		}
		return nil, nil
	}
	cookie, err := p.netnsCookie()
	if err != nil {
		return nil, err
	}
	cg := &cgroupState{path: p.o.Cgroup, progs: map[string]*ebpf.Program{}, progIDs: map[string]ebpf.ProgramID{},
		links: map[string]link.Link{}}
	if cg.skRev, err = maps.Open(p.o.PinDir, maps.Spec{Name: skRevMapName, Type: ebpf.LRUHash, Flags: unix.BPF_F_NO_COMMON_LRU, KeySize: skKeySize,
		ValueSize: skValSize, MaxEntries: p.o.Connections}); err != nil {
		return nil, err
	}
	fail := func(err error) (*cgroupState, error) {
		cg.close()
		return nil, err
	}
	spec, err := loadSock()
	if err != nil {
		return fail(err)
	}
	coll, err := loadOnMaps(spec, map[string]any{netnsCookieVar: cookie, "tcp_only": boolWord(p.o.ConnectTimeTCPOnly),
		"pods": boolWord(p.o.ConnectTimePods)},
		map[string]*ebpf.Map{feMapName: k.fe, beMapName: k.be, skRevMapName: cg.skRev, affMapName: k.aff,
			svcStatsName: k.svcStats})
	if err != nil {
		return fail(fmt.Errorf("the connect-time programs: %w", err))
	}
	defer coll.Close() // the maps are ours (replacements) and the programs are taken out
	for _, h := range cgroupHooks {
		prog, id, err := takeProgram(coll, h.prog)
		if err != nil {
			return fail(err)
		}
		cg.progs[h.name], cg.progIDs[h.name] = prog, id
	}
	return cg, nil
}

// close releases the file descriptors; the pins keep the map and the
// attachments.
func (cg *cgroupState) close() {
	if cg == nil {
		return
	}
	cg.forget()
	for _, prog := range cg.progs {
		_ = prog.Close()
	}
	if cg.skRev != nil {
		_ = cg.skRev.Close()
	}
}

// forget closes the attachments so the next attachCgroup checks each
// against its pin again.
func (cg *cgroupState) forget() {
	if cg == nil {
		return
	}
	for name, l := range cg.links {
		_ = l.Close()
		delete(cg.links, name)
	}
}

// attached says whether every connect-time program is attached.
func (cg *cgroupState) attached() bool {
	return cg != nil && len(cg.links) == len(cgroupHooks)
}

// cgroupPin is where the attachment of hook name is pinned.
func (p *Proxy) cgroupPin(name string) string {
	return filepath.Join(p.o.PinDir, linksDir, cgroupPinPrefix+name)
}

// removeCgroupPins detaches the pinned cgroup attachments and removes
// their pins.
func (p *Proxy) removeCgroupPins() {
	for _, h := range cgroupHooks {
		_, _ = detachPinned(p.cgroupPin(h.name))
	}
}

// cgroupID returns the ID of the cgroup v2 directory dir: the inode
// number of the directory.
func cgroupID(dir string) (uint64, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, err
	}
	if !fi.IsDir() {
		return 0, fmt.Errorf("%s is not a directory", dir)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return 0, fmt.Errorf("%s: %w", dir, err)
	}
	if fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return 0, fmt.Errorf("%s is not on a cgroup v2 file system (the connect-time programs attach to a cgroup v2 directory)", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: no inode number", dir)
	}
	return st.Ino, nil
}

// attachCgroup attaches every connect-time program that is not attached
// yet to Options.Cgroup. One hook's failure does not hold back the others:
// each failed hook is an object of the Proxy's ledger (its error wraps
// ErrAttach), tried again at the next Apply.
func (p *Proxy) attachCgroup() {
	cg := p.k.cg
	if cg == nil || cg.attached() {
		return
	}
	id, idErr := cgroupID(cg.path)
	for _, h := range cgroupHooks {
		if _, ok := cg.links[h.name]; ok {
			continue
		}
		var l link.Link
		err := idErr
		if err == nil {
			l, err = p.attachCgroupOne(h, id)
		}
		key := "cgroup " + h.name
		if err != nil {
			p.failed.Fail(key, &dataplane.ObjectError{Driver: "proxy", Op: "attach", Kind: "cgroup hook",
				Name: h.name + " on " + cg.path, Reason: ErrAttach, Err: err})
			continue
		}
		p.failed.Forget(key)
		cg.links[h.name] = l
	}
}

// attachCgroupOne attaches the program of hook h to the cgroup whose ID is
// id through pinOrAttach.
func (p *Proxy) attachCgroupOne(h cgroupHook, id uint64) (link.Link, error) {
	cg := p.k.cg
	prog := cg.progs[h.name]
	l, w, err := pinOrAttach(p.cgroupPin(h.name), h.here(id), prog, cg.progIDs[h.name], func() (link.Link, error) {
		l, err := link.AttachCgroup(link.CgroupOptions{Path: cg.path, Attach: h.typ, Program: prog})
		if errors.Is(err, ebpf.ErrNotSupported) {
			err = unsupported(err)
		}
		return l, err
	})
	switch w {
	case linkUpdated:
		cg.updated++
	case linkAttached:
		cg.created++
	}
	return l, err
}

// here tells an attachment of hook h to the cgroup whose ID is id.
func (h cgroupHook) here(id uint64) func(*link.Info) bool {
	return func(info *link.Info) bool {
		c := info.Cgroup()
		return c != nil && c.CgroupId == id && ebpf.AttachType(c.AttachType) == h.typ
	}
}

// isCgroupPin tells whether name, in linksDir, is the pin of a cgroup
// attachment: cgroup_<hook> for one of cgroupHooks exactly, nothing that
// merely starts like one.
func isCgroupPin(name string) bool {
	hook, ok := strings.CutPrefix(name, cgroupPinPrefix)
	return ok && slices.ContainsFunc(cgroupHooks, func(h cgroupHook) bool { return h.name == hook })
}

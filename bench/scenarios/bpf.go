//go:build linux

package scenarios

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/bench/internal/harness"
	"github.com/nodeplane/nodeplane/bpf/maps"
	"github.com/nodeplane/nodeplane/bpf/proxy"
	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/kernel"
)

// The BPF scenarios, each trial on a bpffs of its own (never /sys/fs/bpf):
//
//   - bpfmaps/initial/N: write N entries (20-byte keys, 16-byte values)
//     into an empty hash map. Ours is a new maps.Sync given the entries
//     (ReplaceDesired) and one Apply: one read of the empty map, then
//     batch updates of maps.DefaultBatchSize. The peer is cilium/ebpf's
//     Map.Update per key; the floor one Map.BatchUpdate of all N. Ours
//     reports where its time goes: desired_ms (NewSync, ReplaceDesired),
//     read_ms (the read of the empty map, which Apply would start with:
//     Kernel makes it first, to time it) and write_ms (Apply).
//   - bpfmaps/change-one/10000: one entry's value changes in a map of 10k
//     entries in sync. Ours is Sync.Set + Apply (one syscall); the floor is
//     one Map.Update; the peer, a writer without a diff, writes every
//     entry again with a Map.Update each.
//   - bpfmaps/read/10000: read a map of 10k entries whole: ours is a fresh
//     Sync's Kernel (batch lookups); the peer is Map.Iterate (a next-key
//     and a lookup per entry).
//   - bpfproxy/change-one/N: one service's backend changes port among N
//     services (one cluster IP, three backends each) already applied by a
//     bpf/proxy Proxy. Ours is OnUpdate of that service, then
//     CompleteDeferredWork and Apply. The peer is a proxy without a diff:
//     after the change it writes every frontend and backend entry again,
//     one Map.Update each (4N writes; the entries are computed in its
//     Setup, so its figure is the writes alone). The floor writes just
//     the entries that differ (computed in Setup): one backend entry.
//     The Proxy is sent no LinkUpdate, so its program is loaded but
//     attached nowhere.
//
// "syscalls" (ours: the Sync's count; peers and floors: their writes) is
// reported where it says something.
//
// The bpffs: each trial mounts one (unix.Mount("bpf", dir, "bpf", 0, ""))
// in a mount namespace private to one locked thread of this process, on a
// directory of a tmpfs that exists only there, and reaches it from every
// thread through /proc/<pid>/task/<tid>/root (see bpfMount). The next Setup
// of a scenario of this file closes what a trial left (the Proxy with
// Cleanup, the maps, the namespace) and unmounts its bpffs (MNT_DETACH);
// a Setup that fails does so at once. The last trial's mount, which no
// other process ever sees, goes with the thread's namespace when the
// process exits, however it exits.
func init() {
	harness.Register(bpfMapsInitial(1_000), bpfMapsInitial(10_000), bpfMapsChangeOne(10_000), bpfMapsRead(10_000),
		bpfProxyChangeOne(1_000), bpfProxyChangeOne(10_000))
}

// bpfLeft is what the BPF trials left open (maps, proxies, namespaces,
// mounts), closed at the next Setup of a scenario of this file.
var bpfLeft closers

// bpfFS is a bpffs mounted in the private mount namespace of one locked
// thread, which lives until unmount.
type bpfFS struct {
	// dir is the bpffs as every thread of the process reaches it.
	dir     string
	release chan struct{}
	done    chan error
	once    sync.Once
	err     error
}

// bpfMount mounts a fresh bpffs. A goroutine locks itself to a thread
// (never the process's main thread, whose namespace /proc/self shows),
// gives that thread a mount namespace of its own with private propagation,
// mounts a tmpfs over the temporary directory there and a bpffs on a
// directory of it, then waits for unmount. When it returns, still locked,
// the runtime ends the thread and the kernel drops its mount namespace with
// whatever is still mounted in it: nothing is ever mounted where another
// process would see it, and nothing outlives the process.
func bpfMount() (*bpfFS, error) {
	fs := &bpfFS{release: make(chan struct{}), done: make(chan error, 1)}
	ready := make(chan error, 1)
	var worker func(onThread chan<- struct{})
	worker = func(onThread chan<- struct{}) {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if unix.Gettid() == unix.Getpid() {
			// The main thread: start again from another goroutine, which
			// cannot get this thread while it is locked here, and give
			// the thread back once that one holds another.
			next := make(chan struct{})
			go worker(next)
			<-next
			runtime.UnlockOSThread()
			return
		}
		if onThread != nil {
			close(onThread)
		}
		mnt := filepath.Join(os.TempDir(), "nodeplane-bench-bpffs")
		err := func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return fmt.Errorf("unshare mount namespace: %w", err)
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return fmt.Errorf("private propagation: %w", err)
			}
			if err := unix.Mount("tmpfs", os.TempDir(), "tmpfs", 0, "size=64k,mode=0700"); err != nil {
				return fmt.Errorf("mount tmpfs on %s: %w", os.TempDir(), err)
			}
			if err := os.Mkdir(mnt, 0o700); err != nil {
				return err
			}
			if err := unix.Mount("bpf", mnt, "bpf", 0, ""); err != nil {
				return fmt.Errorf("mount bpffs on %s: %w", mnt, err)
			}
			return nil
		}()
		fs.dir = fmt.Sprintf("/proc/%d/task/%d/root%s", unix.Getpid(), unix.Gettid(), mnt)
		ready <- err
		if err != nil {
			return
		}
		<-fs.release
		fs.done <- unix.Unmount(mnt, unix.MNT_DETACH)
	}
	go worker(nil)
	if err := <-ready; err != nil {
		return nil, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(fs.dir, &st); err != nil || uint32(st.Type) != uint32(unix.BPF_FS_MAGIC) {
		_ = fs.unmount()
		return nil, fmt.Errorf("bpffs at %s not reachable: %v", fs.dir, err)
	}
	return fs, nil
}

// unmount unmounts the bpffs and ends its thread (and namespace). Later
// calls return the first one's result.
func (fs *bpfFS) unmount() error {
	fs.once.Do(func() {
		close(fs.release)
		fs.err = <-fs.done
	})
	return fs.err
}

// bpfSetup returns a Setup that closes what earlier BPF trials left,
// mounts a bpffs for this trial and hands what load returns (given the
// bpffs directory) to Run, then settles. What load opens it queues on
// bpfLeft; when anything fails, that and the mount are released at once.
func bpfSetup[T any](load func(ctx context.Context, env *harness.Env, dir string) (T, error)) setupFunc {
	return func(ctx context.Context, env *harness.Env) error {
		bpfLeft.run()
		fs, err := bpfMount()
		if err != nil {
			return err
		}
		bpfLeft.add(func() { _ = fs.unmount() })
		v, err := load(ctx, env, fs.dir)
		if err == nil {
			err = settle(ctx)
		}
		if err != nil {
			bpfLeft.run()
			return err
		}
		env.State = v
		return nil
	}
}

// bpfKey and bpfVal are the map scenarios' entries: a frontend-like key
// (20 bytes) and a value of four words (16 bytes), without implicit
// padding.
type bpfKey struct {
	Addr  [16]byte
	Port  uint16
	Proto uint8
	Pad   uint8
}

type bpfVal struct {
	ID, Count, LocalCount, Flags uint32
}

var bpfMapSpec = maps.Spec{Name: "np_bench", Type: ebpf.Hash, KeySize: 20, ValueSize: 16, MaxEntries: 65536}

// bpfEntries are n entries, in a map (ours) and as parallel slices (the
// peers and floors).
type bpfEntries struct {
	m    map[bpfKey]bpfVal
	keys []bpfKey
	vals []bpfVal
}

func bpfMakeEntries(n int) bpfEntries {
	e := bpfEntries{m: make(map[bpfKey]bpfVal, n), keys: make([]bpfKey, n), vals: make([]bpfVal, n)}
	for i := range n {
		k := bpfKey{Addr: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).As16(), Port: 80, Proto: 6}
		v := bpfVal{ID: uint32(i + 1), Count: 3, LocalCount: 1}
		e.m[k], e.keys[i], e.vals[i] = v, k, v
	}
	return e
}

// bpfMapState is what the map scenarios' Setups hand to Run: the map,
// and ours' Sync when it was applied in Setup.
type bpfMapState struct {
	m *ebpf.Map
	s *maps.Sync[bpfKey, bpfVal]
}

// bpfMapSetup opens the bench map on the trial's bpffs; with fill, it
// writes e in one BatchUpdate; with sync, a Sync applies e instead.
func bpfMapSetup(e bpfEntries, fill, sync bool) setupFunc {
	return bpfSetup(func(ctx context.Context, _ *harness.Env, dir string) (*bpfMapState, error) {
		m, err := maps.Open(dir, bpfMapSpec)
		if err != nil {
			return nil, err
		}
		bpfLeft.add(func() { _ = m.Close() })
		st := &bpfMapState{m: m}
		if fill {
			if _, err := m.BatchUpdate(e.keys, e.vals, nil); err != nil {
				return nil, fmt.Errorf("filling the map: %w", err)
			}
		}
		if sync {
			if st.s, err = maps.NewSync[bpfKey, bpfVal](m, maps.SyncOptions{}); err != nil {
				return nil, err
			}
			st.s.ReplaceDesired(e.m)
			if err := st.s.Apply(ctx); err != nil {
				return nil, err
			}
		}
		return st, nil
	})
}

// bpfUpdateAll writes every entry with a Map.Update each.
func bpfUpdateAll[K, V any](m *ebpf.Map, keys []K, vals []V) error {
	for i := range keys {
		if err := m.Update(&keys[i], &vals[i], ebpf.UpdateAny); err != nil {
			return err
		}
	}
	return nil
}

// bpfPerKeyPeer is the map scenarios' naive peer: on the map setup opens,
// a Map.Update for each of keys, with vals.
func bpfPerKeyPeer(name string, setup setupFunc, keys []bpfKey, vals []bpfVal) harness.Variant {
	return harness.Variant{
		Name: name, Role: harness.Peer, Setup: setup,
		Run: func(_ context.Context, env *harness.Env) error {
			env.Report("syscalls", float64(len(keys)))
			return bpfUpdateAll(env.State.(*bpfMapState).m, keys, vals)
		},
	}
}

func bpfMapsInitial(n int) harness.Scenario {
	e := bpfMakeEntries(n)
	return harness.Scenario{
		Name: "bpfmaps/initial/" + strconv.Itoa(n), Size: n,
		Note: "N entries (20 B key, 16 B value) into an empty hash map; ours includes NewSync, ReplaceDesired and one read of the empty map",
		Variants: []harness.Variant{
			{
				Name: "nodeplane maps.Sync (batched)", Role: harness.Ours,
				Setup: bpfMapSetup(e, false, false),
				Run: func(ctx context.Context, env *harness.Env) error {
					st := env.State.(*bpfMapState)
					t0 := time.Now()
					s, err := maps.NewSync[bpfKey, bpfVal](st.m, maps.SyncOptions{})
					if err != nil {
						return err
					}
					s.ReplaceDesired(e.m)
					t1 := time.Now()
					// The read Apply would start with, made first to
					// time it apart.
					if _, err := s.Kernel(ctx); err != nil {
						return err
					}
					t2 := time.Now()
					if err := s.Apply(ctx); err != nil {
						return err
					}
					env.Report("desired_ms", millis(t1.Sub(t0)))
					env.Report("read_ms", millis(t2.Sub(t1)))
					env.Report("write_ms", millis(time.Since(t2)))
					if got := s.Counters().Updated; got != n {
						return fmt.Errorf("%d entries written, want %d", got, n)
					}
					env.Report("syscalls", float64(s.Counters().Syscalls))
					return nil
				},
			},
			{
				Name: "Map.BatchUpdate (all entries, one call)", Role: harness.Floor,
				Setup: bpfMapSetup(e, false, false),
				Run: func(_ context.Context, env *harness.Env) error {
					_, err := env.State.(*bpfMapState).m.BatchUpdate(e.keys, e.vals, nil)
					env.Report("syscalls", 1)
					return err
				},
			},
			bpfPerKeyPeer("Map.Update per key (cilium/ebpf)", bpfMapSetup(e, false, false), e.keys, e.vals),
		},
	}
}

func bpfMapsChangeOne(n int) harness.Scenario {
	e := bpfMakeEntries(n)
	i := n / 2
	k, v := e.keys[i], e.vals[i]
	v.Count, v.Flags = 4, 1
	// What the peer writes: every entry, the changed one with its new value.
	after := slices.Clone(e.vals)
	after[i] = v
	return harness.Scenario{
		Name: "bpfmaps/change-one/" + strconv.Itoa(n), Size: 1,
		Note: "one entry's value changes in a hash map of " + strconv.Itoa(n) + " entries in sync; the peer is a writer without a diff (every entry again, per key)",
		Variants: []harness.Variant{
			{
				Name: "nodeplane maps.Sync", Role: harness.Ours,
				Setup: bpfMapSetup(e, false, true),
				Run: func(ctx context.Context, env *harness.Env) error {
					s := env.State.(*bpfMapState).s
					before := s.Counters().Syscalls
					s.Set(k, v)
					if err := s.Apply(ctx); err != nil {
						return err
					}
					env.Report("syscalls", float64(s.Counters().Syscalls-before))
					return nil
				},
			},
			{
				Name: "Map.Update (the changed entry)", Role: harness.Floor,
				Setup: bpfMapSetup(e, true, false),
				Run: func(_ context.Context, env *harness.Env) error {
					env.Report("syscalls", 1)
					return env.State.(*bpfMapState).m.Update(&k, &v, ebpf.UpdateAny)
				},
			},
			bpfPerKeyPeer("Map.Update per key (every entry)", bpfMapSetup(e, true, false), e.keys, after),
		},
	}
}

func bpfMapsRead(n int) harness.Scenario {
	e := bpfMakeEntries(n)
	return harness.Scenario{
		Name: "bpfmaps/read/" + strconv.Itoa(n), Size: n,
		Note: "a hash map of N entries read whole into a Go map",
		Variants: []harness.Variant{
			{
				Name: "nodeplane maps.Sync.Kernel (BatchLookup)", Role: harness.Ours,
				Setup: bpfMapSetup(e, true, false),
				Run: func(ctx context.Context, env *harness.Env) error {
					s, err := maps.NewSync[bpfKey, bpfVal](env.State.(*bpfMapState).m, maps.SyncOptions{})
					if err != nil {
						return err
					}
					got, err := s.Kernel(ctx)
					if err != nil {
						return err
					}
					if len(got) != n {
						return fmt.Errorf("read %d entries, want %d", len(got), n)
					}
					env.Report("syscalls", float64(s.Counters().Syscalls))
					return nil
				},
			},
			{
				Name: "Map.Iterate (cilium/ebpf)", Role: harness.Peer,
				Setup: bpfMapSetup(e, true, false),
				Run: func(_ context.Context, env *harness.Env) error {
					got, err := bpfDump[bpfKey, bpfVal](env.State.(*bpfMapState).m, n)
					if err != nil {
						return err
					}
					if len(got) != n {
						return fmt.Errorf("read %d entries, want %d", len(got), n)
					}
					return nil
				},
			},
		},
	}
}

// The proxy's maps, as a proxy without a diff opens them (package
// bpf/proxy, apply_linux.go): the same specs, so maps.Open finds the
// proxy's pins.
var (
	bpfFrontendSpec = maps.Spec{Name: "np_fe", Type: ebpf.Hash, KeySize: 20, ValueSize: 20, MaxEntries: proxy.DefaultFrontends}
	bpfBackendSpec  = maps.Spec{Name: "np_be", Type: ebpf.Hash, KeySize: 8, ValueSize: 20, MaxEntries: proxy.DefaultBackends}
)

// bpfServices are n services of one IPv4 cluster IP and three backends
// (one local) each.
func bpfServices(n int) []cluster.Service {
	svcs := make([]cluster.Service, n)
	for i := range svcs {
		hi, lo := byte(i>>8), byte(i)
		svcs[i] = cluster.Service{
			Name:       fmt.Sprintf("bench/svc-%05d:http", i),
			Port:       80,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, hi, lo})},
			Backends: []cluster.Backend{
				{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 201, hi, lo}), 8080), Local: true},
				{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 202, hi, lo}), 8080)},
				{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 203, hi, lo}), 8080)},
			},
		}
	}
	return svcs
}

// bpfProxyApply sends svcs and applies.
func bpfProxyApply(ctx context.Context, p *proxy.Proxy, svcs ...cluster.Service) error {
	for _, s := range svcs {
		p.OnUpdate(s)
	}
	if err := p.CompleteDeferredWork(ctx); err != nil {
		return err
	}
	_, err := p.Apply(ctx)
	return err
}

// bpfProxyOpen opens the trial's namespace and a Proxy on dir, applied
// with svcs; Cleanup and Close are queued on bpfLeft.
func bpfProxyOpen(ctx context.Context, env *harness.Env, dir string, svcs []cluster.Service) (*proxy.Proxy, error) {
	k, err := kernel.Open(env.NS.Path())
	if err != nil {
		return nil, err
	}
	bpfLeft.add(func() { _ = k.Close() })
	p, err := proxy.New(proxy.Options{Kernel: k, PinDir: dir})
	if err != nil {
		return nil, err
	}
	bpfLeft.add(func() {
		_ = p.Cleanup(context.Background())
		_ = p.Close()
	})
	if err := bpfProxyApply(ctx, p, svcs...); err != nil {
		return nil, err
	}
	if st := p.Status(); st.Frontends != len(svcs) || st.Backends != 3*len(svcs) {
		return nil, fmt.Errorf("proxy programmed %d frontends and %d backends, want %d and %d (%v)",
			st.Frontends, st.Backends, len(svcs), 3*len(svcs), st.Errors)
	}
	return p, nil
}

// bpfRaw is a map's entries as byte arrays.
type bpfRaw[K, V comparable] struct {
	keys []K
	vals []V
}

// bpfDump reads m whole with Map.Iterate into a map sized for hint
// entries.
func bpfDump[K, V comparable](m *ebpf.Map, hint int) (map[K]V, error) {
	out := make(map[K]V, hint)
	var k K
	var v V
	it := m.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	return out, it.Err()
}

// bpfWrites returns the entries of to that from lacks or holds with
// another value (all of to when from is nil), and the keys of from that to
// lacks.
func bpfWrites[K, V comparable](from, to map[K]V) (bpfRaw[K, V], []K) {
	var w bpfRaw[K, V]
	for k, v := range to {
		if old, ok := from[k]; !ok || old != v {
			w.keys = append(w.keys, k)
			w.vals = append(w.vals, v)
		}
	}
	var dels []K
	for k := range from {
		if _, ok := to[k]; !ok {
			dels = append(dels, k)
		}
	}
	return w, dels
}

// bpfProxyWrites is the naive proxies' work: the entries to write (and
// keys to delete) in the frontend and backend maps.
type bpfProxyWrites struct {
	fe, be *ebpf.Map
	feW    bpfRaw[[20]byte, [20]byte]
	beW    bpfRaw[[8]byte, [20]byte]
	feDel  [][20]byte
	beDel  [][8]byte
}

// syscalls is how many writes and deletions run makes.
func (w *bpfProxyWrites) syscalls() int {
	return len(w.feW.keys) + len(w.beW.keys) + len(w.feDel) + len(w.beDel)
}

// dump returns what the frontend and backend maps hold.
func (w *bpfProxyWrites) dump() (map[[20]byte][20]byte, map[[8]byte][20]byte, error) {
	fe, err := bpfDump[[20]byte, [20]byte](w.fe, 0)
	if err != nil {
		return nil, nil, err
	}
	be, err := bpfDump[[8]byte, [20]byte](w.be, 0)
	return fe, be, err
}

func (w *bpfProxyWrites) run() error {
	if err := bpfUpdateAll(w.fe, w.feW.keys, w.feW.vals); err != nil {
		return err
	}
	if err := bpfUpdateAll(w.be, w.beW.keys, w.beW.vals); err != nil {
		return err
	}
	for i := range w.beDel {
		if err := w.be.Delete(&w.beDel[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	for i := range w.feDel {
		if err := w.fe.Delete(&w.feDel[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

// bpfNaiveSetup is the peer's and floor's Setup: a Proxy applies svcs,
// then the change (the maps then hold the state to reach), then svcs
// again, and is closed, leaving its maps pinned as they were before the
// change. With all, Run writes every entry of the changed state (the
// peer); otherwise only the entries that differ (the floor).
func bpfNaiveSetup(svcs []cluster.Service, changed cluster.Service, all bool) setupFunc {
	return bpfSetup(func(ctx context.Context, env *harness.Env, dir string) (*bpfProxyWrites, error) {
		p, err := bpfProxyOpen(ctx, env, dir, svcs)
		if err != nil {
			return nil, err
		}
		w := &bpfProxyWrites{}
		if w.fe, err = maps.Open(dir, bpfFrontendSpec); err != nil {
			return nil, err
		}
		bpfLeft.add(func() { _ = w.fe.Close() })
		if w.be, err = maps.Open(dir, bpfBackendSpec); err != nil {
			return nil, err
		}
		bpfLeft.add(func() { _ = w.be.Close() })
		fe0, be0, err := w.dump()
		if err != nil {
			return nil, err
		}
		if err := bpfProxyApply(ctx, p, changed); err != nil {
			return nil, err
		}
		fe1, be1, err := w.dump()
		if err != nil {
			return nil, err
		}
		orig := svcs[0]
		for _, s := range svcs {
			if s.Name == changed.Name {
				orig = s
			}
		}
		if err := bpfProxyApply(ctx, p, orig); err != nil {
			return nil, err
		}
		if err := p.Close(); err != nil { // the pins stay, as before the change
			return nil, err
		}
		if all {
			w.feW, _ = bpfWrites[[20]byte, [20]byte](nil, fe1)
			w.beW, _ = bpfWrites[[8]byte, [20]byte](nil, be1)
		} else {
			w.feW, w.feDel = bpfWrites(fe0, fe1)
			w.beW, w.beDel = bpfWrites(be0, be1)
		}
		if w.syscalls() == 0 {
			return nil, errors.New("the change wrote nothing")
		}
		return w, nil
	})
}

func bpfProxyChangeOne(n int) harness.Scenario {
	svcs := bpfServices(n)
	changed := svcs[n/2]
	changed.Backends = append([]cluster.Backend(nil), changed.Backends...)
	changed.Backends[2].Addr = netip.AddrPortFrom(changed.Backends[2].Addr.Addr(), 9090)
	naive := func(name string, role harness.Role, all bool) harness.Variant {
		return harness.Variant{
			Name: name, Role: role,
			Setup: bpfNaiveSetup(svcs, changed, all),
			Run: func(_ context.Context, env *harness.Env) error {
				w := env.State.(*bpfProxyWrites)
				env.Report("syscalls", float64(w.syscalls()))
				return w.run()
			},
		}
	}
	return harness.Scenario{
		Name: "bpfproxy/change-one/" + strconv.Itoa(n), Size: 1,
		Note: "one backend of one service changes port among " + strconv.Itoa(n) + " services (3 backends each) applied; the peer and floor write precomputed entries (their Setup computes them)",
		Variants: []harness.Variant{
			{
				Name: "nodeplane bpf/proxy", Role: harness.Ours,
				Setup: bpfSetup(func(ctx context.Context, env *harness.Env, dir string) (*proxy.Proxy, error) {
					return bpfProxyOpen(ctx, env, dir, svcs)
				}),
				Run: func(ctx context.Context, env *harness.Env) error {
					return bpfProxyApply(ctx, env.State.(*proxy.Proxy), changed)
				},
			},
			naive("Map.Update of the changed entries (hand-computed diff)", harness.Floor, false),
			naive("proxy without a diff (every entry again, Map.Update per key)", harness.Peer, true),
		},
	}
}

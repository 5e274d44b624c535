//go:build linux

package maps

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// MaxNameLen is the longest Spec.Name, in bytes: the kernel keeps 15 bytes
// of a map's name (BPF_OBJ_NAME_LEN less its terminating NUL).
const MaxNameLen = 15

// Spec describes a map nodeplane owns: its pin's file name and its shape.
// Open compares the shape of a pinned map with it.
type Spec struct {
	// Name is the pin's file name and the kernel's map name: 1 to
	// MaxNameLen bytes of [A-Za-z0-9_.], not "." or "..".
	Name string
	// Type is the map type, such as ebpf.Hash or ebpf.LRUHash.
	Type ebpf.MapType
	// KeySize is the size of a key in bytes; it must not be 0.
	KeySize uint32
	// ValueSize is the size of a value in bytes; it must not be 0.
	ValueSize uint32
	// MaxEntries is the map's capacity; it must not be 0.
	MaxEntries uint32
	// Flags are the map's creation flags (BPF_F_NO_PREALLOC …).
	Flags uint32
}

// Validate returns nil when s can describe a map, else an error wrapping
// ErrInvalidSpec that names the field.
func (s Spec) Validate() error {
	if s.Name == "" || len(s.Name) > MaxNameLen {
		return fmt.Errorf("%w: Name %q must be 1 to %d bytes", ErrInvalidSpec, s.Name, MaxNameLen)
	}
	if s.Name == "." || s.Name == ".." {
		return fmt.Errorf("%w: Name %q is not a file name", ErrInvalidSpec, s.Name)
	}
	for i := 0; i < len(s.Name); i++ {
		c := s.Name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return fmt.Errorf("%w: Name %q: byte %q is not one of [A-Za-z0-9_.]", ErrInvalidSpec, s.Name, c)
		}
	}
	switch {
	case s.Type == ebpf.UnspecifiedMap:
		return fmt.Errorf("%w %s: Type is unspecified", ErrInvalidSpec, s.Name)
	case s.KeySize == 0:
		return fmt.Errorf("%w %s: KeySize is 0", ErrInvalidSpec, s.Name)
	case s.ValueSize == 0:
		return fmt.Errorf("%w %s: ValueSize is 0", ErrInvalidSpec, s.Name)
	case s.MaxEntries == 0:
		return fmt.Errorf("%w %s: MaxEntries is 0", ErrInvalidSpec, s.Name)
	}
	return nil
}

// matches reports whether m has s's shape.
func (s Spec) matches(m *ebpf.Map) bool {
	return m.Type() == s.Type && m.KeySize() == s.KeySize && m.ValueSize() == s.ValueSize &&
		m.MaxEntries() == s.MaxEntries && m.Flags() == s.Flags
}

// Open returns the map pinned at filepath.Join(dir, spec.Name) when its
// type, key size, value size, max entries and flags equal spec's, with the
// entries it holds. Otherwise it creates a new, empty map, pins it there
// and returns it: a pin of another shape is replaced and its entries are
// dropped (programs holding the old map keep it until they let it go), so
// a caller rebuilds such a map from its desired state, which a Sync does
// by itself. Open creates dir when missing. dir must be on a BPF file
// system (ErrNotBPFFS otherwise, before anything is created). A pin at the
// path that is not a map is an error (ErrPin) and is left alone.
//
// The caller owns the returned map and closes it; closing does not unpin
// it (see Remove).
func Open(dir string, spec Spec) (*ebpf.Map, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := CheckBPFFS(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: create directory: %w", ErrPin, err)
	}
	path := filepath.Join(dir, spec.Name)
	old, err := ebpf.LoadPinnedMap(path, nil)
	switch {
	case err == nil:
		if spec.matches(old) {
			return old, nil
		}
		_ = old.Close()
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: replace %s: %w", ErrPin, path, err)
		}
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOENT):
	default:
		return nil, fmt.Errorf("%w: load %s: %w", ErrPin, path, err)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       spec.Name,
		Type:       spec.Type,
		KeySize:    spec.KeySize,
		ValueSize:  spec.ValueSize,
		MaxEntries: spec.MaxEntries,
		Flags:      spec.Flags,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: create %s: %w", ErrPin, spec.Name, err)
	}
	if err := m.Pin(path); err != nil {
		_ = m.Close()
		return nil, fmt.Errorf("%w: pin %s: %w", ErrPin, path, err)
	}
	return m, nil
}

// Remove unpins dir/name (the map itself goes when nothing else holds
// it). A missing pin is not an error.
func Remove(dir, name string) error {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return fmt.Errorf("%w: Name %q is not a file name", ErrInvalidSpec, name)
	}
	path := filepath.Join(dir, name)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: remove %s: %w", ErrPin, path, err)
	}
	return nil
}

// CheckBPFFS returns nil when dir, or its nearest existing ancestor when
// dir does not exist yet, is on a BPF file system, and otherwise an error
// wrapping ErrNotBPFFS (mount one with `mount -t bpf bpf DIR`). Open checks
// the same.
func CheckBPFFS(dir string) error {
	if dir == "" {
		return fmt.Errorf("%w: empty directory", ErrNotBPFFS)
	}
	p := filepath.Clean(dir)
	var st unix.Statfs_t
	for {
		err := unix.Statfs(p, &st)
		if err == nil {
			break
		}
		parent := filepath.Dir(p)
		if !errors.Is(err, unix.ENOENT) || parent == p {
			return fmt.Errorf("%w: %s: %w", ErrNotBPFFS, dir, err)
		}
		p = parent
	}
	if uint32(st.Type) != uint32(unix.BPF_FS_MAGIC) {
		return fmt.Errorf("%w: %s (file system magic %#x)", ErrNotBPFFS, dir, uint32(st.Type))
	}
	return nil
}

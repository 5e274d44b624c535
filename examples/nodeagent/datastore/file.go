package datastore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"sigs.k8s.io/yaml"
)

// DefaultPollInterval is how often a File re-reads its file when no change
// notification arrived, as a backstop.
const DefaultPollInterval = 10 * time.Second

// File is a Datastore backed by one YAML file (the Cluster's fields: nodes,
// pods, pools, services), watched for changes. An edit that does not parse or
// validate is logged and ignored: the agent keeps the last good state.
//
// Publish cannot write to the file, which other nodes also read: it logs what
// the node would publish when the file does not already say so, so that the
// operator can put it there.
type File struct {
	// Path is the YAML file.
	Path string
	// PollInterval is the backstop re-read period; zero means
	// DefaultPollInterval.
	PollInterval time.Duration
	// Logger receives warnings about bad edits; nil discards them.
	Logger *slog.Logger

	last  Cluster
	stamp fileStamp
}

// fileStamp tells whether a file may have changed without reading it.
type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	st := fileStamp{mod: fi.ModTime(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st
}

// Load reads and validates a cluster file.
func Load(path string) (Cluster, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Cluster{}, fmt.Errorf("datastore: %w", err)
	}
	return Parse(b)
}

// Parse decodes and validates a cluster in YAML (or JSON). Unknown fields are
// errors, so a misspelt key is not silently ignored.
func Parse(b []byte) (Cluster, error) {
	var c Cluster
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return Cluster{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := c.Validate(); err != nil {
		return Cluster{}, err
	}
	c.Normalize()
	return c, nil
}

// Marshal encodes c as YAML, as Parse reads it.
func Marshal(c Cluster) ([]byte, error) {
	return yaml.Marshal(c)
}

// WriteFile writes c to path atomically (a temporary file renamed over it),
// so a File watching path never reads half a file.
func WriteFile(path string, c Cluster) error {
	b, err := Marshal(c)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cluster-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Watch implements Datastore: it reads the file, calls update, and calls it
// again whenever the file's content changes (a write, a rename over it, or at
// the latest after PollInterval). A file that cannot be read or parsed at the
// start is an error.
func (f *File) Watch(ctx context.Context, update func(Cluster)) error {
	log := f.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f.stamp = stampOf(f.Path)
	first, err := Load(f.Path)
	if err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("datastore: watch %s: %w", f.Path, err)
	}
	defer w.Close()
	// Watch the directory: editors and WriteFile replace the file by
	// renaming another over it, which ends a watch on the file itself.
	if err := w.Add(filepath.Dir(f.Path)); err != nil {
		return fmt.Errorf("datastore: watch %s: %w", f.Path, err)
	}
	f.last = first
	update(first)
	poll := f.PollInterval
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	// debounce collects the events of one save into one read.
	var debounce <-chan time.Time
	base := filepath.Base(f.Path)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("datastore: file watcher closed")
			}
			if filepath.Base(ev.Name) == base {
				debounce = time.After(50 * time.Millisecond)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("datastore: file watcher closed")
			}
			log.Warn("file watcher error; polling meanwhile", "path", f.Path, "err", err)
		case <-ticker.C:
			// The backstop reads the file only when its size, time or
			// inode changed: an idle agent parses nothing.
			if st := stampOf(f.Path); st != f.stamp {
				f.reload(log, update)
			}
		case <-debounce:
			debounce = nil
			f.reload(log, update)
		}
	}
}

func (f *File) reload(log *slog.Logger, update func(Cluster)) {
	f.stamp = stampOf(f.Path)
	c, err := Load(f.Path)
	if err != nil {
		log.Warn("cluster file not loaded; keeping the last good state", "path", f.Path, "err", err)
		return
	}
	if reflect.DeepEqual(c, f.last) {
		return
	}
	f.last = c
	log.Info("cluster file changed", "path", f.Path, "nodes", len(c.Nodes), "pods", len(c.Pods), "services", len(c.Services))
	update(c)
}

// Publish implements Datastore. The file is the operator's: Publish reads it
// and logs, at warning level, each published value it does not hold yet.
func (f *File) Publish(_ context.Context, info NodeInfo) error {
	log := f.Logger
	if log == nil {
		return nil
	}
	c, err := Load(f.Path)
	if err != nil {
		return err
	}
	n, ok := c.Node(info.Name)
	if !ok {
		log.Warn("this node is not in the cluster file", "node", info.Name, "path", f.Path)
		return nil
	}
	if len(info.VTEPMAC) > 0 && len(n.VTEPMAC) > 0 && !bytes.Equal(n.VTEPMAC, info.VTEPMAC) {
		log.Warn("the cluster file gives this node another VTEP MAC", "node", info.Name, "file", n.VTEPMAC, "device", info.VTEPMAC.String())
	}
	if !info.WireGuardKey.IsZero() && n.WireGuardPublicKey != info.WireGuardKey.String() {
		log.Warn("put this node's WireGuard public key in the cluster file", "node", info.Name, "wireguardPublicKey", info.WireGuardKey.String())
	}
	if !info.WireGuardKeyV6.IsZero() && n.WireGuardPublicKeyV6 != info.WireGuardKeyV6.String() {
		log.Warn("put this node's IPv6 WireGuard public key in the cluster file", "node", info.Name, "wireguardPublicKeyV6", info.WireGuardKeyV6.String())
	}
	return nil
}

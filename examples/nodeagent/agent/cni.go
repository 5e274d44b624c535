package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

// The CNI plugin's installation (package examples/cni/plugin).
const (
	// DefaultCNIBinDir is where runtimes look for CNI plugins.
	DefaultCNIBinDir = "/opt/cni/bin"
	// DefaultCNIConfDir is where runtimes look for network configurations.
	DefaultCNIConfDir = "/etc/cni/net.d"
	// CNIPluginType is the plugin's type in the configuration and the name
	// of its binary in the bin directory.
	CNIPluginType = "nodeplane"
	// CNIPluginBinary is the name of the built plugin (cmd/nodeplane-cni),
	// looked for next to the agent's own executable.
	CNIPluginBinary = "nodeplane-cni"
	// CNINetworkName is the network's name in the configuration list
	// (host-local keeps its reservations under it).
	CNINetworkName = "nodeplane"
	// CNIConfFileName is the configuration list the agent writes; runtimes
	// take the first file of the directory in lexical order.
	CNIConfFileName = "10-nodeplane.conflist"
)

// cniVersions are the spec versions the configuration list declares; the
// runtime takes the highest it speaks.
var cniVersions = []string{"1.0.0", "1.1.0"}

// CNIParams is what the agent's network configuration list says.
type CNIParams struct {
	// Plugin is the plugin binary InstallCNI copies; empty means
	// DefaultCNIPlugin.
	Plugin string
	// PodCIDRs are the node's pod CIDRs: one host-local range each, its
	// gateway the CIDR's first address (datastore.TunnelAddr, never a
	// pod's). Required.
	PodCIDRs []netip.Prefix
	// MTU is the pods' MTU; 0 means MTUFile's.
	MTU int
	// MTUFile is the file the plugin reads the pod MTU from: the agent's
	// STATE_DIR/mtu (MTUFileName), at the same path on the host as in the
	// agent's container.
	MTUFile string
}

// CNIConfList returns the network configuration list of p: network
// CNINetworkName, one plugin of type CNIPluginType with host-local IPAM.
func CNIConfList(p CNIParams) ([]byte, error) {
	if len(p.PodCIDRs) == 0 {
		return nil, errors.New("agent: CNI: no pod CIDR: pods would get no address")
	}
	type cniRange struct {
		Subnet  string `json:"subnet"`
		Gateway string `json:"gateway"`
	}
	type ipam struct {
		Type   string       `json:"type"`
		Ranges [][]cniRange `json:"ranges"`
	}
	type plugin struct {
		Type    string `json:"type"`
		MTU     int    `json:"mtu,omitempty"`
		MTUFile string `json:"mtuFile,omitempty"`
		IPAM    ipam   `json:"ipam"`
	}
	pl := plugin{Type: CNIPluginType, MTU: p.MTU, MTUFile: p.MTUFile, IPAM: ipam{Type: "host-local"}}
	for _, c := range p.PodCIDRs {
		if !c.IsValid() || c != c.Masked() || c.Bits() > c.Addr().BitLen()-2 {
			return nil, fmt.Errorf("agent: CNI: pod CIDR %s is not a network of at least 4 addresses", c)
		}
		pl.IPAM.Ranges = append(pl.IPAM.Ranges, []cniRange{{Subnet: c.String(), Gateway: datastore.TunnelAddr(c).String()}})
	}
	list := struct {
		CNIVersion  string   `json:"cniVersion"`
		CNIVersions []string `json:"cniVersions"`
		Name        string   `json:"name"`
		Plugins     []plugin `json:"plugins"`
	}{cniVersions[len(cniVersions)-1], cniVersions, CNINetworkName, []plugin{pl}}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// DefaultCNIPlugin returns the plugin binary next to the running
// executable: CNIPluginBinary in its directory.
func DefaultCNIPlugin() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("agent: CNI: cannot find the agent's executable: %w", err)
	}
	return filepath.Join(filepath.Dir(exe), CNIPluginBinary), nil
}

// InstallCNI installs the plugin as CNIPluginType in binDir (mode 0755),
// then writes CNIConfFileName in confDir, in that order, so a runtime that
// sees the configuration finds the plugin. Each file is written to a
// temporary file in its directory and renamed over the old one, so a
// runtime reads the old file or the new, never a partial one (and a plugin
// being executed keeps running); a file that already holds the same bytes
// is not written again. Missing directories are created (0755).
func InstallCNI(binDir, confDir string, p CNIParams) error {
	conf, err := CNIConfList(p)
	if err != nil {
		return err
	}
	src := p.Plugin
	if src == "" {
		if src, err = DefaultCNIPlugin(); err != nil {
			return err
		}
	}
	bin, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("agent: CNI: reading the plugin: %w", err)
	}
	if err := writeAtomic(filepath.Join(binDir, CNIPluginType), bin, 0o755); err != nil {
		return fmt.Errorf("agent: CNI: installing the plugin: %w", err)
	}
	if err := writeAtomic(filepath.Join(confDir, CNIConfFileName), conf, 0o644); err != nil {
		return fmt.Errorf("agent: CNI: writing the configuration: %w", err)
	}
	return nil
}

// RemoveCNI removes what InstallCNI wrote: the configuration first (runtimes
// stop using the network), then the plugin. Missing files are no error;
// nothing else in the directories is touched.
func RemoveCNI(binDir, confDir string) error {
	var errs []error
	for _, path := range []string{filepath.Join(confDir, CNIConfFileName), filepath.Join(binDir, CNIPluginType)} {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("agent: CNI: %w", err))
		}
	}
	return errors.Join(errs...)
}

// writeAtomic replaces path with data and mode unless it holds data
// already: a temporary file in the same directory, synced, renamed over it.
func writeAtomic(path string, data []byte, mode os.FileMode) (err error) {
	if same, err := sameContent(path, data); err == nil && same {
		if st, err := os.Stat(path); err == nil && st.Mode().Perm() == mode {
			return nil
		}
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// sameContent says whether the file at path holds data (compared by hash,
// without reading a file of another size).
func sameContent(path string, data []byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() != int64(len(data)) {
		return false, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, err
	}
	want := sha256.Sum256(data)
	return bytes.Equal(h.Sum(nil), want[:]), nil
}

// CNIInstallOptions configure WithCNIInstall.
type CNIInstallOptions struct {
	// BinDir and ConfDir are the runtime's CNI directories; empty means
	// DefaultCNIBinDir and DefaultCNIConfDir.
	BinDir, ConfDir string
	// NodeName is the node whose pod CIDRs the configuration gives out.
	NodeName string
	// IPv6 keeps the node's IPv6 pod CIDRs; without it only the IPv4 ones
	// go to the pods (the agent routes no IPv6 then).
	IPv6 bool
	// Plugin, MTU and MTUFile are as in CNIParams.
	Plugin  string
	MTU     int
	MTUFile string
	// Logger receives what the installation does; nil discards it.
	Logger *slog.Logger
}

// WithCNIInstall returns ds with the CNI installation wrapped around its
// Watch: every Cluster it delivers goes to the agent first, then, when this
// node's pod CIDRs (of the families the options keep) differ from those
// last installed, InstallCNI runs with them. A node without pod CIDRs gets
// no configuration (a runtime waits for one, so the node stays not ready);
// a failed installation is logged and tried again at the next update.
// Publish is ds's. The agent calls it around its datastore with
// --cni-install; `cleanup --cni-install` calls RemoveCNI.
func WithCNIInstall(ds datastore.Datastore, o CNIInstallOptions) datastore.Datastore {
	if o.BinDir == "" {
		o.BinDir = DefaultCNIBinDir
	}
	if o.ConfDir == "" {
		o.ConfDir = DefaultCNIConfDir
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &cniInstaller{Datastore: ds, o: o}
}

// cniInstaller is the datastore WithCNIInstall returns.
type cniInstaller struct {
	datastore.Datastore
	o CNIInstallOptions
	// installed are the pod CIDRs of the configuration last written; only
	// Watch's update callback, one call at a time, reads and writes it.
	installed []netip.Prefix
	// warned is set once the node's missing pod CIDRs were logged.
	warned bool
}

// Watch implements datastore.Datastore.
func (c *cniInstaller) Watch(ctx context.Context, update func(datastore.Cluster)) error {
	return c.Datastore.Watch(ctx, func(cl datastore.Cluster) {
		// Read before the agent has it: it may keep the Cluster.
		n, _ := cl.Node(c.o.NodeName)
		var cidrs []netip.Prefix
		for _, p := range n.PodCIDRs {
			if p.Addr().Is4() || c.o.IPv6 {
				cidrs = append(cidrs, p)
			}
		}
		update(cl)
		c.install(cidrs)
	})
}

// install writes the configuration for this node's pod CIDRs, when they
// changed.
func (c *cniInstaller) install(cidrs []netip.Prefix) {
	if len(cidrs) == 0 {
		if !c.warned {
			c.o.Logger.Warn("no pod CIDR for this node yet: no CNI configuration written", "node", c.o.NodeName)
			c.warned = true
		}
		return
	}
	if c.installed != nil && slices.Equal(cidrs, c.installed) {
		return
	}
	err := InstallCNI(c.o.BinDir, c.o.ConfDir, CNIParams{Plugin: c.o.Plugin, PodCIDRs: cidrs, MTU: c.o.MTU, MTUFile: c.o.MTUFile})
	if err != nil {
		c.o.Logger.Error("CNI plugin not installed; trying again at the next update", "err", err)
		return
	}
	c.installed, c.warned = cidrs, false
	c.o.Logger.Info("CNI plugin and configuration installed", "pod_cidrs", cidrs,
		"conf", filepath.Join(c.o.ConfDir, CNIConfFileName), "plugin", filepath.Join(c.o.BinDir, CNIPluginType))
}

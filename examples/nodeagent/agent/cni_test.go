package agent

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/examples/cni/plugin"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

var (
	cidr4 = netip.MustParsePrefix("10.244.1.0/24")
	cidr6 = netip.MustParsePrefix("fd00:10:244:1::/64")
)

// The configuration list is one a runtime loads (libcni), its plugin entry
// one the plugin accepts, with a host-local range per pod CIDR whose
// gateway is the node's tunnel address.
func TestCNIConfList(t *testing.T) {
	require.Equal(t, plugin.Type, CNIPluginType)
	b, err := CNIConfList(CNIParams{PodCIDRs: []netip.Prefix{cidr4, cidr6}, MTUFile: "/var/lib/nodeplane-agent/mtu"})
	require.NoError(t, err)
	list, err := libcni.NetworkConfFromBytes(b)
	require.NoError(t, err)
	require.Equal(t, CNINetworkName, list.Name)
	require.Equal(t, "1.1.0", list.CNIVersion)
	require.Len(t, list.Plugins, 1)

	var entry map[string]any
	require.NoError(t, json.Unmarshal(list.Plugins[0].Bytes, &entry))
	entry["name"], entry["cniVersion"] = list.Name, list.CNIVersion
	one, err := json.Marshal(entry)
	require.NoError(t, err)
	conf, err := plugin.ParseConf(one)
	require.NoError(t, err)
	require.Equal(t, CNIPluginType, conf.Type)
	require.Equal(t, "host-local", conf.IPAM.Type)
	require.Equal(t, "/var/lib/nodeplane-agent/mtu", conf.MTUFile)
	require.Zero(t, conf.MTU)
	require.Equal(t, map[string]any{"type": "host-local", "ranges": []any{
		[]any{map[string]any{"subnet": "10.244.1.0/24", "gateway": "10.244.1.0"}},
		[]any{map[string]any{"subnet": "fd00:10:244:1::/64", "gateway": "fd00:10:244:1::"}},
	}}, entry["ipam"])

	b, err = CNIConfList(CNIParams{PodCIDRs: []netip.Prefix{cidr4}, MTU: 1400})
	require.NoError(t, err)
	require.Contains(t, string(b), `"mtu": 1400`)
	require.NotContains(t, string(b), "mtuFile")

	for _, bad := range [][]netip.Prefix{nil, {netip.MustParsePrefix("10.244.1.1/24")}, {netip.MustParsePrefix("10.244.1.0/31")}, {{}}} {
		_, err := CNIConfList(CNIParams{PodCIDRs: bad})
		require.Error(t, err, "%v", bad)
	}
}

// inode returns the inode of path, which a rewrite (temp file and rename)
// changes.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Sys().(*syscall.Stat_t).Ino
}

// fakePlugin writes a stand-in for the plugin binary and returns its path.
func fakePlugin(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), CNIPluginBinary)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestInstallAndRemoveCNI(t *testing.T) {
	root := t.TempDir()
	binDir, confDir := filepath.Join(root, "opt/cni/bin"), filepath.Join(root, "etc/cni/net.d")
	bin, conf := filepath.Join(binDir, CNIPluginType), filepath.Join(confDir, CNIConfFileName)
	src := fakePlugin(t, "plugin v1")
	params := CNIParams{Plugin: src, PodCIDRs: []netip.Prefix{cidr4}, MTUFile: "/state/mtu"}

	// A missing plugin: nothing is written.
	missing := params
	missing.Plugin = filepath.Join(root, "nowhere")
	require.Error(t, InstallCNI(binDir, confDir, missing))
	require.NoFileExists(t, bin)
	require.NoFileExists(t, conf)

	// Missing directories are made; the binary is executable.
	require.NoError(t, InstallCNI(binDir, confDir, params))
	got, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.Equal(t, "plugin v1", string(got))
	st, err := os.Stat(bin)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), st.Mode().Perm())
	want, err := CNIConfList(params)
	require.NoError(t, err)
	got, err = os.ReadFile(conf)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))

	// The same again writes nothing; a change rewrites only what changed.
	binIno, confIno := inode(t, bin), inode(t, conf)
	require.NoError(t, InstallCNI(binDir, confDir, params))
	require.Equal(t, binIno, inode(t, bin))
	require.Equal(t, confIno, inode(t, conf))
	params.PodCIDRs = []netip.Prefix{cidr4, cidr6}
	require.NoError(t, InstallCNI(binDir, confDir, params))
	require.Equal(t, binIno, inode(t, bin))
	require.NotEqual(t, confIno, inode(t, conf))
	got, err = os.ReadFile(conf)
	require.NoError(t, err)
	require.Contains(t, string(got), cidr6.String())
	params.Plugin = fakePlugin(t, "plugin v2")
	require.NoError(t, InstallCNI(binDir, confDir, params))
	got, err = os.ReadFile(bin)
	require.NoError(t, err)
	require.Equal(t, "plugin v2", string(got))
	for _, dir := range []string{binDir, confDir} {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1, "no temporary file left in %s", dir)
	}

	// RemoveCNI removes exactly those two files, and is idempotent.
	foreignBin, foreignConf := filepath.Join(binDir, "host-local"), filepath.Join(confDir, "05-other.conflist")
	require.NoError(t, os.WriteFile(foreignBin, []byte("x"), 0o755))
	require.NoError(t, os.WriteFile(foreignConf, []byte("{}"), 0o644))
	require.NoError(t, RemoveCNI(binDir, confDir))
	require.NoFileExists(t, bin)
	require.NoFileExists(t, conf)
	require.FileExists(t, foreignBin)
	require.FileExists(t, foreignConf)
	require.NoError(t, RemoveCNI(binDir, confDir))
	require.NoError(t, RemoveCNI(filepath.Join(root, "none"), filepath.Join(root, "none")))
}

func TestDefaultCNIPlugin(t *testing.T) {
	p, err := DefaultCNIPlugin()
	require.NoError(t, err)
	exe, err := os.Executable()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(filepath.Dir(exe), CNIPluginBinary), p)
}

// scriptedDatastore delivers its clusters in order, then returns.
type scriptedDatastore struct {
	clusters  []datastore.Cluster
	published []datastore.NodeInfo
	after     func(i int) // called after cluster i was delivered
}

func (s *scriptedDatastore) Watch(_ context.Context, update func(datastore.Cluster)) error {
	for i, c := range s.clusters {
		update(c)
		s.after(i)
	}
	return nil
}

func (s *scriptedDatastore) Publish(_ context.Context, info datastore.NodeInfo) error {
	s.published = append(s.published, info)
	return nil
}

// The configuration follows the node's pod CIDRs of the kept families;
// nothing is written while the node has none; the agent sees every
// cluster; Publish goes through.
func TestWithCNIInstall(t *testing.T) {
	root := t.TempDir()
	binDir, confDir := filepath.Join(root, "bin"), filepath.Join(root, "conf")
	conf := filepath.Join(confDir, CNIConfFileName)
	withCIDRs := func(cidrs ...netip.Prefix) datastore.Cluster {
		return datastore.Cluster{Nodes: []datastore.Node{{Name: "other", PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.9.0/24")}},
			{Name: "node1", PodCIDRs: cidrs}}}
	}
	ranges := func() []string {
		b, err := os.ReadFile(conf)
		require.NoError(t, err)
		list, err := libcni.NetworkConfFromBytes(b)
		require.NoError(t, err)
		var p struct {
			IPAM struct {
				Ranges [][]struct{ Subnet string }
			}
		}
		require.NoError(t, json.Unmarshal(list.Plugins[0].Bytes, &p))
		var out []string
		for _, r := range p.IPAM.Ranges {
			out = append(out, r[0].Subnet)
		}
		return out
	}
	var seen int
	src := filepath.Join(root, CNIPluginBinary) // made after the second update
	ds := &scriptedDatastore{clusters: []datastore.Cluster{
		withCIDRs(), withCIDRs(cidr4, cidr6), withCIDRs(cidr4, cidr6), withCIDRs(cidr4, cidr6), withCIDRs(netip.MustParsePrefix("10.244.2.0/24")),
	}}
	var ino uint64
	ds.after = func(i int) {
		switch i {
		case 0:
			require.NoFileExists(t, conf, "no pod CIDR yet")
		case 1:
			require.NoFileExists(t, conf, "the plugin is missing: nothing installed")
			require.NoError(t, os.WriteFile(src, []byte("p"), 0o755))
		case 2:
			require.Equal(t, []string{"10.244.1.0/24"}, ranges(), "tried again; IPv4 only without IPv6")
			ino = inode(t, conf)
		case 3:
			require.Equal(t, ino, inode(t, conf), "unchanged CIDRs: not written again")
		case 4:
			require.Equal(t, []string{"10.244.2.0/24"}, ranges())
		}
	}
	w := WithCNIInstall(ds, CNIInstallOptions{BinDir: binDir, ConfDir: confDir, NodeName: "node1", Plugin: src})
	require.NoError(t, w.Watch(context.Background(), func(datastore.Cluster) { seen++ }))
	require.Equal(t, 5, seen)
	require.FileExists(t, filepath.Join(binDir, CNIPluginType))
	require.NoError(t, w.Publish(context.Background(), datastore.NodeInfo{Name: "node1"}))
	require.Len(t, ds.published, 1)

	// With IPv6 both families go to the pods.
	ds.clusters = []datastore.Cluster{withCIDRs(cidr4, cidr6)}
	ds.after = func(int) { require.Equal(t, []string{cidr4.String(), cidr6.String()}, ranges()) }
	w = WithCNIInstall(ds, CNIInstallOptions{BinDir: binDir, ConfDir: confDir, NodeName: "node1", IPv6: true, Plugin: fakePlugin(t, "p")})
	require.NoError(t, w.Watch(context.Background(), func(datastore.Cluster) {}))
}

package plugin_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/examples/cni/plugin"
)

// VERSION, as a runtime asks it (libcni) and raw; the spec versions the
// plugin refuses; and the about text without CNI_COMMAND. No namespace is
// touched.
func TestVersion(t *testing.T) {
	dir := binDir(t)
	info, err := libcni.NewCNIConfig([]string{dir}, nil).GetVersionInfo(context.Background(), plugin.Type)
	require.NoError(t, err)
	require.Equal(t, []string{"1.0.0", "1.1.0"}, info.SupportedVersions())

	out, err := execPlugin(t, invocation{command: "VERSION"}, nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"cniVersion":"1.1.0","supportedVersions":["1.0.0","1.1.0"]}`, string(out))

	ipam := map[string]any{"type": plugin.Type, "ipam": map[string]any{"type": "host-local"}}
	// STATUS and GC are spec 1.1.0 verbs; a 0.4.0 configuration is refused.
	for _, c := range []struct {
		command, version string
	}{{"STATUS", "1.0.0"}, {"GC", "1.0.0"}, {"ADD", "0.4.0"}} {
		_, err := execPlugin(t, invocation{command: c.command, containerID: "c1", netns: "/nonexistent/netns", ifName: "eth0"},
			pluginConf(t, c.version, "n", ipam, nil))
		require.Equal(t, types.ErrIncompatibleCNIVersion, cniCode(err), "%s with cniVersion %s: %v", c.command, c.version, err)
	}

	about, err := exec.Command(filepath.Join(dir, "nodeplane")).CombinedOutput()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(about), plugin.About), "%s", about)
	require.Contains(t, string(about), "1.0.0, 1.1.0")
}

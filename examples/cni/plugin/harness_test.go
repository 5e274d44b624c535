package plugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/require"
)

// The binaries a runtime would find in its CNI bin directory, built once
// per test process: the plugin (as "nodeplane", the type it is configured
// by) and the standard host-local IPAM plugin.
var bins struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bins.dir != "" {
		os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

// binDir returns the directory holding the built plugin and host-local.
func binDir(t testing.TB) string {
	t.Helper()
	bins.once.Do(func() {
		bins.dir, bins.err = os.MkdirTemp("", "nodeplane-cni-bin-")
		if bins.err != nil {
			return
		}
		for name, pkg := range map[string]string{
			"nodeplane":  "github.com/nodeplane/nodeplane/examples/cni/cmd/nodeplane-cni",
			"host-local": "github.com/containernetworking/plugins/plugins/ipam/host-local",
		} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(bins.dir, name), pkg).CombinedOutput()
			if err != nil {
				bins.err = fmt.Errorf("go build %s: %v: %s", pkg, err, out)
				return
			}
		}
	})
	require.NoError(t, bins.err)
	return bins.dir
}

// invocation is one execution of a plugin, as a runtime makes it: the CNI
// environment variables and the configuration on stdin.
type invocation struct {
	command, containerID, netns, ifName, args string
}

// environ returns the environment of the invocation: CNI_PATH is dir, and
// empty variables are left out, as runtimes leave them out.
func (iv invocation) environ(dir string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "CNI_PATH=" + dir, "CNI_COMMAND=" + iv.command}
	for k, v := range map[string]string{"CNI_CONTAINERID": iv.containerID, "CNI_NETNS": iv.netns, "CNI_IFNAME": iv.ifName, "CNI_ARGS": iv.args} {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// execPlugin runs the plugin binary with iv and conf in the current
// namespace, with the CNI project's own executor; a failure is the
// plugin's *types.Error when it printed one.
func execPlugin(t testing.TB, iv invocation, conf []byte) ([]byte, error) {
	t.Helper()
	dir := binDir(t)
	var stderr bytes.Buffer
	out, err := (&invoke.RawExec{Stderr: &stderr}).ExecPlugin(context.Background(), filepath.Join(dir, "nodeplane"), conf, iv.environ(dir))
	if stderr.Len() > 0 {
		t.Logf("plugin stderr (%s): %s", iv.command, strings.TrimSpace(stderr.String()))
	}
	return out, err
}

// cniCode returns the CNI error code of err, or 0 when err is not a CNI error.
func cniCode(err error) uint {
	if e := (*types.Error)(nil); errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// pluginConf returns the configuration of the plugin alone (as a runtime
// hands it over for one list entry) with extra top-level keys.
func pluginConf(t testing.TB, version, name string, plugin map[string]any, extra map[string]any) []byte {
	t.Helper()
	c := map[string]any{"cniVersion": version, "name": name}
	for k, v := range plugin {
		c[k] = v
	}
	for k, v := range extra {
		c[k] = v
	}
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return b
}

//go:build linux

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// TestKernelAgentInstallsCNI runs the agent with the CNI installation in a
// node namespace: it installs the plugin and writes the configuration list
// for its pod CIDR; a runtime (libcni, in the node's namespace) attaches a
// pod with that list once the agent has written the pod MTU; the agent
// routes the pod's address, learnt from the cluster file, to the interface
// the plugin made, and pod and node reach each other. DEL removes the pod's
// interface and RemoveCNI the installation.
func TestKernelAgentInstallsCNI(t *testing.T) {
	kerneltest.RequireCommands(t, "ip", "nft", "ping")
	node := newNode(t)
	dir := t.TempDir()
	binDir, confDir, built := filepath.Join(dir, "bin"), filepath.Join(dir, "net.d"), t.TempDir()
	for name, pkg := range map[string]string{
		CNIPluginBinary: "github.com/nodeplane/nodeplane/examples/cni/cmd/nodeplane-cni",
		"host-local":    "github.com/containernetworking/plugins/plugins/ipam/host-local",
	} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(built, name), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v: %s", pkg, err, out)
		}
	}
	file := filepath.Join(dir, "cluster.yaml")
	cidr := netip.MustParsePrefix("10.244.1.0/24")
	c := datastore.Cluster{
		Nodes: []datastore.Node{{Name: "node1", UnderlayIPv4: netip.MustParseAddr("198.18.0.1"), PodCIDRs: []netip.Prefix{cidr}}},
		Pools: []datastore.Pool{{Name: "default", CIDR: netip.MustParsePrefix("10.244.0.0/16")}},
	}
	c.Normalize()
	if err := datastore.WriteFile(file, c); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(dir, "state")
	cfg := Config{NodeName: "node1", NetNS: node.Path(), Listen: "-", StateDir: stateDir, Overlay: OverlayDirect,
		Netfilter: NetfilterNFTables, WireGuardInterface: fmt.Sprintf("wgc%d", os.Getpid()%100000)}
	cfg.Datastore = WithCNIInstall(&datastore.File{Path: file}, CNIInstallOptions{BinDir: binDir, ConfDir: confDir,
		NodeName: "node1", Plugin: filepath.Join(built, CNIPluginBinary), MTUFile: filepath.Join(stateDir, MTUFileName)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		cfg.Datastore = nil
		if err := Cleanup(context.Background(), cfg); err != nil {
			t.Error(err)
		}
	}()
	waitFor := func(what string, ok func() error) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for err := ok(); err != nil; err = ok() {
			select {
			case err := <-done:
				t.Fatalf("the agent stopped: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// The installation: the plugin, and a list a runtime loads. host-local
	// is the runtime's (copied here); its reservations go to the test's
	// directory instead of /var/lib/cni.
	var list *libcni.NetworkConfigList
	waitFor("the configuration list", func() (err error) {
		list, err = libcni.NetworkConfFromFile(filepath.Join(confDir, CNIConfFileName))
		return err
	})
	if _, err := os.Stat(filepath.Join(binDir, CNIPluginType)); err != nil {
		t.Fatal(err)
	}
	hl, err := os.ReadFile(filepath.Join(built, "host-local"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(binDir, "host-local"), hl, 0o755); err != nil {
		t.Fatal(err)
	}
	var entry map[string]any
	if err := json.Unmarshal(list.Plugins[0].Bytes, &entry); err != nil {
		t.Fatal(err)
	}
	entry["ipam"].(map[string]any)["dataDir"] = t.TempDir()
	pc, err := libcni.InjectConf(list.Plugins[0], map[string]any{"ipam": entry["ipam"]})
	if err != nil {
		t.Fatal(err)
	}
	list.Plugins[0] = pc

	// ADD, as a runtime makes it from the node's namespace; until the agent
	// has written the pod MTU the plugin asks to try again later.
	pod := kerneltest.NewNS(t)
	cni := libcni.NewCNIConfigWithCacheDir([]string{binDir}, t.TempDir(), nil)
	rt := &libcni.RuntimeConf{ContainerID: "c-web", NetNS: pod.Path(), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "demo"}, {"K8S_POD_NAME", "web"}}}
	var r types.Result
	var addErr error
	waitFor("CNI ADD", func() error {
		addErr = node.Do(func() (err error) {
			r, err = cni.AddNetworkList(context.Background(), list, rt)
			return err
		})
		if e := (*types.Error)(nil); errors.As(addErr, &e) && e.Code == types.ErrTryAgainLater {
			return addErr
		}
		return nil
	})
	if addErr != nil {
		t.Fatalf("ADD: %v", addErr)
	}
	res, err := current.NewResultFromResult(r)
	if err != nil {
		t.Fatal(err)
	}
	podIP, _ := netip.AddrFromSlice(res.IPs[0].Address.IP)
	podIP = podIP.Unmap()
	if !cidr.Contains(podIP) {
		t.Fatalf("pod address %s is outside %s", podIP, cidr)
	}
	hostIf := datastore.PodInterface("demo", "web")
	if res.Interfaces[0].Name != hostIf {
		t.Fatalf("host side %s, want %s", res.Interfaces[0].Name, hostIf)
	}

	// The kubelet reports the pod's address; the agent routes it.
	c.Pods = []datastore.Pod{{Namespace: "demo", Name: "web", Node: "node1", IPs: []netip.Addr{podIP}}}
	c.Normalize()
	if err := datastore.WriteFile(file, c); err != nil {
		t.Fatal(err)
	}
	waitFor("the agent's route to the pod", func() error {
		out, err := node.Exec(context.Background(), "ip", "route", "show", podIP.String()+"/32", "proto", "78")
		if err == nil && !strings.Contains(string(out), "dev "+hostIf) {
			err = fmt.Errorf("routes: %q", out)
		}
		return err
	})
	kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(pod, netip.MustParseAddr("198.18.0.1")))
	kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(node, podIP))
	if err := node.Do(func() error { return cni.CheckNetworkList(context.Background(), list, rt) }); err != nil {
		t.Fatalf("CHECK: %v", err)
	}

	if err := node.Do(func() error { return cni.DelNetworkList(context.Background(), list, rt) }); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if _, err := node.Handle().LinkByName(hostIf); err == nil {
		t.Fatalf("%s is still there after DEL", hostIf)
	}
	if err := RemoveCNI(binDir, confDir); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{filepath.Join(binDir, CNIPluginType), filepath.Join(confDir, CNIConfFileName)} {
		if _, err := os.Stat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after RemoveCNI: %v", gone, err)
		}
	}
}

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubelet is a small stand-in for a node's kubelet and container runtime:
// for every Pod bound to its node (hostNetwork pods aside) it makes a
// network namespace, calls the CNI plugin the agent installed with the
// configuration list the agent wrote (ADD, as a runtime does, from the
// node's namespace), and reports the addresses the plugin gave (IPv4 and
// IPv6) in the Pod's status through the API.
type kubelet struct {
	t        *testing.T
	node     string
	nodeNS   string
	binDir   string // the agent's --cni-bin-dir (nodeplane and host-local)
	confDir  string // the agent's --cni-conf-dir
	ipamDir  string // host-local's reservations
	cs       kubernetes.Interface
	spaces   *netnsSet
	mu       sync.Mutex
	pods     map[string]*podNet // by namespace/name
	failures map[string]string  // last ADD error by pod, logged once
}

// podNet is what the stand-in made for one Pod.
type podNet struct {
	name, ns string        // Pod name, network namespace
	ip       netip.Addr    // IPv4
	ip6      netip.Addr    // IPv6 (invalid when the plugin gave none)
	took     time.Duration // from first seen to status reported
	reported time.Time
}

func (k *kubelet) run(ctx context.Context) {
	k.pods, k.failures = map[string]*podNet{}, map[string]string{}
	seen := map[string]time.Time{}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		list, err := k.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + k.node})
		if err == nil {
			for i := range list.Items {
				p := &list.Items[i]
				key := p.Namespace + "/" + p.Name
				if p.Spec.HostNetwork || p.DeletionTimestamp != nil || k.get(key) != nil {
					continue
				}
				if _, ok := seen[key]; !ok {
					seen[key] = time.Now()
				}
				pn, err := k.setUp(ctx, p)
				if err != nil {
					if k.failures[key] != err.Error() {
						k.failures[key] = err.Error()
						k.t.Logf("kubelet %s: pod %s: %v (retrying)", k.node, key, err)
					}
					continue
				}
				pn.took, pn.reported = time.Since(seen[key]), time.Now()
				k.mu.Lock()
				k.pods[key] = pn
				k.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (k *kubelet) get(key string) *podNet {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pods[key]
}

// setUp gives pod p its network and reports its IP.
func (k *kubelet) setUp(ctx context.Context, p *corev1.Pod) (*podNet, error) {
	conflist, err := os.ReadFile(filepath.Join(k.confDir, "10-nodeplane.conflist"))
	if err != nil {
		return nil, fmt.Errorf("no CNI configuration yet: %w", err)
	}
	conf, err := pluginConf(conflist, k.ipamDir)
	if err != nil {
		return nil, err
	}
	short := strings.TrimPrefix(p.Name, "pod-")
	ns := k.spaces.prefix + short
	if _, err := os.Stat(nsPath(ns)); err != nil {
		if ns, err = k.spaces.add(short); err != nil {
			return nil, err
		}
	}
	out, err := k.cni("ADD", string(p.UID), ns, p, conf)
	if err != nil {
		return nil, err
	}
	var res struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.IPs) == 0 {
		return nil, fmt.Errorf("CNI result %s: %v", out, err)
	}
	pn := &podNet{name: p.Name, ns: ns}
	for _, r := range res.IPs {
		pfx, err := netip.ParsePrefix(r.Address)
		if err != nil {
			return nil, fmt.Errorf("CNI result %s: %w", out, err)
		}
		switch a := pfx.Addr(); {
		case a.Is4() && !pn.ip.IsValid():
			pn.ip = a
		case a.Is6() && !pn.ip6.IsValid():
			pn.ip6 = a
		}
	}
	if !pn.ip.IsValid() {
		return nil, fmt.Errorf("CNI result %s: no IPv4 address", out)
	}
	now := metav1.Now()
	p = p.DeepCopy()
	p.Status.Phase = corev1.PodRunning
	// IPv4 first, as the node's pod CIDRs (the kubelet orders them so).
	p.Status.PodIP = pn.ip.String()
	p.Status.PodIPs = []corev1.PodIP{{IP: pn.ip.String()}}
	if pn.ip6.IsValid() {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: pn.ip6.String()})
	}
	p.Status.StartTime = &now
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	if _, err := k.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("report pod IP: %w", err)
	}
	return pn, nil
}

// pluginConf turns the agent's configuration list into the configuration of
// its one plugin, as a runtime hands it over, host-local's reservations
// kept in dataDir.
func pluginConf(conflist []byte, dataDir string) ([]byte, error) {
	var list struct {
		CNIVersion string           `json:"cniVersion"`
		Name       string           `json:"name"`
		Plugins    []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(conflist, &list); err != nil {
		return nil, err
	}
	if len(list.Plugins) != 1 {
		return nil, fmt.Errorf("conflist has %d plugins, want 1", len(list.Plugins))
	}
	c := list.Plugins[0]
	c["cniVersion"], c["name"] = list.CNIVersion, list.Name
	if ipam, ok := c["ipam"].(map[string]any); ok {
		ipam["dataDir"] = dataDir
	}
	return json.Marshal(c)
}

// cni runs the plugin in the node's namespace, as the node's runtime would.
func (k *kubelet) cni(command, containerID, podNS string, p *corev1.Pod, conf []byte) ([]byte, error) {
	plugin := filepath.Join(k.binDir, "nodeplane")
	cmd := exec.Command("ip", "netns", "exec", k.nodeNS, plugin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "CNI_COMMAND=" + command, "CNI_CONTAINERID=" + containerID,
		"CNI_NETNS=" + nsPath(podNS), "CNI_IFNAME=eth0", "CNI_PATH=" + k.binDir,
		"CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=" + p.Namespace + ";K8S_POD_NAME=" + p.Name}
	cmd.Stdin = bytes.NewReader(conf)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("CNI %s: %v: %s %s", command, err, bytes.TrimSpace(out), bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

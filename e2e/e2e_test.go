// Package e2e runs the reference agent (examples/nodeagent) and its CNI
// plugin against a real kube-apiserver and etcd, built from their Go
// modules by build-k8s.sh: `make e2e` (root; opt-in, not part of make test).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	k8sds "github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
)

const (
	podNamespace = "e2e"
	agentNS      = "nodeplane-system"
	backendPort  = 8080
)

// node is one "node": a network namespace on the underlay, its agent and
// its kubelet stand-in.
type node struct {
	name      string
	ns        string
	underlay  netip.Addr
	podCIDR   netip.Prefix
	dir       string
	listen    string
	agent     *proc
	kubeconf  string
	client    kubernetes.Interface // with the agent's credentials
	kubelet   *kubelet
	agentPod  *corev1.Pod
	startedAt time.Time
}

// env is the whole test bed.
type env struct {
	t       *testing.T
	work    string
	bins    string // nodeagent, nodeplane-cni, host-local
	bpfDir  string
	cp      *controlPlane
	cs      kubernetes.Interface
	spaces  *netnsSet
	nodes   []*node
	timings [][2]string
	podsAt  time.Time       // when the Pods were created
	serving map[string]bool // pods whose backend listens
}

func (e *env) timing(what string, d time.Duration) {
	e.timings = append(e.timings, [2]string{what, d.Round(time.Millisecond).String()})
	e.t.Logf("timing: %s: %v", what, d.Round(time.Millisecond))
}

func TestE2E(t *testing.T) {
	if os.Getenv("E2E") != "1" {
		t.Skip("set E2E=1 (make e2e) to run against a real kube-apiserver and etcd")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the end-to-end test needs root (network namespaces, BPF)")
	}
	total := time.Now()
	e := &env{t: t, serving: map[string]bool{}}
	k8sBin := e.k8sBinaries()

	var err error
	removeStale(t)
	if e.work, err = os.MkdirTemp("", workPattern()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("E2E_KEEP") != "" {
			t.Logf("logs kept in %s (agents: nX/agent.log; apiserver.log, etcd.log)", e.work)
			return
		}
		_ = os.RemoveAll(e.work)
	})
	e.buildAgent()

	e.cp = startControlPlane(t, k8sBin, e.work)
	if e.cs, err = kubernetes.NewForConfig(e.cp.admin); err != nil {
		t.Fatal(err)
	}

	e.spaces = &netnsSet{prefix: nsPrefix()}
	t.Cleanup(func() {
		for _, err := range e.spaces.deleteAll() {
			t.Error(err)
		}
	})
	stop := onInterrupt(func() {
		for _, n := range e.nodes {
			if n.agent != nil {
				n.agent.stop(syscall.SIGKILL, time.Second)
			}
		}
		e.cp.stop()
		e.spaces.deleteAll()
		if e.bpfDir != "" {
			_ = unix.Unmount(e.bpfDir, unix.MNT_DETACH)
		}
		fmt.Fprintf(os.Stderr, "e2e: interrupted; logs in %s\n", e.work)
	})
	t.Cleanup(stop)
	e.underlay()
	e.mountBPFFS()
	e.applyManifests()
	e.createNodes()
	e.waitAdmissionPolicy()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	start := time.Now()
	for _, n := range e.nodes {
		e.startAgent(n)
		go n.kubelet.run(ctx)
	}
	e.createPods()

	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"1-agents-ready-and-annotate", func(t *testing.T) { e.stepReady(t, start) }},
		{"2-pod-to-pod-vxlan", e.stepPodToPod},
		{"3-clusterip-bpf-proxy", e.stepService},
		{"4-network-policy", e.stepPolicy},
		{"5-apiserver-outage", e.stepOutage},
		{"6-node-reregistration", e.stepReregister},
		{"7-sigterm", e.stepSigterm},
		{"8-restart-with-wireguard", e.stepWireGuard},
	}
	for i, s := range steps {
		st := time.Now()
		ok := t.Run(s.name, s.fn)
		e.timing("step "+s.name, time.Since(st))
		if !ok && i == 0 {
			t.Fatal("the agents are not ready: the other steps cannot run")
		}
	}
	e.timing("whole test (after the build)", time.Since(total))
	var b strings.Builder
	for _, tm := range e.timings {
		fmt.Fprintf(&b, "\n  %-60s %s", tm[0], tm[1])
	}
	t.Logf("timings:%s", b.String())
}

// k8sBinaries returns the directory of kube-apiserver and etcd: E2E_K8S_BIN
// (made by scripts/e2e.sh), else what build-k8s.sh builds or has cached.
func (e *env) k8sBinaries() string {
	if dir := os.Getenv("E2E_K8S_BIN"); dir != "" {
		e.t.Logf("timing: kube-apiserver and etcd build: %s (by scripts/e2e.sh)", os.Getenv("E2E_BUILD_TIME"))
		return dir
	}
	start := time.Now()
	cmd := exec.Command("./build-k8s.sh")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("build-k8s.sh: %v", err)
	}
	e.timing("kube-apiserver and etcd build (cached when seconds)", time.Since(start))
	return strings.TrimSpace(string(out))
}

// buildAgent builds the agent, the CNI plugin and host-local in the
// examples module.
func (e *env) buildAgent() {
	start := time.Now()
	e.bins = filepath.Join(e.work, "bin")
	cmd := exec.Command("go", "build", "-C", "../examples", "-o", e.bins+"/",
		"./nodeagent", "./cni/cmd/nodeplane-cni", "github.com/containernetworking/plugins/plugins/ipam/host-local")
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("go build: %v: %s", err, out)
	}
	e.timing("go build nodeagent, nodeplane-cni, host-local", time.Since(start))
}

// underlay makes a switch namespace with a bridge and two node namespaces
// plugged into it: 198.18.0.N/24 on their eth0.
func (e *env) underlay() {
	t := e.t
	sw, err := e.spaces.add("sw")
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Helper()
			t.Fatal(err)
		}
	}
	must(ipCmd("-n", sw, "link", "add", "br0", "type", "bridge"))
	must(ipCmd("-n", sw, "link", "set", "br0", "up"))
	for i := 1; i <= 2; i++ {
		n := &node{name: fmt.Sprintf("node%d", i), underlay: netip.AddrFrom4([4]byte{198, 18, 0, byte(i)}),
			podCIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 24),
			dir:     filepath.Join(e.work, fmt.Sprintf("n%d", i))}
		if n.ns, err = e.spaces.add(fmt.Sprintf("n%d", i)); err != nil {
			t.Fatal(err)
		}
		port := fmt.Sprintf("h%d", i)
		must(ipCmd("-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", n.ns))
		must(ipCmd("-n", sw, "link", "set", port, "master", "br0", "up"))
		must(ipCmd("-n", n.ns, "addr", "add", netip.PrefixFrom(n.underlay, 24).String(), "dev", "eth0"))
		must(ipCmd("-n", n.ns, "link", "set", "eth0", "up"))
		for _, d := range []string{"state", "cni-bin", "cni-conf", "ipam"} {
			must(os.MkdirAll(filepath.Join(n.dir, d), 0o755))
		}
		// host-local where the runtime looks for IPAM plugins; the agent
		// installs its own plugin there (--cni-install).
		b, err := os.ReadFile(filepath.Join(e.bins, "host-local"))
		must(err)
		must(os.WriteFile(filepath.Join(n.dir, "cni-bin", "host-local"), b, 0o755))
		p, err := freePort()
		must(err)
		n.listen = fmt.Sprintf("127.0.0.1:%d", p)
		e.nodes = append(e.nodes, n)
	}
}

// mountBPFFS mounts a bpffs for the agents' pins in the work directory,
// unmounted at the end (the host's /sys/fs/bpf is not used).
func (e *env) mountBPFFS() {
	e.bpfDir = filepath.Join(e.work, "bpf")
	if err := os.MkdirAll(e.bpfDir, 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := unix.Mount("bpf", e.bpfDir, "bpf", 0, "mode=0700"); err != nil {
		e.t.Fatalf("mount bpffs: %v", err)
	}
	e.t.Cleanup(func() { _ = unix.Unmount(e.bpfDir, unix.MNT_DETACH) })
}

// applyManifests creates what examples/deploy's rbac.yaml and
// admission-policy.yaml hold, as kubectl apply would.
func (e *env) applyManifests() {
	ctx := context.Background()
	for _, f := range []string{"../examples/deploy/rbac.yaml", "../examples/deploy/admission-policy.yaml"} {
		data, err := os.ReadFile(f)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
			if err != nil {
				e.t.Fatalf("%s: %v", f, err)
			}
			switch o := obj.(type) {
			case *corev1.Namespace:
				_, err = e.cs.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
			case *corev1.ServiceAccount:
				_, err = e.cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRole:
				_, err = e.cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRoleBinding:
				_, err = e.cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			case *admissionv1.ValidatingAdmissionPolicy:
				_, err = e.cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{})
			case *admissionv1.ValidatingAdmissionPolicyBinding:
				_, err = e.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{})
			default:
				err = fmt.Errorf("unexpected object %T", obj)
			}
			if err != nil {
				e.t.Fatalf("%s: %v", f, err)
			}
		}
	}
	_, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: podNamespace,
		Labels: map[string]string{"team": "e2e"}}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
}

func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func (e *env) nodeObject(n *node) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"kubernetes.io/hostname": n.name}},
		Spec: corev1.NodeSpec{PodCIDR: n.podCIDR.String(), PodCIDRs: []string{n.podCIDR.String()}}}
}

// registerNode creates n's Node with its InternalIP in the status.
func (e *env) registerNode(ctx context.Context, n *node) error {
	obj, err := e.cs.CoreV1().Nodes().Create(ctx, e.nodeObject(n), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	obj.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.underlay.String()},
		{Type: corev1.NodeHostName, Address: n.name}}
	obj.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	_, err = e.cs.CoreV1().Nodes().UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	return err
}

// createNodes registers the Nodes and gives each agent its identity: a
// hostNetwork Pod of the agent on that node (as the DaemonSet's) and a token
// of the nodeplane-agent service account bound to that Pod, which names
// the node (what admission-policy.yaml checks).
func (e *env) createNodes() {
	ctx := context.Background()
	for _, n := range e.nodes {
		if err := e.registerNode(ctx, n); err != nil {
			e.t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nodeplane-agent-" + n.name, Namespace: agentNS},
			Spec: corev1.PodSpec{NodeName: n.name, HostNetwork: true, ServiceAccountName: "nodeplane-agent",
				Containers: []corev1.Container{{Name: "agent", Image: "nodeplane/agent:e2e"}}}}
		var err error
		if n.agentPod, err = e.cs.CoreV1().Pods(agentNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		exp := int64(3600)
		tok, err := e.cs.CoreV1().ServiceAccounts(agentNS).CreateToken(ctx, "nodeplane-agent", &authv1.TokenRequest{
			Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp, BoundObjectRef: &authv1.BoundObjectReference{
				Kind: "Pod", APIVersion: "v1", Name: n.agentPod.Name, UID: n.agentPod.UID}}}, metav1.CreateOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		n.kubeconf = filepath.Join(n.dir, "kubeconfig")
		if err := e.cp.kubeconfig(n.kubeconf, "nodeplane-agent-"+n.name, tok.Status.Token); err != nil {
			e.t.Fatal(err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", n.kubeconf)
		if err != nil {
			e.t.Fatal(err)
		}
		if n.client, err = kubernetes.NewForConfig(cfg); err != nil {
			e.t.Fatal(err)
		}
		n.kubelet = &kubelet{t: e.t, node: n.name, nodeNS: n.ns, binDir: filepath.Join(n.dir, "cni-bin"),
			confDir: filepath.Join(n.dir, "cni-conf"), ipamDir: filepath.Join(n.dir, "ipam"), cs: e.cs, spaces: e.spaces}
	}
}

// waitAdmissionPolicy waits until the API server enforces
// admission-policy.yaml (it loads new policies asynchronously): a dry-run
// patch of node2 by node1's agent is refused.
func (e *env) waitAdmissionPolicy() {
	start := time.Now()
	patch := []byte(`{"metadata":{"annotations":{"nodeplane.io/vxlan-mac":"02:00:00:00:00:99"}}}`)
	if err := waitFor(30*time.Second, func() error {
		_, err := e.nodes[0].client.CoreV1().Nodes().Patch(context.Background(), "node2", types.MergePatchType, patch,
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsForbidden(err) {
			return nil
		}
		return fmt.Errorf("node1's agent may still patch node2: %v", err)
	}); err != nil {
		e.t.Fatal(err)
	}
	e.timing("admission policy created → enforced", time.Since(start))
}

// startAgent starts n's agent: from the test's own namespace (so it reaches
// the API server on loopback), programming n's namespace (--netns).
func (e *env) startAgent(n *node, extra ...string) {
	var err error
	n.startedAt = time.Now()
	n.agent, err = startProc("agent "+n.name, filepath.Join(n.dir, "agent.log"), append([]string{filepath.Join(e.bins, "nodeagent"), "run",
		"--node", n.name, "--netns", nsPath(n.ns),
		"--datastore", "kubernetes", "--kubeconfig", n.kubeconf,
		"--state-dir", filepath.Join(n.dir, "state"), "--listen", n.listen,
		"--netfilter", "nftables", "--bpf-proxy", "--bpf-pin-dir", filepath.Join(e.bpfDir, n.name),
		"--cni-install", "--cni-plugin", filepath.Join(e.bins, "nodeplane-cni"),
		"--cni-bin-dir", filepath.Join(n.dir, "cni-bin"), "--cni-conf-dir", filepath.Join(n.dir, "cni-conf"),
		"--log-format", "json"}, extra...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	a := n.agent
	e.t.Cleanup(func() { a.stop(syscall.SIGTERM, 5*time.Second) })
}

// pods: two per node. pod-1a and pod-2a back the service; pod-1a is the
// policy's client, pod-2b the isolated pod.
var podSpecs = []struct {
	name, node string
	labels     map[string]string
}{
	{"pod-1a", "node1", map[string]string{"app": "echo", "role": "client"}},
	{"pod-1b", "node1", map[string]string{"role": "other"}},
	{"pod-2a", "node2", map[string]string{"app": "echo"}},
	{"pod-2b", "node2", map[string]string{"app": "iso"}},
}

func (e *env) createPods() {
	e.podsAt = time.Now()
	for _, ps := range podSpecs {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ps.name, Namespace: podNamespace, Labels: ps.labels},
			Spec: corev1.PodSpec{NodeName: ps.node, Containers: []corev1.Container{{Name: "c", Image: "e2e/echo",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: backendPort, Protocol: corev1.ProtocolTCP}}}}}}
		if _, err := e.cs.CoreV1().Pods(podNamespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// pod returns the stand-in's record of a pod, nil until it has its IP.
func (e *env) pod(name string) *podNet {
	for _, n := range e.nodes {
		if pn := n.kubelet.get(podNamespace + "/" + name); pn != nil {
			return pn
		}
	}
	return nil
}

func (e *env) node(name string) *node {
	for _, n := range e.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

func agentReady(n *node) error {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + n.listen + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s /readyz: %s: %s", n.name, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

func (e *env) annotation(name string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	obj, err := e.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	v, ok := obj.Annotations[k8sds.AnnotationVTEPMAC]
	if !ok {
		return "", fmt.Errorf("node %s has no %s yet", name, k8sds.AnnotationVTEPMAC)
	}
	return v, nil
}

// stepReady: both agents ready, their VTEP MACs on their Nodes; an agent
// may not annotate another node (admission-policy.yaml).
func (e *env) stepReady(t *testing.T, start time.Time) {
	for _, n := range e.nodes {
		if err := waitFor(90*time.Second, func() error {
			if n.agent.exited() {
				return fmt.Errorf("agent %s exited (see %s)", n.name, n.agent.log)
			}
			return agentReady(n)
		}); err != nil {
			t.Fatal(err)
		}
		e.timing(n.name+" agent start → /readyz 200", time.Since(start))
		var mac string
		if err := waitFor(30*time.Second, func() (err error) { mac, err = e.annotation(n.name); return err }); err != nil {
			t.Fatal(err)
		}
		e.timing(n.name+" agent start → Node annotated", time.Since(start))
		t.Logf("%s: %s=%s", n.name, k8sds.AnnotationVTEPMAC, mac)
	}
	// node1's agent may not change node2, nor another annotation of its own Node.
	ctx := context.Background()
	patch := []byte(`{"metadata":{"annotations":{"nodeplane.io/vxlan-mac":"02:00:00:00:00:99"}}}`)
	dry := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
	_, err := e.nodes[0].client.CoreV1().Nodes().Patch(ctx, "node2", types.MergePatchType, patch, dry)
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("node1's agent patching node2: want Forbidden, got %v", err)
	} else {
		t.Logf("node1's agent patching node2: refused: %v", err)
	}
	_, err = e.nodes[0].client.CoreV1().Nodes().Patch(ctx, "node1", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"example.com/other":"x"}}}`), dry)
	if err == nil {
		t.Errorf("node1's agent set a foreign annotation on node1")
	}
}

// waitPods waits until the stand-ins gave every pod its IP and the backends listen.
func (e *env) waitPods(t *testing.T) {
	if err := waitFor(60*time.Second, func() error {
		for _, ps := range podSpecs {
			if e.pod(ps.name) == nil {
				return fmt.Errorf("pod %s has no network yet", ps.name)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Every pod answers TCP connections to backendPort with its name.
	for _, ps := range podSpecs {
		if e.serving[ps.name] {
			continue
		}
		ln, err := serveName(e.pod(ps.name).ns, backendPort, ps.name)
		if err != nil {
			t.Fatal(err)
		}
		e.serving[ps.name] = true
		e.t.Cleanup(func() { ln.Close() })
	}
}

func (e *env) stepPodToPod(t *testing.T) {
	e.waitPods(t)
	var last time.Duration
	for _, ps := range podSpecs {
		last = max(last, e.pod(ps.name).reported.Sub(e.podsAt))
	}
	e.timing("pods created → all 4 have IPs in their status (CNI ADD + status)", last)
	for _, ps := range podSpecs {
		pn := e.pod(ps.name)
		t.Logf("%s on %s: %v (netns %s, host veth %s, set up in %v)", ps.name, ps.node, pn.ip, pn.ns,
			datastore.PodInterface(podNamespace, ps.name), pn.took.Round(time.Millisecond))
	}
	for _, pair := range [][2]string{{"pod-1a", "pod-2a"}, {"pod-2b", "pod-1b"}} {
		from, to := e.pod(pair[0]), e.pod(pair[1])
		st := time.Now()
		if err := waitFor(30*time.Second, func() error { return ping(from.ns, to.ip) }); err != nil {
			t.Fatal(err)
		}
		e.timing(fmt.Sprintf("first ping %s → %s across nodes", pair[0], pair[1]), time.Since(st))
		got, err := whoami(from.ns, netip.AddrPortFrom(to.ip, backendPort), 2*time.Second)
		if err != nil || got != pair[1] {
			t.Fatalf("TCP %s → %s: %q, %v", pair[0], pair[1], got, err)
		}
	}
}

var clusterIPs = map[string]netip.Addr{}

// createService makes a ClusterIP service and, standing in for the
// EndpointSlice controller, its slice with the given backends.
func (e *env) createService(t *testing.T, name string, backends ...string) netip.Addr {
	ctx := context.Background()
	svc, err := e.cs.CoreV1().Services(podNamespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-e2e",
		Labels: map[string]string{discoveryv1.LabelServiceName: name}}, AddressType: discoveryv1.AddressTypeIPv4}
	pname, port, proto := "http", int32(backendPort), corev1.ProtocolTCP
	slice.Ports = []discoveryv1.EndpointPort{{Name: &pname, Port: &port, Protocol: &proto}}
	ready := true
	for _, b := range backends {
		pn := e.pod(b)
		nodeName := ""
		for _, ps := range podSpecs {
			if ps.name == b {
				nodeName = ps.node
			}
		}
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{pn.ip.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}, NodeName: &nodeName,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: podNamespace, Name: b}})
	}
	if _, err := e.cs.DiscoveryV1().EndpointSlices(podNamespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr(svc.Spec.ClusterIP)
	clusterIPs[name] = ip
	return ip
}

// spread connects from ns to to n times and returns the answers by backend.
func spread(ns string, to netip.AddrPort, n int) (map[string]int, error) {
	got := map[string]int{}
	for range n {
		name, err := whoami(ns, to, 2*time.Second)
		if err != nil {
			return got, err
		}
		got[name]++
	}
	return got, nil
}

func (e *env) stepService(t *testing.T) {
	e.waitPods(t)
	ip := e.createService(t, "echo", "pod-1a", "pod-2a")
	to := netip.AddrPortFrom(ip, 80)
	client := e.pod("pod-1b")
	st := time.Now()
	if err := waitFor(30*time.Second, func() error { _, err := whoami(client.ns, to, time.Second); return err }); err != nil {
		t.Fatal(err)
	}
	e.timing("service created → first connection to its cluster IP", time.Since(st))
	var got map[string]int
	if err := waitFor(10*time.Second, func() (err error) {
		got, err = spread(client.ns, to, 20)
		if err == nil && (got["pod-1a"] == 0 || got["pod-2a"] == 0) {
			err = fmt.Errorf("answers %v: not both nodes' backends", got)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("pod-1b → %v: 20 connections answered by %v (backends on node1 and node2)", to, got)
}

func (e *env) stepPolicy(t *testing.T) {
	e.waitPods(t)
	ctx := context.Background()
	iso, client, other := e.pod("pod-2b"), e.pod("pod-1a"), e.pod("pod-1b")
	to := netip.AddrPortFrom(iso.ip, backendPort)
	if _, err := whoami(other.ns, to, 2*time.Second); err != nil {
		t.Fatalf("before the policy pod-1b → pod-2b: %v", err)
	}
	proto := corev1.ProtocolTCP
	port := intstr.FromString("http")
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "iso"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "iso"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &proto, Port: &port}}}}}}
	if _, err := e.cs.NetworkingV1().NetworkPolicies(podNamespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := time.Now()
	if err := waitFor(30*time.Second, func() error {
		if _, err := whoami(other.ns, to, 500*time.Millisecond); err == nil {
			return errors.New("pod-1b still reaches pod-2b")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.timing("NetworkPolicy created → pod-1b denied", time.Since(st))
	if got, err := whoami(client.ns, to, 2*time.Second); err != nil || got != "pod-2b" {
		t.Errorf("the client pod-1a → pod-2b: %q, %v", got, err)
	}
	if got, err := whoami(other.ns, netip.AddrPortFrom(e.pod("pod-2a").ip, backendPort), 2*time.Second); err != nil || got != "pod-2a" {
		t.Errorf("pod-1b → pod-2a (no policy selects it): %q, %v", got, err)
	}
	for range 3 {
		if _, err := whoami(other.ns, to, 500*time.Millisecond); err == nil {
			t.Errorf("pod-1b reached the isolated pod-2b")
		}
	}
}

// dataplaneWorks pings across nodes and connects through the service.
func (e *env) dataplaneWorks() error {
	if err := ping(e.pod("pod-1a").ns, e.pod("pod-2a").ip); err != nil {
		return err
	}
	if ip, ok := clusterIPs["echo"]; ok {
		if _, err := whoami(e.pod("pod-1b").ns, netip.AddrPortFrom(ip, 80), 2*time.Second); err != nil {
			return fmt.Errorf("service: %w", err)
		}
	}
	return nil
}

func (e *env) stepOutage(t *testing.T) {
	e.waitPods(t)
	ctx := context.Background()
	if err := e.dataplaneWorks(); err != nil {
		t.Fatalf("before the outage: %v", err)
	}
	e.cp.api.stop(syscall.SIGKILL, 5*time.Second)
	t.Log("kube-apiserver killed (SIGKILL)")
	outage := time.Now()
	samples := 0
	for time.Since(outage) < 8*time.Second {
		if err := e.dataplaneWorks(); err != nil {
			t.Errorf("during the outage (after %v): %v", time.Since(outage).Round(time.Millisecond), err)
		}
		for _, n := range e.nodes {
			if n.agent.exited() {
				t.Fatalf("agent %s exited during the outage (see %s)", n.name, n.agent.log)
			}
		}
		samples++
		time.Sleep(300 * time.Millisecond)
	}
	// The agents stay ready (their dataplane works) and say that their
	// datastore is disconnected, and since when.
	for _, n := range e.nodes {
		if err := agentReady(n); err != nil {
			t.Errorf("%s during the outage: %v", n.name, err)
		}
		connected, since, err := agentDatastore(n)
		switch {
		case err != nil:
			t.Errorf("%s during the outage: %v", n.name, err)
		case connected:
			t.Errorf("%s during the outage: its status says the datastore is connected", n.name)
		default:
			t.Logf("%s during the outage: /readyz 200, datastore disconnected for %v (the outage began %v ago)", n.name,
				time.Since(since).Round(time.Millisecond), time.Since(outage).Round(time.Millisecond))
		}
		if v, err := agentMetric(n, "nodeplane_agent_datastore_connected"); err != nil || v != "0" {
			t.Errorf("%s during the outage: nodeplane_agent_datastore_connected = %q, %v; want 0", n.name, v, err)
		}
	}
	t.Logf("%d samples over %v of outage: ping across nodes and the service kept working", samples, time.Since(outage).Round(time.Millisecond))
	st := time.Now()
	if err := e.cp.startAPIServer(); err != nil {
		t.Fatal(err)
	}
	e.timing("kube-apiserver restart → /readyz", time.Since(st))
	e.timing("apiserver outage (down time)", time.Since(outage))
	// The agents see changes again: the policy goes (node2 lets pod-1b in),
	// a new service appears (node1's proxy translates it). The agents
	// catch up as soon as they find the server back (they ask it about
	// once a second while it is down), not after client-go's backoff.
	st = time.Now()
	if err := e.cs.NetworkingV1().NetworkPolicies(podNamespace).Delete(ctx, "iso", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	ip := e.createService(t, "echo2", "pod-2a")
	var policyGone, serviceThere time.Duration
	if err := waitFor(30*time.Second, func() error {
		var errs []error
		if policyGone == 0 {
			if _, err := whoami(e.pod("pod-1b").ns, netip.AddrPortFrom(e.pod("pod-2b").ip, backendPort), 300*time.Millisecond); err != nil {
				errs = append(errs, fmt.Errorf("policy deletion not applied by node2: %w", err))
			} else {
				policyGone = time.Since(st)
			}
		}
		if serviceThere == 0 {
			got, err := whoami(e.pod("pod-1b").ns, netip.AddrPortFrom(ip, 80), 300*time.Millisecond)
			if err != nil || got != "pod-2a" {
				errs = append(errs, fmt.Errorf("new service %v not applied by node1: %q, %v", ip, got, err))
			} else {
				serviceThere = time.Since(st)
			}
		}
		return errors.Join(errs...)
	}); err != nil {
		t.Fatal(err)
	}
	e.timing("apiserver back → node2 applied the policy's deletion", policyGone)
	e.timing("apiserver back → node1 applied a new service (catch-up)", serviceThere)
	for _, n := range e.nodes {
		if err := waitFor(30*time.Second, func() error { return agentReady(n) }); err != nil {
			t.Error(err)
		}
		if err := waitFor(30*time.Second, func() error {
			if connected, _, err := agentDatastore(n); err != nil || !connected {
				return fmt.Errorf("%s after the outage: datastore connected %v, %v", n.name, connected, err)
			}
			if v, err := agentMetric(n, "nodeplane_agent_datastore_connected"); err != nil || v != "1" {
				return fmt.Errorf("%s after the outage: nodeplane_agent_datastore_connected = %q, %v", n.name, v, err)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	}
}

// agentDatastore returns what n's agent says of its datastore's link to
// the API server (GET /status).
func agentDatastore(n *node) (connected bool, since time.Time, err error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + n.listen + "/status")
	if err != nil {
		return false, time.Time{}, err
	}
	defer resp.Body.Close()
	var st struct {
		Datastore *struct {
			Connected bool      `json:"connected"`
			Since     time.Time `json:"since"`
		} `json:"datastore"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return false, time.Time{}, fmt.Errorf("%s /status: %w", n.name, err)
	}
	if st.Datastore == nil {
		return false, time.Time{}, fmt.Errorf("%s /status has no datastore link", n.name)
	}
	return st.Datastore.Connected, st.Datastore.Since, nil
}

// agentMetric returns the value of the unlabelled metric name that n's
// agent serves.
func agentMetric(n *node, name string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + n.listen + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s serves no %s", n.name, name)
}

func (e *env) stepReregister(t *testing.T) {
	e.waitPods(t)
	ctx := context.Background()
	n2 := e.node("node2")
	if err := e.cs.CoreV1().Nodes().Delete(ctx, n2.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(10*time.Second, func() error {
		_, err := e.cs.CoreV1().Nodes().Get(ctx, n2.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("node2 still there: %v", err)
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // let the agents see the deletion
	st := time.Now()
	if err := e.registerNode(ctx, n2); err != nil {
		t.Fatal(err)
	}
	var mac string
	if err := waitFor(30*time.Second, func() (err error) { mac, err = e.annotation(n2.name); return err }); err != nil {
		t.Fatal(err)
	}
	e.timing("node2 re-created → annotation back", time.Since(st))
	t.Logf("node2 re-annotated: %s=%s", k8sds.AnnotationVTEPMAC, mac)
	if err := waitFor(30*time.Second, func() error { return ping(e.pod("pod-1a").ns, e.pod("pod-2a").ip) }); err != nil {
		t.Fatalf("after re-registration: %v", err)
	}
	e.timing("node2 re-created → ping across nodes again", time.Since(st))
}

func (e *env) stepSigterm(t *testing.T) {
	e.waitPods(t)
	for _, n := range e.nodes {
		took := n.agent.stop(syscall.SIGTERM, 10*time.Second)
		e.timing(n.name+" agent SIGTERM → exit", took)
		if took > 2*time.Second {
			t.Errorf("%s's agent took %v to exit after SIGTERM (want < 2 s)", n.name, took)
		}
		if st := n.agent.cmd.ProcessState; st != nil {
			t.Logf("%s's agent: %v", n.name, st)
		}
	}
	// The dataplane stays: pods still reach each other across nodes.
	if err := e.dataplaneWorks(); err != nil {
		t.Errorf("with both agents stopped: %v", err)
	}
}

// wgRX returns the bytes n's WireGuard device received (sysfs shows the
// host's namespace, so ip -s -j reads them).
func wgRX(n *node, dev string) (int64, error) {
	out, err := exec.Command("ip", "-n", n.ns, "-s", "-j", "link", "show", "dev", dev).Output()
	if err != nil {
		return 0, fmt.Errorf("ip -n %s link show dev %s: %w", n.ns, dev, err)
	}
	var links []struct {
		Stats struct {
			RX struct {
				Bytes int64 `json:"bytes"`
			} `json:"rx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		return 0, fmt.Errorf("ip -s -j link show dev %s: %s: %v", dev, out, err)
	}
	return links[0].Stats.RX.Bytes, nil
}

// stepWireGuard restarts both agents with --wireguard: they adopt the
// dataplane they left, publish their public keys on their Nodes, and pod
// traffic across nodes goes through the WireGuard devices.
func (e *env) stepWireGuard(t *testing.T) {
	e.waitPods(t)
	start := time.Now()
	for i, n := range e.nodes {
		e.startAgent(n, "--wireguard", "--wireguard-interface", fmt.Sprintf("wgnp%d", i+1))
	}
	for _, n := range e.nodes {
		if err := waitFor(60*time.Second, func() error {
			if n.agent.exited() {
				return fmt.Errorf("agent %s exited (see %s)", n.name, n.agent.log)
			}
			return agentReady(n)
		}); err != nil {
			t.Fatal(err)
		}
		if err := waitFor(30*time.Second, func() error {
			obj, err := e.cs.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if obj.Annotations[k8sds.AnnotationWireGuardKey] == "" {
				return fmt.Errorf("node %s has no %s yet", n.name, k8sds.AnnotationWireGuardKey)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	e.timing("agents restarted with --wireguard → ready, keys on the Nodes", time.Since(start))
	n2 := e.node("node2")
	var before int64
	if err := waitFor(30*time.Second, func() (err error) { before, err = wgRX(n2, "wgnp2"); return err }); err != nil {
		t.Fatal(err)
	}
	st := time.Now()
	if err := waitFor(30*time.Second, func() error {
		if err := ping(e.pod("pod-1a").ns, e.pod("pod-2a").ip); err != nil {
			return err
		}
		after, err := wgRX(n2, "wgnp2")
		if err != nil {
			return err
		}
		if after <= before {
			return fmt.Errorf("the ping did not come through node2's WireGuard device (rx %d → %d)", before, after)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.timing("WireGuard on → ping across nodes through the WireGuard device", time.Since(st))
	if ip, ok := clusterIPs["echo"]; ok {
		if got, err := whoami(e.pod("pod-1b").ns, netip.AddrPortFrom(ip, 80), 2*time.Second); err != nil {
			t.Errorf("service after the restart: %q, %v", got, err)
		}
	}
}

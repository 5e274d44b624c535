// Package e2e runs the reference agent (examples/nodeagent) and its CNI
// plugin against a real kube-apiserver and etcd, built from their Go
// modules by build-k8s.sh: `make e2e` (root; opt-in, not part of make test).
package e2e

import (
	"bytes"
	"context"
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
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

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
	underlay  netip.Addr   // IPv4, on eth0
	underlay6 netip.Addr   // IPv6, on eth0
	podCIDR   netip.Prefix // IPv4
	podCIDR6  netip.Prefix // IPv6
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
	ext     string // the external client's namespace, on the underlay
	timings [][2]string
	podsAt  time.Time       // when the Pods were created
	serving map[string]bool // pods whose backend listens
	// services are the cluster IPs of the services the test made, by
	// name, IPv4 first.
	services map[string][]netip.Addr
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
	e := &env{t: t, serving: map[string]bool{}, services: map[string][]netip.Addr{}}
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
		{"3-pod-to-pod-vxlan-ipv6", e.stepPodToPod6},
		{"4-clusterip-bpf-proxy", e.stepService},
		{"5-clusterip-dual-stack", e.stepDualStackService},
		{"6-nodeport-external-client", e.stepNodePort},
		{"7-network-policy", e.stepPolicy},
		{"8-apiserver-outage", e.stepOutage},
		{"9-node-reregistration", e.stepReregister},
		{"10-sigterm", e.stepSigterm},
		{"11-restart-with-wireguard", e.stepWireGuard},
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

// The underlay's addresses: 198.18.0.0/24 and fd00:198:18::/64, node N
// at .N and ::N, the external client at .100 and ::100. Node N's pods take
// their addresses from 10.244.N.0/24 and fd00:244:N::/64.
var (
	underlayV4 = netip.MustParsePrefix("198.18.0.0/24")
	underlayV6 = netip.MustParsePrefix("fd00:198:18::/64")
)

// underlayAddrs returns host i's addresses on the underlay, as prefixes.
func underlayAddrs(i int) (v4, v6 netip.Prefix) {
	a4, a6 := underlayV4.Addr().As4(), underlayV6.Addr().As16()
	a4[3], a6[15] = byte(i), byte(i)
	return netip.PrefixFrom(netip.AddrFrom4(a4), underlayV4.Bits()), netip.PrefixFrom(netip.AddrFrom16(a6), underlayV6.Bits())
}

// plug connects namespace ns to the switch's bridge by port (eth0 in ns)
// with host i's addresses: IPv6 without duplicate address detection, so
// the address is usable at once.
func plug(sw, port, ns string, i int) error {
	v4, v6 := underlayAddrs(i)
	for _, args := range [][]string{
		{"-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"-n", sw, "link", "set", port, "master", "br0", "up"},
		{"-n", ns, "addr", "add", v4.String(), "dev", "eth0"},
		{"-n", ns, "-6", "addr", "add", v6.String(), "dev", "eth0", "nodad"},
		{"-n", ns, "link", "set", "eth0", "up"},
	} {
		if err := ipCmd(args...); err != nil {
			return err
		}
	}
	return nil
}

// extClient is the underlay host number of the external client.
const extClient = 100

// underlay makes a switch namespace with a bridge, two node namespaces and
// the external client's namespace plugged into it (dual stack: see
// underlayAddrs).
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
		v4, v6 := underlayAddrs(i)
		n := &node{name: fmt.Sprintf("node%d", i), underlay: v4.Addr(), underlay6: v6.Addr(),
			podCIDR:  netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 24),
			podCIDR6: netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 2, 0x44, 0, byte(i)}), 64),
			dir:      filepath.Join(e.work, fmt.Sprintf("n%d", i))}
		if n.ns, err = e.spaces.add(fmt.Sprintf("n%d", i)); err != nil {
			t.Fatal(err)
		}
		must(plug(sw, fmt.Sprintf("h%d", i), n.ns, i))
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
	// A host on the underlay that is no node: the NodePorts' client.
	if e.ext, err = e.spaces.add("ext"); err != nil {
		t.Fatal(err)
	}
	must(plug(sw, "hext", e.ext, extClient))
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

// nodeObject is n's Node: dual stack, its IPv4 pod CIDR first (as the
// node IPAM controller gives them on a cluster whose first family is IPv4).
func (e *env) nodeObject(n *node) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"kubernetes.io/hostname": n.name}},
		Spec: corev1.NodeSpec{PodCIDR: n.podCIDR.String(), PodCIDRs: []string{n.podCIDR.String(), n.podCIDR6.String()}}}
}

// registerNode creates n's Node with its InternalIPs (IPv4 and IPv6) in the
// status.
func (e *env) registerNode(ctx context.Context, n *node) error {
	obj, err := e.cs.CoreV1().Nodes().Create(ctx, e.nodeObject(n), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	obj.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.underlay.String()},
		{Type: corev1.NodeInternalIP, Address: n.underlay6.String()}, {Type: corev1.NodeHostName, Address: n.name}}
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
// the API server on loopback), programming n's namespace (--netns), dual
// stack (--ipv6).
func (e *env) startAgent(n *node, extra ...string) {
	var err error
	n.startedAt = time.Now()
	n.agent, err = startProc("agent "+n.name, filepath.Join(n.dir, "agent.log"), append([]string{filepath.Join(e.bins, "nodeagent"), "run",
		"--node", n.name, "--netns", nsPath(n.ns), "--ipv6",
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

// pods: two per node. pod-1a and pod-2a back the services (ClusterIP,
// dual stack, NodePort); pod-1a is the policy's client, pod-2b the
// isolated pod.
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

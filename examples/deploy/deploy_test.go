package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/nodeplane/nodeplane/examples/nodeagent/agent"
)

// The agent's sources the manifests are checked against.
const (
	mainGo   = "../nodeagent/main.go"
	agentDir = "../nodeagent/agent"
)

// manifests are the objects of this directory's manifests, each decoded
// strictly into its typed API object.
type manifests struct {
	namespaces          []corev1.Namespace
	serviceAccounts     []corev1.ServiceAccount
	clusterRoles        []rbacv1.ClusterRole
	clusterRoleBindings []rbacv1.ClusterRoleBinding
	daemonSets          []appsv1.DaemonSet
	policies            []admissionregistrationv1.ValidatingAdmissionPolicy
	policyBindings      []admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

// load reads the kustomization's resources (which must be every other YAML
// file here) and decodes their documents; a kind not listed here, a field
// the type does not have or a field given twice fails the test.
func load(t *testing.T) manifests {
	t.Helper()
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Images     []struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
			NewTag  string `json:"newTag"`
		} `json:"images"`
	}
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml: kind %q", k.Kind)
	}
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return f == "kustomization.yaml" })
	if want := slices.Sorted(slices.Values(k.Resources)); !slices.Equal(files, want) {
		t.Fatalf("kustomization.yaml lists %v; the directory has %v", want, files)
	}
	var m manifests
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for n := 1; ; n++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s, document %d: %v", f, n, err)
			}
			if tm == (metav1.TypeMeta{}) {
				t.Fatalf("%s, document %d: no apiVersion and kind", f, n)
			}
			var into any
			switch tm.APIVersion + " " + tm.Kind {
			case "v1 Namespace":
				into = appendNew(&m.namespaces)
			case "v1 ServiceAccount":
				into = appendNew(&m.serviceAccounts)
			case "rbac.authorization.k8s.io/v1 ClusterRole":
				into = appendNew(&m.clusterRoles)
			case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
				into = appendNew(&m.clusterRoleBindings)
			case "apps/v1 DaemonSet":
				into = appendNew(&m.daemonSets)
			case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy":
				into = appendNew(&m.policies)
			case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding":
				into = appendNew(&m.policyBindings)
			default:
				t.Fatalf("%s, document %d: unexpected %s %s", f, n, tm.APIVersion, tm.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, into); err != nil {
				t.Fatalf("%s, document %d (%s): %v", f, n, tm.Kind, err)
			}
		}
	}
	if len(m.namespaces) != 1 || len(m.serviceAccounts) != 1 || len(m.clusterRoles) != 1 || len(m.clusterRoleBindings) != 1 ||
		len(m.daemonSets) != 1 || len(m.policies) != 1 || len(m.policyBindings) != 1 {
		t.Fatalf("want one each of Namespace, ServiceAccount, ClusterRole, ClusterRoleBinding, DaemonSet, "+
			"ValidatingAdmissionPolicy and its Binding; have %d, %d, %d, %d, %d, %d, %d", len(m.namespaces), len(m.serviceAccounts),
			len(m.clusterRoles), len(m.clusterRoleBindings), len(m.daemonSets), len(m.policies), len(m.policyBindings))
	}
	// The kustomization's image is the one every container runs.
	if len(k.Images) != 1 {
		t.Fatalf("kustomization.yaml: want one image, have %d", len(k.Images))
	}
	ds := m.daemonSets[0]
	for _, c := range slices.Concat(ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers) {
		if name, _, _ := strings.Cut(c.Image, ":"); name != k.Images[0].Name {
			t.Errorf("container %s runs %s, not the kustomization's image %s", c.Name, c.Image, k.Images[0].Name)
		}
	}
	return m
}

// appendNew appends a zero element to s and returns a pointer to it.
func appendNew[T any](s *[]T) *T {
	*s = append(*s, *new(T))
	return &(*s)[len(*s)-1]
}

// flagDef is a flag of "nodeagent run" as main.go defines it.
type flagDef struct {
	// def is its default, when main.go gives it as a string literal or an
	// agent package constant; known says whether it did.
	def   string
	known bool
	// boolean flags may be given without a value.
	boolean bool
}

// agentConstants parses the agent package and returns its exported string
// constants, by "agent.Name".
func agentConstants(t *testing.T) map[string]string {
	t.Helper()
	consts := map[string]string{}
	for _, f := range agentFiles(t) {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) || !name.IsExported() {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						consts["agent."+name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return consts
}

// agentFiles parses the agent package's files, tests left out (every
// platform's: build tags do not matter to what is looked for).
func agentFiles(t *testing.T) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(agentDir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(agentDir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// runFlags parses main.go and returns the flags "nodeagent run" defines:
// those of runCmd and of (*common).register, which it calls.
func runFlags(t *testing.T) map[string]flagDef {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), mainGo, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The agent constants main.go may name as a default.
	consts := agentConstants(t)
	// For each flag.FlagSet method, the index of the flag's name and of its
	// default (-1: none) among the arguments.
	methods := map[string][2]int{
		"String": {0, 1}, "Bool": {0, 1}, "Int": {0, 1}, "Int64": {0, 1}, "Uint": {0, 1}, "Uint64": {0, 1},
		"Float64": {0, 1}, "Duration": {0, 1}, "Func": {0, -1}, "BoolFunc": {0, -1},
		"StringVar": {1, 2}, "BoolVar": {1, 2}, "IntVar": {1, 2}, "Int64Var": {1, 2}, "UintVar": {1, 2},
		"Uint64Var": {1, 2}, "Float64Var": {1, 2}, "DurationVar": {1, 2}, "TextVar": {1, 2}, "Var": {1, -1},
	}
	flags := map[string]flagDef{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || (fn.Name.Name != "runCmd" && fn.Name.Name != "register") {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "fs" {
				return true
			}
			idx, ok := methods[sel.Sel.Name]
			if !ok || len(call.Args) <= idx[0] {
				return true
			}
			lit, ok := call.Args[idx[0]].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("main.go: a flag whose name is not a string literal (%s)", sel.Sel.Name)
				return true
			}
			name, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			fd := flagDef{boolean: strings.HasPrefix(sel.Sel.Name, "Bool")}
			if idx[1] >= 0 && len(call.Args) > idx[1] {
				switch v := call.Args[idx[1]].(type) {
				case *ast.BasicLit:
					if v.Kind == token.STRING {
						fd.def, _ = strconv.Unquote(v.Value)
						fd.known = true
					}
				case *ast.SelectorExpr:
					if x, ok := v.X.(*ast.Ident); ok {
						fd.def, fd.known = consts[x.Name+"."+v.Sel.Name]
					}
				}
			}
			flags[name] = fd
			return true
		})
	}
	for _, want := range []string{"node", "datastore", "listen", "state-dir", "bpf-pin-dir"} {
		if _, ok := flags[want]; !ok {
			t.Fatalf("main.go: no --%s found among run's flags %v (has the flag parsing moved?)", want, flags)
		}
	}
	return flags
}

// handlerPaths parses the agent package and returns the paths its local
// endpoint serves: the patterns given to mux.Handle and mux.HandleFunc in
// (*Agent).handler, without their method.
func handlerPaths(t *testing.T) []string {
	t.Helper()
	var paths []string
	for _, f := range agentFiles(t) {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name != "handler" || fn.Recv == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
					return true
				}
				if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					pattern, _ := strconv.Unquote(lit.Value)
					if i := strings.Index(pattern, "/"); i >= 0 {
						paths = append(paths, pattern[i:])
					}
				}
				return true
			})
		}
	}
	if len(paths) == 0 {
		t.Fatalf("no paths found in %s's (*Agent).handler (has it moved?)", agentDir)
	}
	return paths
}

// agentArgs checks the agent container's arguments against run's flags and
// returns each flag's value, the default where the arguments leave it.
func agentArgs(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	flags := runFlags(t)
	if len(c.Command) != 0 {
		t.Errorf("container %s: command %v replaces the image's entrypoint (nodeagent)", c.Name, c.Command)
	}
	if len(c.Args) == 0 || c.Args[0] != "run" {
		t.Fatalf("container %s: args %v do not start with the run command", c.Name, c.Args)
	}
	values := map[string]string{}
	for name, f := range flags {
		if f.known {
			values[name] = f.def
		}
	}
	for _, a := range c.Args[1:] {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			t.Errorf("container %s: argument %q is not a flag", c.Name, a)
			continue
		}
		f, ok := flags[name]
		if !ok {
			t.Errorf("container %s: --%s is not a flag of nodeagent run (main.go)", c.Name, name)
			continue
		}
		if !hasValue {
			if !f.boolean {
				t.Errorf("container %s: give --%s its value after =", c.Name, name)
				continue
			}
			value = "true"
		}
		values[name] = value
	}
	return values
}

// mountOf returns the agent container's mount under which path lies (the
// deepest) and the host path it comes from: path itself when the volume
// is a host path mounted at the same path inside as on the host.
func mountOf(t *testing.T, spec corev1.PodSpec, c corev1.Container, path string) (corev1.VolumeMount, string) {
	t.Helper()
	var best corev1.VolumeMount
	for _, vm := range c.VolumeMounts {
		if (path == vm.MountPath || strings.HasPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/")) && len(vm.MountPath) > len(best.MountPath) {
			best = vm
		}
	}
	if best.Name == "" {
		t.Errorf("container %s: nothing mounted at %s", c.Name, path)
		return best, ""
	}
	for _, v := range spec.Volumes {
		if v.Name == best.Name {
			if v.HostPath == nil {
				t.Errorf("container %s: %s is volume %s, not a host path", c.Name, best.MountPath, v.Name)
				return best, ""
			}
			return best, v.HostPath.Path + strings.TrimPrefix(path, best.MountPath)
		}
	}
	t.Errorf("container %s: mount %s names no volume %s", c.Name, best.MountPath, best.Name)
	return best, ""
}

func TestDaemonSet(t *testing.T) {
	m := load(t)
	ds, sa := m.daemonSets[0], m.serviceAccounts[0]
	spec := ds.Spec.Template.Spec
	if ds.Namespace != sa.Namespace || spec.ServiceAccountName != sa.Name {
		t.Errorf("DaemonSet %s/%s runs as %s, want the agent's service account %s/%s", ds.Namespace, ds.Name,
			spec.ServiceAccountName, sa.Namespace, sa.Name)
	}
	if ds.Namespace != m.namespaces[0].Name {
		t.Errorf("DaemonSet in namespace %s, the manifests create %s", ds.Namespace, m.namespaces[0].Name)
	}
	if !spec.HostNetwork {
		t.Error("the agent programs the node's network namespace: hostNetwork must be true")
	}
	if spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("dnsPolicy %q; a hostNetwork pod resolving cluster names wants ClusterFirstWithHostNet", spec.DNSPolicy)
	}
	if !slices.ContainsFunc(spec.Tolerations, func(tl corev1.Toleration) bool {
		return tl.Key == "" && tl.Operator == corev1.TolerationOpExists && tl.Effect == ""
	}) {
		t.Error("the agent must tolerate every taint: a node without a pod network is not ready and tainted")
	}
	i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == "agent" })
	if i < 0 || len(spec.Containers) != 1 {
		t.Fatalf("want one container, named agent; have %d", len(spec.Containers))
	}
	c := spec.Containers[0]

	// Privileged, or the capabilities the agent needs.
	if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
		var caps []corev1.Capability
		if sc != nil && sc.Capabilities != nil {
			caps = sc.Capabilities.Add
		}
		for _, want := range []corev1.Capability{"NET_ADMIN", "NET_RAW", "SYS_ADMIN", "BPF", "PERFMON"} {
			if !slices.Contains(caps, want) {
				t.Errorf("container %s is not privileged and lacks %s", c.Name, want)
			}
		}
	}

	// Its flags, and its node name from the pod's.
	args := agentArgs(t, c)
	if args["datastore"] != "kubernetes" {
		t.Errorf("--datastore=%s, want kubernetes", args["datastore"])
	}
	if args["node"] != "$(NODE_NAME)" {
		t.Errorf("--node=%s, want $(NODE_NAME)", args["node"])
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		t.Error("no env NODE_NAME from the field spec.nodeName")
	}

	// The agent installs the CNI plugin, which the image has beside it.
	if args["cni-install"] != "true" {
		t.Errorf("--cni-install=%s: the agent must install the CNI plugin", args["cni-install"])
	}
	if args["cni-plugin"] != "" {
		t.Errorf("--cni-plugin=%s: the image has the plugin beside nodeagent, the flag's default", args["cni-plugin"])
	}
	containerfile, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-o /out/nodeagent ./nodeagent", "-o /out/nodeplane-cni ./cni/cmd/nodeplane-cni",
		"COPY --from=build /out/ /usr/local/bin/", `ENTRYPOINT ["/usr/local/bin/nodeagent"]`} {
		if !bytes.Contains(containerfile, []byte(want)) {
			t.Errorf("Containerfile: no %s (the agent and the plugin, built side by side)", want)
		}
	}

	// The host's paths, mounted where the agent (with these flags) and
	// the CNI plugin on the host expect them.
	for _, p := range []struct{ what, path string }{
		{"--state-dir", args["state-dir"]},
		{"--bpf-pin-dir", args["bpf-pin-dir"]},
		{"--cni-bin-dir", args["cni-bin-dir"]},
		{"--cni-conf-dir", args["cni-conf-dir"]},
		{"named network namespaces", "/run/netns"},
		{"the iptables lock", "/run/xtables.lock"},
	} {
		if p.path == "" {
			t.Errorf("%s: no path", p.what)
			continue
		}
		vm, host := mountOf(t, spec, c, p.path)
		if host != "" && host != p.path {
			t.Errorf("%s: %s inside is the host's %s", p.what, p.path, host)
		}
		if vm.ReadOnly {
			t.Errorf("%s: %s is mounted read-only", p.what, vm.MountPath)
		}
	}
	// The pins outlive the agent only on the host's bpffs: its mount must
	// reach the container, and someone must make sure it is one.
	bpf, _ := mountOf(t, spec, c, args["bpf-pin-dir"])
	if p := bpf.MountPropagation; p == nil || *p == corev1.MountPropagationNone {
		t.Errorf("%s: mount propagation none; the host's bpffs mount would not be seen", bpf.MountPath)
	}
	if !slices.ContainsFunc(spec.InitContainers, func(ic corev1.Container) bool {
		return ic.SecurityContext != nil && ic.SecurityContext.Privileged != nil && *ic.SecurityContext.Privileged &&
			slices.ContainsFunc(ic.VolumeMounts, func(vm corev1.VolumeMount) bool {
				return vm.Name == bpf.Name && vm.MountPropagation != nil && *vm.MountPropagation == corev1.MountPropagationBidirectional
			})
	}) {
		t.Error("no privileged init container mounts a bpffs on the host's /sys/fs/bpf (Bidirectional)")
	}

	// Probes on the agent's local endpoint: the listen address and the
	// paths its handler serves.
	host, port, err := net.SplitHostPort(args["listen"])
	if err != nil {
		t.Fatalf("--listen=%s: %v", args["listen"], err)
	}
	if def := runFlags(t)["listen"]; def.def != agent.DefaultListen {
		t.Errorf("main.go's --listen default %q is not agent.DefaultListen %q", def.def, agent.DefaultListen)
	}
	served := handlerPaths(t)
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"liveness", c.LivenessProbe, "/healthz"},
		{"readiness", c.ReadinessProbe, "/readyz"},
		{"startup", c.StartupProbe, "/healthz"},
	} {
		if p.probe == nil {
			if p.name != "startup" {
				t.Errorf("no %s probe", p.name)
			}
			continue
		}
		g := p.probe.HTTPGet
		if g == nil {
			t.Errorf("%s probe: not an HTTP GET", p.name)
			continue
		}
		if g.Path != p.path || !slices.Contains(served, g.Path) {
			t.Errorf("%s probe: path %s; want %s, which the agent serves (it serves %v)", p.name, g.Path, p.path, served)
		}
		// The kubelet asks from the node's namespace, the agent's: the
		// probe's host must be the address the agent listens on, any when
		// it listens on every address (an empty host is the pod's
		// address, the node's).
		ip := net.ParseIP(host)
		everywhere := host == "" || (ip != nil && ip.IsUnspecified())
		if (!everywhere && g.Host != host) || g.Port.String() != port {
			t.Errorf("%s probe: %s:%s, the agent listens on %s", p.name, g.Host, g.Port.String(), args["listen"])
		}
		if g.Scheme != "" && g.Scheme != corev1.URISchemeHTTP {
			t.Errorf("%s probe: scheme %s; the agent serves plain HTTP", p.name, g.Scheme)
		}
	}
}

// agentRBAC is every permission the agent needs, by API group and
// resource, from the Kubernetes datastore
// (examples/nodeagent/datastore/kubernetes): informers (list, watch; get)
// on what it reads and one merge patch of its own Node's annotations.
var agentRBAC = map[string]map[string][]string{
	"": {
		"nodes":      {"get", "list", "watch", "patch"},
		"pods":       {"get", "list", "watch"},
		"services":   {"get", "list", "watch"},
		"namespaces": {"get", "list", "watch"},
	},
	"discovery.k8s.io":         {"endpointslices": {"get", "list", "watch"}},
	"networking.k8s.io":        {"networkpolicies": {"get", "list", "watch"}},
	"policy.networking.k8s.io": {"adminnetworkpolicies": {"get", "list", "watch"}, "baselineadminnetworkpolicies": {"get", "list", "watch"}},
}

func TestRBAC(t *testing.T) {
	m := load(t)
	role, binding, sa := m.clusterRoles[0], m.clusterRoleBindings[0], m.serviceAccounts[0]
	granted := map[string]map[string][]string{}
	for _, r := range role.Rules {
		if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			t.Errorf("rule %+v: the agent needs no non-resource URLs and no names", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					allowed, ok := agentRBAC[g][res]
					if !ok || !slices.Contains(allowed, v) {
						t.Errorf("ClusterRole %s grants %s on %q %s, which the agent does not use", role.Name, v, g, res)
						continue
					}
					if granted[g] == nil {
						granted[g] = map[string][]string{}
					}
					if !slices.Contains(granted[g][res], v) {
						granted[g][res] = append(granted[g][res], v)
					}
				}
			}
		}
	}
	for g, rs := range agentRBAC {
		for res, verbs := range rs {
			for _, v := range verbs {
				if !slices.Contains(granted[g][res], v) {
					t.Errorf("ClusterRole %s does not grant %s on %q %s, which the agent uses", role.Name, v, g, res)
				}
			}
		}
	}
	if binding.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}) {
		t.Errorf("ClusterRoleBinding %s refers to %+v, not ClusterRole %s", binding.Name, binding.RoleRef, role.Name)
	}
	if !slices.Equal(binding.Subjects, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}) {
		t.Errorf("ClusterRoleBinding %s binds %+v, want only the service account %s/%s", binding.Name, binding.Subjects, sa.Namespace, sa.Name)
	}
}

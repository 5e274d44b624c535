package kubernetes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8swatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
)

// The benchmark cluster's size.
const (
	benchNodes      = 100
	benchNamespaces = 100
	benchPods       = 10_000
	benchApps       = 10 // per namespace: one Service and EndpointSlice each
	benchPolicies   = 2  // NetworkPolicies per namespace
)

// managedFields is one managedFields entry of an object as the API server
// keeps it; fields is its FieldsV1 JSON.
func managedFields(manager, subresource, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Time: &metav1.Time{}, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields), Subresource: subresource}
}

// benchNode is a node as a kubelet and a cloud provider fill it in: labels,
// conditions, capacity and the images it holds.
func benchNode(n int) *corev1.Node {
	name := fmt.Sprintf("node-%03d", n)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", n)), ResourceVersion: "1",
			Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"node.kubernetes.io/instance-type": "m5.xlarge", "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", n%3),
				"topology.kubernetes.io/region": "region-1"},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				kubernetes.AnnotationVTEPMAC:                             fmt.Sprintf("02:4e:00:00:%02x:%02x", n/256, n%256)},
			ManagedFields: []metav1.ManagedFieldsEntry{
				managedFields("kubelet", "", `{"f:metadata":{"f:annotations":{".":{},"f:volumes.kubernetes.io/controller-managed-attach-detach":{}},"f:labels":{".":{},"f:kubernetes.io/arch":{},"f:kubernetes.io/hostname":{},"f:kubernetes.io/os":{}}}}`),
				managedFields("kube-controller-manager", "", `{"f:metadata":{"f:annotations":{"f:node.alpha.kubernetes.io/ttl":{}}},"f:spec":{"f:podCIDR":{},"f:podCIDRs":{".":{},"v:\"10.244.0.0/24\"":{}}}}`),
				managedFields("kubelet", "status", `{"f:status":{"f:allocatable":{"f:cpu":{},"f:memory":{}},"f:capacity":{"f:cpu":{},"f:memory":{}},"f:conditions":{"k:{\"type\":\"DiskPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"MemoryPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"PIDPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}}},"f:images":{},"f:nodeInfo":{"f:bootID":{},"f:kernelVersion":{}}}}`),
			}},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.244.%d.0/24", n), PodCIDRs: []string{fmt.Sprintf("10.244.%d.0/24", n)},
			ProviderID: "aws:///zone/i-0123456789abcdef" + fmt.Sprint(n)},
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("100Gi")}
	node.Status = corev1.NodeStatus{Capacity: res, Allocatable: res,
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("198.18.%d.%d", n/250, n%250+1)},
			{Type: corev1.NodeHostName, Address: name}},
		NodeInfo: corev1.NodeSystemInfo{MachineID: "ec2abcdef0123456789", SystemUUID: "ec2abcdef-0123-4567-89ab", BootID: "b00710d0-0000-4000-8000-000000000000",
			KernelVersion: "6.8.0-1009-aws", OSImage: "Ubuntu 24.04 LTS", ContainerRuntimeVersion: "containerd://1.7.12",
			KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64"},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
	}
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady} {
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: c, Status: corev1.ConditionFalse,
			Reason: "Kubelet" + string(c), Message: "kubelet reports " + string(c)})
	}
	for i := range 30 {
		node.Status.Images = append(node.Status.Images, corev1.ContainerImage{SizeBytes: int64(1e7 * (i + 1)),
			Names: []string{fmt.Sprintf("registry.example.org/team-%d/image-%d@sha256:%064d", i%7, i, i),
				fmt.Sprintf("registry.example.org/team-%d/image-%d:v1.%d.0", i%7, i, i)}})
	}
	return node
}

// benchPod is a Deployment's running pod as the API server returns it:
// labels (3 or 4), owner, one container with a named port, env, probes,
// resources and the service account volume, a status with conditions and
// the container's, and the managed fields of its writers.
func benchPod(ns, app, node string, i int, ip string) *corev1.Pod {
	hash := fmt.Sprintf("%010x", i*7919)
	labels := map[string]string{"app": app, "pod-template-hash": hash, "tier": []string{"frontend", "backend"}[i%2]}
	if i%2 == 0 {
		labels["version"] = "v1"
	}
	name := fmt.Sprintf("%s-%s-%05d", app, hash, i)
	uid := fmt.Sprintf("10000000-0000-4000-8000-%012d", i)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, GenerateName: app + "-" + hash + "-", UID: types.UID(uid), ResourceVersion: "1",
			Labels:      labels,
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z", "prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-" + hash,
				UID: types.UID("20000000-0000-4000-8000-" + hash[:10] + "00"), Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				managedFields("kube-controller-manager", "", `{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/restartedAt":{},"f:prometheus.io/port":{},"f:prometheus.io/scrape":{}},"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{},"f:tier":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"`+uid+`\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:env":{".":{},"k:{\"name\":\"LOG_LEVEL\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"POD_NAME\"}":{".":{},"f:name":{},"f:valueFrom":{".":{},"f:fieldRef":{}}},"k:{\"name\":\"UPSTREAM\"}":{".":{},"f:name":{},"f:value":{}}},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}},"f:readinessProbe":{".":{},"f:failureThreshold":{},"f:httpGet":{".":{},"f:path":{},"f:port":{},"f:scheme":{}},"f:periodSeconds":{},"f:successThreshold":{},"f:timeoutSeconds":{}},"f:resources":{".":{},"f:limits":{".":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`),
				managedFields("kubelet", "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"PodReadyToStartContainers\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"`+ip+`\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`),
			}},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "default", RestartPolicy: corev1.RestartPolicyAlways,
			DNSPolicy: corev1.DNSClusterFirst, SchedulerName: "default-scheduler", TerminationGracePeriodSeconds: ptr(int64(30)),
			EnableServiceLinks: ptr(true), PreemptionPolicy: ptr(corev1.PreemptLowerPriority), Priority: ptr(int32(0)),
			SecurityContext: &corev1.PodSecurityContext{},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))}},
			Volumes: []corev1.Volume{{Name: "kube-api-access-" + hash[:5], VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr(int32(420)), Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr(int64(3607))}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
						FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}}}}}}},
			Containers: []corev1.Container{{Name: "app", Image: "registry.example.org/" + app + ":v1.2.3", ImagePullPolicy: corev1.PullIfNotPresent,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "UPSTREAM", Value: "http://upstream." + ns + ".svc:80"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz",
					Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}}, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3},
				VolumeMounts:           []corev1.VolumeMount{{Name: "kube-api-access-" + hash[:5], ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "198.18.0.1", HostIPs: []corev1.HostIP{{IP: "198.18.0.1"}},
			PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &metav1.Time{}, QOSClass: corev1.PodQOSBurstable,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Started: ptr(true), RestartCount: 0,
				Image: "registry.example.org/" + app + ":v1.2.3", ImageID: "registry.example.org/" + app + "@sha256:" + fmt.Sprintf("%064x", i),
				ContainerID: "containerd://" + fmt.Sprintf("%064x", i*31), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
	for _, c := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue})
	}
	return p
}

// benchCluster returns the objects of a cluster of the benchmark's kind:
// nodes, namespaces and pods (at most 253 a node), benchApps Services and
// benchPolicies NetworkPolicies a namespace.
func benchCluster(nodes, namespaces, pods int) []k8sruntime.Object {
	var objs []k8sruntime.Object
	for n := range nodes {
		objs = append(objs, benchNode(n))
	}
	// Pod i runs on node i%nodes, its address the (i/nodes)th of that
	// node's block; it belongs to app i%benchApps of namespace
	// (i/benchApps)%namespaces.
	endpoints := map[string][]discoveryv1.Endpoint{}
	for i := range pods {
		node, ns := i%nodes, fmt.Sprintf("ns-%03d", (i/benchApps)%namespaces)
		app := fmt.Sprintf("app-%d", i%benchApps)
		ip := fmt.Sprintf("10.244.%d.%d", node, i/nodes+2)
		pod := benchPod(ns, app, fmt.Sprintf("node-%03d", node), i, ip)
		objs = append(objs, pod)
		nodeName := pod.Spec.NodeName
		endpoints[ns+"/"+app] = append(endpoints[ns+"/"+app], discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: &nodeName,
			Zone:       ptr("zone-1"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID}})
	}
	for s := range namespaces {
		ns := fmt.Sprintf("ns-%03d", s)
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, UID: types.UID(fmt.Sprintf("30000000-0000-4000-8000-%012d", s)),
			Labels:        map[string]string{"kubernetes.io/metadata.name": ns, "team": fmt.Sprintf("team-%d", s%5)},
			ManagedFields: []metav1.ManagedFieldsEntry{managedFields("kubectl-create", "", `{"f:metadata":{"f:labels":{".":{},"f:kubernetes.io/metadata.name":{},"f:team":{}}}}`)}},
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}})
		for a := range benchApps {
			app := fmt.Sprintf("app-%d", a)
			k := s*benchApps + a
			objs = append(objs, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app, Labels: map[string]string{"app": app},
					ManagedFields: []metav1.ManagedFieldsEntry{managedFields("kubectl-client-side-apply", "", `{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:internalTrafficPolicy":{},"f:ports":{".":{},"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{},"f:protocol":{},"f:targetPort":{}}},"f:selector":{},"f:sessionAffinity":{},"f:type":{}}}`)}},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{"app": app},
					ClusterIP: fmt.Sprintf("10.96.%d.%d", k/250, k%250+1), ClusterIPs: []string{fmt.Sprintf("10.96.%d.%d", k/250, k%250+1)},
					IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, SessionAffinity: corev1.ServiceAffinityNone,
					Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http")}}}},
				&discoveryv1.EndpointSlice{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app + "-x7k2p",
						Labels:      map[string]string{discoveryv1.LabelServiceName: app, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io", "app": app},
						Annotations: map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-01-01T00:00:00Z"},
						OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: app, UID: types.UID(fmt.Sprintf("40000000-0000-4000-8000-%012d", k)),
							Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
						ManagedFields: []metav1.ManagedFieldsEntry{managedFields("kube-controller-manager", "", `{"f:addressType":{},"f:endpoints":{},"f:metadata":{"f:annotations":{".":{},"f:endpoints.kubernetes.io/last-change-trigger-time":{}},"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:endpointslice.kubernetes.io/managed-by":{},"f:kubernetes.io/service-name":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"40000000\"}":{}}},"f:ports":{}}`)}},
					AddressType: discoveryv1.AddressTypeIPv4, Endpoints: endpoints[ns+"/"+app],
					Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}}})
		}
		for p := range benchPolicies {
			objs = append(objs, &networkingv1.NetworkPolicy{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("allow-%d", p),
					ManagedFields: []metav1.ManagedFieldsEntry{managedFields("kubectl-client-side-apply", "", `{"f:spec":{"f:ingress":{},"f:podSelector":{},"f:policyTypes":{}}}`)}},
				Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", p)}},
					PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
					Ingress: []networkingv1.NetworkPolicyIngressRule{{
						From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "team-1"}}}},
						Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromString("http"))}}}}}})
		}
	}
	return objs
}

// decodeLists makes the fake's lists new objects, as a client decoding
// them from the wire gets: the fake's own are deep copies, which share
// their strings with the objects it stores, so the informers' caches would
// look smaller than they are.
func decodeLists(client *fake.Clientset) {
	tracked := k8stesting.ObjectReaction(client.Tracker())
	client.PrependReactor("list", "*", func(action k8stesting.Action) (bool, k8sruntime.Object, error) {
		handled, obj, err := tracked(action)
		if !handled || err != nil {
			return handled, obj, err
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return true, nil, err
		}
		out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(k8sruntime.Object)
		return true, out, json.Unmarshal(b, out)
	})
}

// benchResources are the resources the Datastore watches.
var benchResources = []string{"nodes", "pods", "services", "endpointslices", "namespaces", "networkpolicies"}

// watching returns a channel closed once every one of the resources is
// watched: each informer has then done with its list.
func watching(client *fake.Clientset, resources []string) <-chan struct{} {
	var mu sync.Mutex
	left := map[string]bool{}
	for _, r := range resources {
		left[r] = true
	}
	all := make(chan struct{})
	client.PrependWatchReactor("*", func(action k8stesting.Action) (bool, k8swatch.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		if r := action.GetResource().Resource; left[r] {
			delete(left, r)
			if len(left) == 0 {
				close(all)
			}
		}
		return false, nil, nil
	})
	return all
}

// liveHeap returns the heap's live bytes after two collections (the
// second frees what the first left in sync.Pools' victim caches, such as
// encoding/json's buffers of decodeLists).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkKubernetesDatastore10kPods measures the memory of the
// Kubernetes datastore on a cluster of 10,000 pods (100 namespaces, 100
// nodes, 1,000 Services with their EndpointSlices, 200 NetworkPolicies):
// datastore-MB is what the informers' caches and the delivered Cluster
// hold (the live heap once Watch delivered, less the live heap with the
// objects in the fake API server), total-MB the live heap with both less
// the one before the objects were made; the /pod figures divide them by
// the pods.
func BenchmarkKubernetesDatastore10kPods(b *testing.B) {
	for b.Loop() {
		before := liveHeap()
		client := fake.NewClientset(benchCluster(benchNodes, benchNamespaces, benchPods)...)
		decodeLists(client)
		listed := watching(client, benchResources)
		withObjects := liveHeap()

		// The initial list's notifications reach the Watch after its
		// first delivery and start a rebuild, which would be in flight
		// (a second Cluster) when the heap is read: debounced out of the
		// measurement.
		d, err := kubernetes.New(kubernetes.Options{Client: client, NodeName: "node-000", Debounce: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		updates := make(chan datastore.Cluster, 1)
		done := make(chan error, 1)
		go func() {
			done <- d.Watch(ctx, func(c datastore.Cluster) {
				select {
				case updates <- c:
				default:
				}
			})
		}()
		var c datastore.Cluster
		select {
		case c = <-updates:
		case err := <-done:
			b.Fatalf("Watch returned: %v", err)
		}
		if len(c.Pods) != benchPods || len(c.Nodes) != benchNodes || len(c.Services) != benchNamespaces*benchApps ||
			len(c.NetworkPolicies) != benchNamespaces*benchPolicies || len(c.Namespaces) != benchNamespaces {
			b.Fatalf("first update: %d pods, %d nodes, %d services, %d network policies, %d namespaces",
				len(c.Pods), len(c.Nodes), len(c.Services), len(c.NetworkPolicies), len(c.Namespaces))
		}
		// The informers' lists are garbage once they watch: the heap
		// then holds what stays.
		<-listed
		watching := liveHeap()

		runtime.KeepAlive(c)
		runtime.KeepAlive(client)
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}

		ds, total := float64(watching)-float64(withObjects), float64(watching)-float64(before)
		b.ReportMetric(ds/1e6, "datastore-heap-MB")
		b.ReportMetric(ds/benchPods, "datastore-heap-B/pod")
		b.ReportMetric(total/1e6, "heap-MB")
		b.ReportMetric(total/benchPods, "heap-B/pod")
		b.ReportMetric((float64(withObjects)-float64(before))/1e6, "fake-apiserver-heap-MB")
	}
}

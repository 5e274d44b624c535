package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// pki is the test's own certificate authority: it signs the API server's
// serving certificate and the admin's client certificate.
type pki struct {
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	caFile string
	caPEM  []byte
}

func newPKI(dir string) (*pki, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "nodeplane-e2e-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, cert: cert, key: key, caFile: filepath.Join(dir, "ca.crt"),
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	return p, os.WriteFile(p.caFile, p.caPEM, 0o600)
}

// issue writes name.crt and name.key, a certificate for cn (organizations
// orgs) signed by the CA: a serving one for ips when ips is not empty.
func (p *pki) issue(name, cn string, orgs []string, ips []net.IP) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(ips) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = ips
		tmpl.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default.svc"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		return "", "", err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}

// serviceAccountKeys writes the key pair the API server signs and checks
// service account tokens with.
func serviceAccountKeys(dir string) (pub, priv string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	pb, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	pub, priv = filepath.Join(dir, "sa.pub"), filepath.Join(dir, "sa.key")
	if err := os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pb}), 0o600); err != nil {
		return "", "", err
	}
	return pub, priv, os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
}

// freePort returns a TCP port of 127.0.0.1 that nobody listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// proc is a process the test started, in a process group of its own, its
// output in a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

func startProc(name, logFile string, argv ...string) (*proc, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logFile}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig and waits up to wait for the exit, then kills the
// process; it returns how long the process took to exit.
func (p *proc) stop(sig syscall.Signal, wait time.Duration) time.Duration {
	if p == nil || p.exited() {
		return 0
	}
	start := time.Now()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(wait):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	return time.Since(start)
}

// serviceCIDRs are the cluster's service ranges, IPv4 and IPv6.
const serviceCIDRs = "10.96.0.0/16,fd00:96::/112"

// controlPlane is etcd and kube-apiserver on loopback.
type controlPlane struct {
	bin, dir           string
	etcdPort, peerPort int
	apiPort            int
	etcd, api          *proc
	apiArgs            []string
	admin              *rest.Config
	ca                 *pki
}

func startControlPlane(t *testing.T, bin, dir string) *controlPlane {
	t.Helper()
	cp := &controlPlane{bin: bin, dir: dir}
	t.Cleanup(cp.stop)
	var err error
	for _, p := range []*int{&cp.etcdPort, &cp.peerPort, &cp.apiPort} {
		if *p, err = freePort(); err != nil {
			t.Fatal(err)
		}
	}
	if cp.ca, err = newPKI(dir); err != nil {
		t.Fatal(err)
	}
	servCert, servKey, err := cp.ca.issue("apiserver", "kube-apiserver", nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	adminCert, adminKey, err := cp.ca.issue("admin", "e2e-admin", []string{"system:masters"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	saPub, saKey, err := serviceAccountKeys(dir)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", cp.etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", cp.peerPort)
	cp.etcd, err = startProc("etcd", filepath.Join(dir, "etcd.log"), filepath.Join(bin, "etcd"),
		"--name", "e2e", "--data-dir", filepath.Join(dir, "etcd-data"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "e2e="+peerURL, "--unsafe-no-fsync", "--log-level", "warn")
	if err != nil {
		t.Fatal(err)
	}
	if err := waitFor(30*time.Second, func() error {
		if cp.etcd.exited() {
			return fmt.Errorf("etcd exited (see %s)", cp.etcd.log)
		}
		resp, err := http.Get(etcdURL + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("etcd health: %s", resp.Status)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("timing: etcd healthy after %v", time.Since(start).Round(time.Millisecond))

	cp.apiArgs = []string{filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(cp.apiPort),
		"--tls-cert-file", servCert, "--tls-private-key-file", servKey,
		"--client-ca-file", cp.ca.caFile,
		"--authorization-mode", "Node,RBAC",
		"--anonymous-auth=false",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", saPub, "--service-account-signing-key-file", saKey,
		"--api-audiences", "https://kubernetes.default.svc",
		// Dual stack, IPv4 first: a service's ClusterIP is IPv4 unless
		// its ipFamilies say otherwise.
		"--service-cluster-ip-range", serviceCIDRs,
		// No controller manager: nothing creates the namespaces' default
		// service accounts, so the admission plugin that requires them is off.
		"--disable-admission-plugins", "ServiceAccount",
		"--endpoint-reconciler-type", "none",
		"--allow-privileged",
		"--cert-dir", filepath.Join(dir, "apiserver-certs"),
		"--v", "1",
	}
	cp.admin = &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", cp.apiPort),
		TLSClientConfig: rest.TLSClientConfig{CAFile: cp.ca.caFile, CertFile: adminCert, KeyFile: adminKey},
		QPS:             100, Burst: 200}
	start = time.Now()
	if err := cp.startAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("timing: kube-apiserver ready after %v", time.Since(start).Round(time.Millisecond))
	return cp
}

// startAPIServer starts kube-apiserver and waits until its /readyz passes.
func (cp *controlPlane) startAPIServer() error {
	var err error
	if cp.api, err = startProc("kube-apiserver", filepath.Join(cp.dir, "apiserver.log"), cp.apiArgs...); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cp.admin)
	if err != nil {
		return err
	}
	return waitFor(90*time.Second, func() error {
		if cp.api.exited() {
			return fmt.Errorf("kube-apiserver exited (see %s)", cp.api.log)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("readyz: %v: %s", err, body)
		}
		return nil
	})
}

func (cp *controlPlane) stop() {
	if cp.api != nil {
		cp.api.stop(syscall.SIGTERM, 5*time.Second)
	}
	if cp.etcd != nil {
		cp.etcd.stop(syscall.SIGTERM, 5*time.Second)
	}
}

// kubeconfig writes a kubeconfig for the API server with a bearer token.
func (cp *controlPlane) kubeconfig(file, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cp.admin.Host, CertificateAuthorityData: cp.ca.caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: user}
	cfg.CurrentContext = "e2e"
	return clientcmd.WriteToFile(*cfg, file)
}

// waitFor calls fn until it returns nil or timeout passes; it returns fn's
// last error then.
func waitFor(timeout time.Duration, fn func() error) error {
	return waitEvery(timeout, 200*time.Millisecond, fn)
}

// waitEvery is waitFor, pausing every between two calls of fn.
func waitEvery(timeout, every time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		time.Sleep(every)
	}
}

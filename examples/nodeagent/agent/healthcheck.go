package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/kernel"
)

// DefaultHealthCheckRetry is how often HealthChecks tries again to listen
// where it could not (a port another process holds, say).
const DefaultHealthCheckRetry = 10 * time.Second

// HealthCheckService is a service whose load balancer health checks this
// node answers.
type HealthCheckService struct {
	// Namespace and Name identify the service.
	Namespace, Name string
	// Port is the service's health check node port (TCP).
	Port uint16
	// LocalEndpoints counts the service's ready endpoints on this node:
	// the checks are answered 200 while it is not zero, 503 when it is.
	LocalEndpoints int
}

func (s HealthCheckService) key() string { return s.Namespace + "/" + s.Name }

// HealthCheckStatus is one service's health check server, as Status
// reports it.
type HealthCheckStatus struct {
	// Service is "namespace/name".
	Service string `json:"service"`
	// Port is its health check node port.
	Port uint16 `json:"port"`
	// LocalEndpoints is the count the checks are answered with.
	LocalEndpoints int `json:"localEndpoints"`
	// Listening are the addresses (host:port) it answers on.
	Listening []string `json:"listening,omitempty"`
	// Errors say where it could not listen, and why.
	Errors []string `json:"errors,omitempty"`
}

// HealthCheckOptions configure HealthChecks. Every field is optional.
type HealthCheckOptions struct {
	// Listen opens a TCP listener on address (host:port, or ":port" for
	// every address); nil means net.ListenConfig's Listen. The agent's
	// opens it inside the node's network namespace.
	Listen func(ctx context.Context, address string) (net.Listener, error)
	// RetryInterval is how often Run tries again to listen where it could
	// not; zero means DefaultHealthCheckRetry.
	RetryInterval time.Duration
	// Clock times the retries; nil means the real one.
	Clock clock.Clock
	// Logger receives a line when a server cannot listen and when it
	// recovers; nil discards them.
	Logger *slog.Logger
}

// HealthChecks answers load balancers' health checks for the services with
// externalTrafficPolicy Local, as kube-proxy's health check server does: on
// each node address, at each service's health check node port, every HTTP
// request (any method and path; load balancers ask GET / or GET /healthz)
// gets a JSON body {"service": {"namespace", "name"}, "localEndpoints": N},
// with status 200 while the node has N > 0 ready endpoints of the service
// and 503 when it has none, so that the load balancer sends the service's
// traffic only to nodes that keep it.
//
// Update says which services and addresses to serve; Run starts the
// servers, keeps them as Update changes what is wanted (one listener per
// port and address; a count that changes changes no listener), tries again
// where it could not listen, and stops them all when its context ends. A
// port it cannot listen on (another process has it, or another service
// asks for it too) is an error of that service alone: it is logged, shown
// by Status and tried again, and every other service is served.
type HealthChecks struct {
	listen func(ctx context.Context, address string) (net.Listener, error)
	retry  time.Duration
	clock  clock.Clock
	log    *slog.Logger

	mu sync.Mutex
	// addrs and want are what the last Update asked for.
	addrs []netip.Addr
	want  []HealthCheckService
	// ctx is Run's context while Run runs, nil otherwise.
	ctx context.Context
	// ports are the servers, by port.
	ports map[uint16]*healthPort
	// conflicts are the services that asked for a port another service
	// has, with the message logged.
	conflicts map[string]string
	// serving counts the servers' goroutines.
	serving sync.WaitGroup
}

// healthPort is the server of one health check port.
type healthPort struct {
	svc atomic.Pointer[HealthCheckService]
	srv *http.Server
	// lis are its listeners by address, errs why it could not listen at
	// the addresses it has none for.
	lis  map[string]net.Listener
	errs map[string]string
}

// NewHealthChecks returns HealthChecks serving nothing. It does no I/O.
func NewHealthChecks(opts HealthCheckOptions) *HealthChecks {
	h := &HealthChecks{listen: opts.Listen, retry: opts.RetryInterval, clock: clock.OrReal(opts.Clock), log: opts.Logger,
		ports: map[uint16]*healthPort{}, conflicts: map[string]string{}}
	if h.listen == nil {
		h.listen = func(ctx context.Context, address string) (net.Listener, error) {
			var lc net.ListenConfig
			return lc.Listen(ctx, "tcp", address)
		}
	}
	if h.retry <= 0 {
		h.retry = DefaultHealthCheckRetry
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h
}

// Update sets the services to answer for and the node addresses to answer
// on (none: every address). While Run runs, the servers follow before
// Update returns; otherwise Run starts them. It may be called from any
// goroutine.
func (h *HealthChecks) Update(addrs []netip.Addr, services []HealthCheckService) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addrs, h.want = slices.Clone(addrs), slices.Clone(services)
	if h.ctx != nil {
		h.sync()
	}
}

// Run serves the health checks until ctx ends, then closes every server
// and returns nil once their goroutines have stopped. It is an error to run
// it twice at once.
func (h *HealthChecks) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	h.mu.Lock()
	if h.ctx != nil {
		h.mu.Unlock()
		return errors.New("agent: health checks: already running")
	}
	h.ctx = ctx
	h.sync()
	h.mu.Unlock()
	tick := h.clock.NewTicker(h.retry)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			h.mu.Lock()
			h.ctx = nil
			for port, p := range h.ports {
				p.close()
				delete(h.ports, port)
			}
			clear(h.conflicts)
			h.mu.Unlock()
			h.serving.Wait()
			return nil
		case <-tick.C():
			h.mu.Lock()
			if h.failing() {
				h.sync()
			}
			h.mu.Unlock()
		}
	}
}

// Status returns the servers' state, by service.
func (h *HealthChecks) Status() []HealthCheckStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []HealthCheckStatus
	for _, s := range h.want {
		st := HealthCheckStatus{Service: s.key(), Port: s.Port, LocalEndpoints: s.LocalEndpoints}
		if msg, ok := h.conflicts[s.key()]; ok {
			st.Errors = []string{msg}
		} else if p := h.ports[s.Port]; p != nil {
			st.Listening = slices.Sorted(maps.Keys(p.lis))
			for _, a := range slices.Sorted(maps.Keys(p.errs)) {
				st.Errors = append(st.Errors, p.errs[a])
			}
		} else if h.ctx == nil {
			st.Errors = []string{"not running"}
		}
		out = append(out, st)
	}
	return out
}

// failing reports whether some listener is missing. h.mu is held.
func (h *HealthChecks) failing() bool {
	for _, p := range h.ports {
		if len(p.errs) > 0 {
			return true
		}
	}
	return false
}

// sync makes the servers what h.want and h.addrs ask for. h.mu is held and
// Run runs.
func (h *HealthChecks) sync() {
	if h.ctx.Err() != nil {
		return // Run is stopping
	}
	wanted := map[uint16]HealthCheckService{}
	conflicts := map[string]string{}
	for _, s := range h.want {
		if s.Port == 0 {
			continue
		}
		if other, ok := wanted[s.Port]; ok {
			conflicts[s.key()] = fmt.Sprintf("health check port %d is service %s's already", s.Port, other.key())
			continue
		}
		wanted[s.Port] = s
	}
	for k, msg := range conflicts {
		if h.conflicts[k] != msg {
			h.log.Error("health check server not started", "service", k, "err", msg)
		}
	}
	h.conflicts = conflicts
	for port, p := range h.ports {
		if _, ok := wanted[port]; !ok {
			p.close()
			delete(h.ports, port)
		}
	}
	for port, s := range wanted {
		p := h.ports[port]
		if p == nil {
			p = &healthPort{lis: map[string]net.Listener{}, errs: map[string]string{}}
			p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute,
				ErrorLog: slog.NewLogLogger(h.log.Handler(), slog.LevelDebug)}
			h.ports[port] = p
		}
		p.svc.Store(&s)
		addresses := h.addresses(port)
		for a, l := range p.lis {
			if !slices.Contains(addresses, a) {
				_ = l.Close()
				delete(p.lis, a)
			}
		}
		for a := range p.errs {
			if !slices.Contains(addresses, a) {
				delete(p.errs, a)
			}
		}
		for _, a := range addresses {
			if p.lis[a] != nil {
				continue
			}
			l, err := h.listen(h.ctx, a)
			if err != nil {
				msg := fmt.Sprintf("listen on %s: %v", a, err)
				if p.errs[a] != msg {
					h.log.Error("health check server cannot listen", "service", s.key(), "address", a, "err", err)
				}
				p.errs[a] = msg
				continue
			}
			if _, failed := p.errs[a]; failed {
				h.log.Info("health check server listening", "service", s.key(), "address", a)
				delete(p.errs, a)
			}
			p.lis[a] = l
			h.serving.Add(1)
			go func() {
				defer h.serving.Done()
				_ = p.srv.Serve(l) // until the listener or the server closes
			}()
		}
	}
}

// addresses returns where port is served: host:port on each node address,
// or ":port" (every address) when there is none. h.mu is held.
func (h *HealthChecks) addresses(port uint16) []string {
	if len(h.addrs) == 0 {
		return []string{":" + strconv.Itoa(int(port))}
	}
	var out []string
	for _, a := range h.addrs {
		out = append(out, netip.AddrPortFrom(a, port).String())
	}
	return out
}

// close closes the port's listeners (also those whose Serve has not begun)
// and its server, with its connections.
func (p *healthPort) close() {
	for _, l := range p.lis {
		_ = l.Close()
	}
	_ = p.srv.Close()
}

// healthCheckBody is the JSON document a health check gets.
type healthCheckBody struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints int `json:"localEndpoints"`
}

// ServeHTTP answers a health check: 200 while the service has local ready
// endpoints, 503 when it has none, with the count in the body and, as
// kube-proxy sends it, in X-Load-Balancing-Endpoint-Weight.
func (p *healthPort) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s := p.svc.Load()
	var body healthCheckBody
	body.Service.Namespace, body.Service.Name, body.LocalEndpoints = s.Namespace, s.Name, s.LocalEndpoints
	b, _ := json.Marshal(body) // cannot fail: strings and an int
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(s.LocalEndpoints))
	if s.LocalEndpoints > 0 {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write(append(b, '\n'))
}

// listenInside returns a HealthCheckOptions.Listen that opens its sockets
// inside ns's network namespace (kernel.Doer), where the node's addresses
// are.
func listenInside(ns kernel.Doer) func(ctx context.Context, address string) (net.Listener, error) {
	return func(ctx context.Context, address string) (net.Listener, error) {
		var l net.Listener
		err := ns.Do(func() (err error) {
			var lc net.ListenConfig
			l, err = lc.Listen(ctx, "tcp", address)
			return err
		})
		return l, err
	}
}

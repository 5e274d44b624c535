package endpoints

import "errors"

// Sentinel errors. An error's text names the package once; errors.Is
// matches every sentinel it speaks of, and the cause's (a kernel or
// routetable error) where one is wrapped.
var (
	// ErrInvalidOptions reports an Options value that New refuses.
	ErrInvalidOptions = errors.New("endpoints: invalid options")
	// ErrInvalidEndpoint reports a cluster.Endpoint or
	// cluster.EndpointRemove that is malformed: no ID, an interface name
	// the kernel would refuse, an address that is not a network, a MAC that
	// is not 6 bytes, a bad floating IP. The error also wraps
	// cluster.ErrInvalid. The message changes nothing; the endpoint's
	// status is StateError.
	ErrInvalidEndpoint = errors.New("endpoints: invalid endpoint")
	// ErrSysctl reports a per-interface sysctl that could not be read or
	// written (the sysctls driver retries it on its own backoff), or a
	// group of them the sysctls driver refused (a key it keeps for
	// another group).
	ErrSysctl = errors.New("endpoints: interface sysctl not applied")
	// ErrRoute reports a route of the endpoint that the route table could
	// not write; the table retries it on its own backoff.
	ErrRoute = errors.New("endpoints: route not written")
	// ErrLinks reports a failed listing of the namespace's interfaces.
	ErrLinks = errors.New("endpoints: listing interfaces failed")
)

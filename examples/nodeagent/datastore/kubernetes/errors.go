package kubernetes

import "errors"

// The sentinels of the Kubernetes datastore's errors; each error wraps the
// one it speaks of, and its text starts with the package's prefix once.
var (
	// ErrForbidden is wrapped by the error of a Watch whose first read of a
	// resource it needs (nodes, pods, services, endpointslices, namespaces,
	// networkpolicies) the API server refuses (403: the agent's RBAC does
	// not allow it), and of a Publish the server refuses.
	ErrForbidden = errors.New("kubernetes datastore: forbidden")
	// ErrUnreachable is wrapped by the error of a Watch that could not read
	// the cluster within Options.SyncTimeout: the API server is down,
	// frozen or not reachable.
	ErrUnreachable = errors.New("kubernetes datastore: API server unreachable")
)

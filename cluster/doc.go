// Package cluster is the vocabulary the managers of nodeplane share: the
// facts a control plane knows about a cluster — its nodes with their
// underlay and tunnel addresses and keys, the pod address blocks each node
// owns, the IP pools, the local workload endpoints and the services — as
// plain, validated message types. An agent builds each fact once and sends
// the same value to every manager that cares (the overlay, WireGuard,
// masquerade, the endpoint manager, the service proxy); each takes what it
// needs and ignores the rest.
//
// Every type here is data: no I/O, no kernel types, no Kubernetes types.
// A message type has a Validate method that returns an error naming the
// object and wrapping ErrInvalid; a manager refuses an invalid message
// alone and goes on with the others.
package cluster

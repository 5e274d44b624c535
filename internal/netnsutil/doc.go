// Package netnsutil runs short pieces of work inside another network
// namespace without moving the caller: the work runs on a fresh goroutine
// locked to its OS thread, which enters the namespace and returns to its
// own before it is unlocked. Drivers use it to create sockets that belong to
// a namespace (the socket keeps its namespace afterwards).
//
// It owns no kernel state and never changes the namespace of any thread
// but the one it locks; a thread that cannot return to its namespace stays
// locked, so the Go runtime discards it when its goroutine ends.
package netnsutil

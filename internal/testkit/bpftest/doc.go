// Package bpftest gives kernel tests a BPF file system of their own.
//
// Dir mounts a fresh bpffs on a directory under the test's temporary
// directory and unmounts it when the test ends, so pins made by a test
// never reach /sys/fs/bpf and vanish with the test (the maps behind them
// go once nothing holds them). It needs root: it calls
// kerneltest.RequireKernel first, which skips the test without root, or
// fails it under CI=true. The package is Linux-only and meant for tests;
// it is internal to nodeplane.
package bpftest

#!/usr/bin/env bash
# Builds a released kube-apiserver and the etcd it pins from their Go modules, once, cached under
# ${XDG_CACHE_HOME:-$HOME/.cache}/nodeplane-e2e/<version>/bin. Prints the bin directory on stdout.
# Only the Go module proxy is needed. k8s.io/kubernetes's go.mod replaces its staging modules with
# local directories, so `go install k8s.io/kubernetes/cmd/kube-apiserver@vX` fails; we build from a
# small generated module that requires k8s.io/kubernetes and pins every staging module to its
# published v0.x release.
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-v1.37.2}
STAGING_VERSION=v0.${K8S_VERSION#v1.}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/nodeplane-e2e/$K8S_VERSION
BIN=$CACHE/bin
if [[ -x $BIN/kube-apiserver && -x $BIN/etcd ]]; then
	echo "$BIN"
	exit 0
fi
mkdir -p "$CACHE/src" "$BIN"
cd "$CACHE/src"
dir=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
staging=$(sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*#\1#p' "$dir/go.mod")
etcd=$(sed -n 's#^[[:space:]]*go.etcd.io/etcd/server/v3 \(v[^ ]*\).*#\1#p' "$dir/go.mod")
goversion=$(go env GOVERSION); goversion=${goversion#go}
# Staging modules not published at $STAGING_VERSION (the sample-* ones) are not needed by the binaries:
# they are replaced by empty local stubs so that the module graph resolves.
published=() stubbed=()
rm -rf stub
for m in $staging; do
	if go mod download "$m@$STAGING_VERSION" >/dev/null 2>&1; then
		published+=("$m")
	else
		stubbed+=("$m")
		mkdir -p "stub/$m"
		printf 'module %s\n\ngo 1.21\n' "$m" >"stub/$m/go.mod"
	fi
done
{
	echo "module nodeplane-e2e-k8s-build"
	echo
	echo "go ${goversion}"
	echo
	echo "require ("
	echo "	k8s.io/kubernetes $K8S_VERSION"
	echo "	go.etcd.io/etcd/server/v3 $etcd"
	for m in "${published[@]}"; do echo "	$m $STAGING_VERSION"; done
	echo ")"
	echo
	echo "replace ("
	for m in "${published[@]}"; do echo "	$m => $m $STAGING_VERSION"; done
	for m in "${stubbed[@]}"; do echo "	$m => ./stub/$m"; done
	echo ")"
} >go.mod
cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
GO
echo "e2e: resolving modules for kube-apiserver $K8S_VERSION and etcd $etcd in $CACHE/src" >&2
GOFLAGS=-mod=mod go mod tidy >&2
echo "e2e: building kube-apiserver $K8S_VERSION (cold: about 7 min on 2 cores, up to 25 on slower machines)" >&2
CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$BIN/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver >&2
echo "e2e: building etcd $etcd" >&2
CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3 >&2
mv "$BIN/kube-apiserver.tmp" "$BIN/kube-apiserver"
mv "$BIN/etcd.tmp" "$BIN/etcd"
echo "$BIN"

#!/usr/bin/env bash
# The one test command of nodeplane (run through `make test`).
#
# On a fresh machine it installs what the tests need, then checks formatting,
# vets, runs staticcheck and runs every test of every Go module in the
# repository with the race detector. Kernel tests (TestKernel…) need root;
# with CI=true or NODEPLANE_REQUIRE_KERNEL=1 a skipped kernel test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2
# gcc and libc6-dev: the race detector needs cgo, hence a C compiler and the C
# library's headers (gcc only recommends libc6-dev).
APT_PACKAGES=(iptables ipset nftables iproute2 conntrack iputils-ping gcc libc6-dev)
# What the tests need from each apt package above (same order): a command, or
# the absolute path of a file for a package without one.
NEEDED=(iptables ipset nft ip conntrack ping gcc /usr/include/stdio.h)

log() { printf '==> %s\n' "$*"; }

# have NAME: NAME is a command in PATH or, if it starts with /, an existing file.
have() {
	case "$1" in
	/*) [ -e "$1" ] ;;
	*) command -v "$1" >/dev/null 2>&1 ;;
	esac
}

install_packages() {
	local missing=() i
	for i in "${!NEEDED[@]}"; do
		have "${NEEDED[$i]}" || missing+=("${APT_PACKAGES[$i]}")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		log "missing packages ${missing[*]} and not root: kernel tests will skip or fail (and -race fails without gcc)"
		return 0
	fi
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	local try
	for try in 1 2 3; do
		if apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
			return 0
		fi
		log "apt-get failed (attempt $try); retrying"
		sleep $((try * 5))
	done
	echo "could not install ${missing[*]}" >&2
	return 1
}

install_staticcheck() {
	STATICCHECK="$(go env GOPATH)/bin/staticcheck"
	if [ ! -x "$STATICCHECK" ]; then
		log "installing staticcheck $STATICCHECK_VERSION"
		go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
	fi
}

export PATH="$PATH:/usr/sbin:/sbin"
# Go turns cgo off when it finds no C compiler; -race needs it on.
export CGO_ENABLED=1
install_packages
install_staticcheck

mapfile -t modules < <(find . -name go.mod -not -path './.git/*' -printf '%h\n' | sort)

log "gofmt"
unformatted="$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"
if [ -n "$unformatted" ]; then
	echo "gofmt would change:" >&2
	echo "$unformatted" >&2
	exit 1
fi

log "doc comments on every exported name"
go run ./internal/tools/doccheck .
go run ./internal/tools/enumcheck .

log "imports follow the layers (internal/tools/layercheck/layers.go)"
go run ./internal/tools/layercheck "${modules[@]}"

for m in "${modules[@]}"; do
	log "module $m: go mod tidy -diff"
	(cd "$m" && go mod tidy -diff)
	log "module $m: go vet"
	(cd "$m" && go vet ./...)
	log "module $m: staticcheck"
	(cd "$m" && "$STATICCHECK" ./...)
	log "module $m: go test -race"
	(cd "$m" && go test -race -count=1 ${GOTESTFLAGS:-} ./...)
done
log "all checks passed"

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
APT_PACKAGES=(iptables ipset nftables iproute2 conntrack iputils-ping)
# Binaries the tests call, one per apt package above (same order).
NEEDED_BINARIES=(iptables ipset nft ip conntrack ping)

log() { printf '==> %s\n' "$*"; }

install_packages() {
	local missing=() i
	for i in "${!NEEDED_BINARIES[@]}"; do
		command -v "${NEEDED_BINARIES[$i]}" >/dev/null 2>&1 || missing+=("${APT_PACKAGES[$i]}")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		log "missing packages ${missing[*]} and not root: kernel tests will skip or fail"
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

for m in "${modules[@]}"; do
	log "module $m: go vet"
	(cd "$m" && go vet ./...)
	log "module $m: staticcheck"
	(cd "$m" && "$STATICCHECK" ./...)
	log "module $m: go test -race"
	(cd "$m" && go test -race -count=1 ${GOTESTFLAGS:-} ./...)
done
log "all checks passed"

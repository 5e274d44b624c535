#!/usr/bin/env bash
# The one test command of nodeplane (run through `make test`).
#
# On a fresh machine it installs what the tests need, then checks formatting,
# regenerates the BPF objects and compares them with the committed ones,
# checks doc comments, text forms of enums, file sizes, the names of kernel
# test files and the layers of the imports, and for every Go module in the
# repository checks go mod tidy, vets, runs staticcheck and runs every test
# with the race detector. Kernel tests
# (TestKernel…) need root; with CI=true or NODEPLANE_REQUIRE_KERNEL=1 a
# skipped kernel test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2
# gcc and libc6-dev: the race detector needs cgo, hence a C compiler and the C
# library's headers (gcc only recommends libc6-dev).
APT_PACKAGES=(iptables ipset nftables iproute2 conntrack iputils-ping gcc libc6-dev)
# What the tests need from each apt package above (same order): a command, or
# the absolute path of a file for a package without one.
NEEDED=(iptables ipset nft ip conntrack ping gcc /usr/include/stdio.h)

# The BPF objects are committed; the test regenerates them with this clang
# (Debian 12's clang 14, with llvm-strip and the libbpf headers) and fails
# when they differ from the committed ones. Another clang emits other bytes.
BPF_CLANG_VERSION=14.0.6
BPF_APT_PACKAGES=(clang llvm libbpf-dev)
BPF_NEEDED=(clang llvm-strip /usr/include/bpf/bpf_helpers.h)

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
	for i in "${!BPF_NEEDED[@]}"; do
		have "${BPF_NEEDED[$i]}" || missing+=("${BPF_APT_PACKAGES[$i]}")
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

# bpf_generated: the checksums of the files bpf2go writes.
bpf_generated() {
	find bpf \( -name '*_bpfel.*' -o -name '*_bpfeb.*' \) -type f -print0 | sort -z | xargs -0 sha256sum
}

# bpf_objects: the committed BPF objects (and their Go wrappers) are what
# go generate makes of their C sources with the pinned clang.
bpf_objects() {
	if ! have clang || ! have llvm-strip || ! have /usr/include/bpf/bpf_helpers.h; then
		if [ "${CI:-}" = true ]; then
			echo "clang, llvm-strip or the libbpf headers are missing: cannot regenerate the BPF objects" >&2
			return 1
		fi
		log "clang, llvm-strip or libbpf headers missing: BPF objects not regenerated"
		return 0
	fi
	local version
	version="$(clang --version | head -n 1)"
	if [[ "$version" != *"clang version $BPF_CLANG_VERSION"* ]]; then
		echo "the BPF objects are made with clang $BPF_CLANG_VERSION; this is: $version" >&2
		return 1
	fi
	local before after
	before="$(bpf_generated)"
	go generate ./bpf/...
	after="$(bpf_generated)"
	if [ "$before" != "$after" ]; then
		echo "go generate ./bpf/... changed the BPF objects: commit what it made" >&2
		diff <(echo "$before") <(echo "$after") >&2 || true
		git status --short -- bpf >&2 || true
		return 1
	fi
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

log "BPF objects regenerated with clang $BPF_CLANG_VERSION equal the committed ones"
bpf_objects

log "doc comments on every exported name"
go run ./internal/tools/doccheck .
go run ./internal/tools/enumcheck .

log "the markdown Go snippets are the bodies of compiled Examples"
go run ./internal/tools/readmecheck README.md

log "long files say why (// Size:), kernel tests live in *_kernel_test.go"
go run ./internal/tools/filecheck .

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

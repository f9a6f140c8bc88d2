#!/bin/sh
# Maintainer tool: add (or refresh) one upstream program the tests build from the Go module
# proxy. It writes a wrapper module tests/builds/NAME/ whose go.mod lists the program's
# main packages as `tool` lines at MODULE@VERSION, with go.sum beside it; both are
# committed, and scripts/build-oracles.sh builds every wrapper with `go install tool`.
# Nothing of the upstream project is copied: go.mod names it, go.sum pins its hashes.
#
#   scripts/add-go-build.sh NAME MODULE VERSION PACKAGE... [-- -X importpath.name=value ...]
#   e.g. scripts/add-go-build.sh toolkit-1.20.0 github.com/NVIDIA/nvidia-container-toolkit \
#        v1.20.0 cmd/nvidia-ctk cmd/nvidia-ctk-installer
#
# Some tags are missing from the checksum database behind the module proxy (sum.golang.org
# answers 404 for nvidia-container-toolkit v1.17.0 and v1.18.1): their hashes are then taken
# from the proxy's own zip once (GONOSUMDB for that module only) and pinned in go.sum.
set -eu
[ $# -ge 4 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
name=$1 module=$2 version=$3; shift 3
here=$(cd "$(dirname "$0")/.." && pwd)
dir=$here/tests/builds/$name
ldflags=""
rm -rf "$dir"; mkdir -p "$dir"
cd "$dir"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
go mod init "gpuplane.test/builds/$name" >/dev/null 2>&1
go mod edit -go=1.24   # `tool` lines; go get raises it to what the program needs
while [ $# -gt 0 ]; do
    if [ "$1" = "--" ]; then shift; ldflags="$*"; break; fi
    pkgs="${pkgs:-} $module/$1@$version"; shift
done
# Start from the program's own go.sum: its dependencies are then checked against the hashes
# upstream recorded, with no checksum-database lookup (it lacks some pseudo-versions).
src=$(GONOSUMDB=$module go mod download -json "$module@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ ! -f "$src/go.sum" ] || cp "$src/go.sum" go.sum
# shellcheck disable=SC2086  # one word per package
GONOSUMDB=$module go get -tool $pkgs >/dev/null 2>&1
[ -z "$ldflags" ] || printf '%s\n' "$ldflags" > ldflags
echo "tests/builds/$name: $module@$version:$pkgs"

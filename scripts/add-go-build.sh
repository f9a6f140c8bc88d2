#!/bin/sh
# Maintainer tool: add (or refresh) one upstream program the tests build from the Go module
# proxy. It writes a wrapper module tests/builds/NAME/ whose go.mod lists the program's
# main packages as `tool` lines at MODULE@VERSION, with go.sum beside it; both are
# committed, and scripts/build-oracles.sh builds every wrapper with `go install tool`.
# Nothing of the upstream project is copied: go.mod names it, go.sum pins its hashes.
#
#   scripts/add-go-build.sh [-l LOCALVERSION] NAME MODULE VERSION PACKAGE... [-- -X importpath.name=value ...]
#   e.g. scripts/add-go-build.sh toolkit-1.20.0 github.com/NVIDIA/nvidia-container-toolkit \
#        v1.20.0 cmd/nvidia-ctk cmd/nvidia-ctk-installer
#
# `go install` refuses a module whose go.mod has replace lines, so the wrapper carries them:
# a replace to another module is copied as it is; a replace to a directory of the upstream
# repository (pulumi's `sdk/v3 => ../sdk`, Kubernetes' `k8s.io/api => ./staging/...`) becomes
# that module at LOCALVERSION (-l v3.260.0 for pulumi, -l v0.34.3 for k8s.io/kubernetes
# v1.34.3), which must be the published release of the same commit.
#
# Some tags are missing from the checksum database behind the module proxy (sum.golang.org
# answers 404 for nvidia-container-toolkit v1.17.0 and v1.18.1): their hashes are then taken
# from the proxy's own zip once (GONOSUMDB for that module only) and pinned in go.sum.
set -eu
local_version=""
if [ "${1:-}" = "-l" ]; then local_version=$2; shift 2; fi
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
go mod edit -json "$src/go.mod" | python3 -c '
import json, sys
local = sys.argv[1]
for r in json.load(sys.stdin).get("Replace") or []:
    old, path, version = r["Old"]["Path"], r["New"]["Path"], r["New"].get("Version")
    if path.startswith("."):
        if not local:
            sys.exit(f"add-go-build: {old} is replaced by the directory {path}: give -l VERSION")
        print(f"-replace={old}={old}@{local}")
    else:
        print(f"-replace={old}={path}@{version}")
' "$local_version" > replaces.tmp
# shellcheck disable=SC2046  # one flag per line
[ ! -s replaces.tmp ] || go mod edit $(cat replaces.tmp)
rm -f replaces.tmp
# shellcheck disable=SC2086  # one word per package
GONOSUMDB=$module go get -tool $pkgs >get.log 2>&1 || { cat get.log >&2; rm -f get.log; exit 1; }
rm -f get.log
[ -z "$ldflags" ] || printf '%s\n' "$ldflags" > ldflags
echo "tests/builds/$name: $module@$version:$pkgs"

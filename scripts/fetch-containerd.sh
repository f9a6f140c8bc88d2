#!/bin/sh
# Fetch the real containerd builds the test suite uses as its oracle, from Debian's
# package registry only: 1.6 (bookworm, installed), 1.7 (trixie) and 2.1 (sid)
# (unpacked, never installed), plus runc, busybox-static and the CRI api.proto.
# Everything lands in $GPUPLANE_CACHE (default ~/.cache/gpuplane), outside the checkout,
# so reruns are instant. The system's own apt sources are never changed: trixie and sid
# are read through a private sources list under the cache.
set -eu

CACHE=${GPUPLANE_CACHE:-$HOME/.cache/gpuplane}
APTDIR=$CACHE/apt
MIRROR=${GPUPLANE_DEBIAN_MIRROR:-http://deb.debian.org/debian}

need_root() {
    if [ "$(id -u)" != 0 ]; then
        echo "fetch-containerd: needs root to apt-get install containerd runc busybox-static" >&2
        exit 1
    fi
}

# 1.6, runc and busybox from the system's own suite (bookworm).
if ! command -v runc >/dev/null 2>&1 || ! [ -x /usr/bin/containerd ] || ! [ -x /bin/busybox ]; then
    need_root
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq containerd runc busybox-static >/dev/null
    # The fetched daemons are started by the tests themselves, never by the system.
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
        systemctl disable --now containerd >/dev/null 2>&1 || true
    fi
fi

# sshd and ssh for the `gpuplane nodes capture` tests (tests/pure/test_capture.py): each test
# starts its own sshd on 127.0.0.1 with a per-test config; the system's sshd stays off.
if ! command -v sshd >/dev/null 2>&1 && ! [ -x /usr/sbin/sshd ]; then
    need_root
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        openssh-server openssh-client >/dev/null
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
        systemctl disable --now ssh >/dev/null 2>&1 || true
    fi
fi

# sudo for the capture test of `ssh.sudo: true` (tests/pure/test_capture_node.py): a throw-away
# non-root user with NOPASSWD sudo reads a root-only file through `sudo -n sh -s`.
# etcd for the tests' real Kubernetes control plane (tests/support/control_plane.py): Debian's
# etcd-server (3.4 on bookworm), which kube-apiserver 1.34 accepts. The service stays off.
if ! command -v etcd >/dev/null 2>&1; then
    need_root
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends etcd-server >/dev/null
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
        systemctl disable --now etcd >/dev/null 2>&1 || true
    fi
fi

# CNI plugins for the tests' real kubelet node (tests/support/kubelet_node.py): Debian's
# containernetworking-plugins (bridge, host-local, loopback in /usr/lib/cni).
if ! [ -x /usr/lib/cni/bridge ]; then
    need_root
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        containernetworking-plugins >/dev/null
fi

# GNU awk, beside mawk and busybox awk, for the node agent's TOML reader
# (tests/real/test_agent_awk.py): nodes run any of the three.
if ! command -v gawk >/dev/null 2>&1; then
    need_root
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gawk >/dev/null
fi

# systemctl from Debian's systemd for the node agent's host unit step
# (tests/real/test_agent_units.py): `systemctl --root=DIR` masks and unmasks the unit
# files of a sandbox node offline; nothing here boots or starts systemd.
if ! command -v systemctl >/dev/null 2>&1; then
    need_root
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi

if ! command -v sudo >/dev/null 2>&1; then
    need_root
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends sudo >/dev/null
fi

link_line() {  # link_line LINE ROOT: bin/ holds containerd, ctr; shim/ only the shim
    line=$1 root=$2
    mkdir -p "$CACHE/containerd/$line/bin" "$CACHE/containerd/$line/shim"
    ln -sf "$root/usr/bin/containerd" "$CACHE/containerd/$line/bin/containerd"
    ln -sf "$root/usr/bin/ctr" "$CACHE/containerd/$line/bin/ctr"
    ln -sf "$root/usr/bin/containerd-shim-runc-v2" "$CACHE/containerd/$line/shim/containerd-shim-runc-v2"
}

link_line 1.6 ""

private_apt() {  # private_apt SUITE: apt options reading only SUITE, all state in the cache
    suite=$1
    mkdir -p "$APTDIR/$suite/lists/partial" "$APTDIR/$suite/archives/partial"
    echo "deb $MIRROR $suite main" > "$APTDIR/$suite/sources.list"
    echo "-o Dir::Etc::SourceList=$APTDIR/$suite/sources.list -o Dir::Etc::SourceParts=/nonexistent \
-o Dir::State::Lists=$APTDIR/$suite/lists -o Dir::Cache::Archives=$APTDIR/$suite/archives \
-o Dir::Cache=$APTDIR/$suite -o APT::Get::List-Cleanup=0 -o APT::Sandbox::User=root"
}

fetch_unpacked() {  # fetch_unpacked LINE SUITE PACKAGE...: download and dpkg -x into the cache
    line=$1 suite=$2; shift 2
    root=$CACHE/containerd/$line/root
    if [ -x "$root/usr/bin/containerd" ] && [ -z "${GPUPLANE_REFETCH:-}" ]; then
        link_line "$line" "$root"; return
    fi
    opts=$(private_apt "$suite")
    # shellcheck disable=SC2086
    apt-get $opts update -qq
    rm -rf "$root.tmp"; mkdir -p "$root.tmp"
    dl=$APTDIR/$suite/debs; rm -rf "$dl"; mkdir -p "$dl"
    # shellcheck disable=SC2086
    (cd "$dl" && apt-get $opts download "$@" >/dev/null)
    for deb in "$dl"/*.deb; do dpkg -x "$deb" "$root.tmp"; done
    rm -rf "$root"; mv "$root.tmp" "$root"
    link_line "$line" "$root"
}

fetch_unpacked 1.7 trixie containerd
fetch_unpacked 2.1 sid containerd

# CRI api.proto for the gRPC client the sandbox tests use.
proto=$CACHE/cri-api/root
if [ -z "$(find "$proto" -name api.proto 2>/dev/null | head -n 1)" ]; then
    opts=$(private_apt trixie)
    # shellcheck disable=SC2086
    apt-get $opts update -qq
    dl=$APTDIR/trixie/cri; rm -rf "$dl"; mkdir -p "$dl"
    # shellcheck disable=SC2086
    (cd "$dl" && apt-get $opts download golang-github-kubernetes-cri-api-dev >/dev/null)
    rm -rf "$proto"; mkdir -p "$proto"
    dpkg -x "$dl"/*.deb "$proto"
fi

for line in 1.6 1.7 2.1; do
    printf '%s: ' "$line"
    "$CACHE/containerd/$line/bin/containerd" --version
done

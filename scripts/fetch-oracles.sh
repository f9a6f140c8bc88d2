#!/bin/sh
# Unpack the test oracles (real upstream programs built from source: the NVIDIA toolkit
# installers 1.17.8 / 1.18.1 and containerd 2.0 / 2.2) from the shared oracle folder into
# the cache, sha256-checked. They are test oracles, never part of the product: nothing
# gpuplane runs reads them. A user's clone has no oracle folder: then this says so and the
# tests that need them skip with that reason (and fail under GPUPLANE_REQUIRE_REAL=1, CI).
#   $GPUPLANE_ORACLES   default: ../shared/oracles beside the checkout
#   $GPUPLANE_CACHE     default: ~/.cache/gpuplane
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
SRC=${GPUPLANE_ORACLES:-$here/../shared/oracles}
CACHE=${GPUPLANE_CACHE:-$HOME/.cache/gpuplane}
OUT=$CACHE/oracles

if [ ! -f "$SRC/README.md" ]; then
    echo "fetch-oracles: no oracle folder at $SRC (set GPUPLANE_ORACLES); the toolkit and containerd 2.0/2.2 tests will skip" >&2
    exit 0
fi

# oracle dir, binary, sha256 of the unpacked binary (as published in the oracle README)
while read -r dir bin sum; do
    [ -n "$dir" ] || continue
    target=$OUT/$dir/$bin
    if [ -x "$target" ] && echo "$sum  $target" | sha256sum -c --status; then
        continue
    fi
    mkdir -p "$OUT/$dir"
    xz -dc "$SRC/$dir/$bin.xz" > "$target.tmp"
    if ! echo "$sum  $target.tmp" | sha256sum -c --status; then
        rm -f "$target.tmp"
        echo "fetch-oracles: $dir/$bin: sha256 differs from $sum; rebuild it (see $SRC/README.md)" >&2
        exit 1
    fi
    chmod +x "$target.tmp"; mv "$target.tmp" "$target"
done <<LIST
nvidia-toolkit-1.18.1 nvidia-ctk-installer 1d7de50f9ddb3f8dbf792dd3b10104604bf387d3d24b3c0aeeb9336c00f3934c
nvidia-toolkit-1.18.1 nvidia-ctk 679b54fcc4de5c06645f8cfbafffebfc2c5acb86eb21946df5f6719a8aaa0a13
nvidia-toolkit-1.18.1 nvidia-container-runtime d9dcb87df37757084a64fc3bbe76fd81af3d3f49ecf18966073193199cadcfe1
nvidia-toolkit-1.18.1 nvidia-cdi-hook fd4a2923f2f1f3a2643c47785ed9da89da864c694dc1db083f68bcaa7fc7d85a
nvidia-toolkit-1.17.8 nvidia-toolkit 0acf250a1c5cb6b664b0f03b2a4bcfcb4be239d935244bde388c883068961266
nvidia-toolkit-1.17.8 nvidia-ctk 3e6c5e1005aadcf50285d923fc079cd3d2f86d1535d15a4d2f1fdbbba55f83a7
containerd-2.0 containerd c7665592be930f19482de6df7131f63bfae56bbb610fc21e7783f063cc88428d
containerd-2.2 containerd cc5f0a812e9ff3fba008543039182d62b502d0c2ba690193f8b76fda68cbab88
LIST

# containerd 2.0 / 2.2 beside the Debian lines, in the same shape: bin/ holds containerd
# and ctr, shim/ the runc shim. The oracles are the daemon alone, so the clients come from
# the 2.1 line's Debian build (ctr and the shim talk stable APIs to any 2.x daemon).
for line in 2.0 2.2; do
    mkdir -p "$CACHE/containerd/$line/bin" "$CACHE/containerd/$line/shim"
    ln -sf "$OUT/containerd-$line/containerd" "$CACHE/containerd/$line/bin/containerd"
    if [ -e "$CACHE/containerd/2.1/shim/containerd-shim-runc-v2" ]; then
        ln -sf "$(readlink -f "$CACHE/containerd/2.1/shim/containerd-shim-runc-v2")" \
            "$CACHE/containerd/$line/shim/containerd-shim-runc-v2"
        ln -sf "$(readlink -f "$CACHE/containerd/2.1/bin/ctr")" "$CACHE/containerd/$line/bin/ctr"
    fi
    printf '%s: ' "$line"; "$CACHE/containerd/$line/bin/containerd" --version
done
"$OUT/nvidia-toolkit-1.18.1/nvidia-ctk" --version | head -1
"$OUT/nvidia-toolkit-1.17.8/nvidia-ctk" --version | head -1

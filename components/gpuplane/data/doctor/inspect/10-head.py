#!/usr/bin/env python3
"""gpuplane node inspection: what a GPU node's container runtime really is, as JSON.

`gpuplane doctor` runs this file in a short-lived privileged pod on each GPU node (hostPID,
the host's / mounted read-only at /host) and reads the JSON it prints. It reports facts,
never verdicts: the doctor feeds them to the same rulebook the plan and the node agent use.
Standard library only (Python 3.11+, for tomllib), so any python3 image runs it.

What it reports (stdout, one JSON object; schema `format` 1):
  daemons        every containerd process from /proc: pid, binary, --config (or the
                 default), --address (or the config's grpc.address, or the default),
                 `--version` output
  kubelet        the kubelet (or kubelite / k3s) process: its runtime endpoint and cgroup
                 driver, from its flags or its config file; `kubelet_daemon` is the pid of
                 the containerd it talks to
  files          {host path: text} of each daemon's top-level config, every file its
                 `imports` match, the TOML files in conf.d/ and config.d/ beside it and the
                 RKE2/K3s templates; `unreadable` lists what could not be read
  binaries       nvidia runtime binaries (BinaryName values found in those files and the
                 toolkit's usual paths): present, executable, GLIBC versions they need
  glibc          the host's glibc version; os_release: ID, VERSION_ID, PRETTY_NAME
  config_dump    `containerd config dump` of the kubelet's containerd (needs --exec)
  cri_probe      RunPodSandbox with runtime handler `nvidia` through the kubelet's
                 containerd socket, then stop and remove (needs --cri-probe)
  errors         anything that went wrong while looking (the rest is still reported)

Paths in the output are host paths. `--root DIR` reads the host's files under DIR (the
pod's /host; a sandbox in tests); `--proc DIR` is where /proc is read (tests inject one).

Running host commands (`--exec`): `nsenter` runs them in the host's mount namespace
(`nsenter -t 1 -m`, needs hostPID and privilege); `direct` runs them here as they are
(only meaningful with --root /); `none` runs nothing. The CRI probe talks gRPC itself
when the `grpc` module is importable (any image with grpcio: the request is encoded here,
no generated code), else runs the host's `crictl` through --exec; without either it says
`not-probed` and why.
"""

# This file is generated from the parts in components/gpuplane/data/doctor/inspect/ (joined
# by `python -m gpuplane.core.parts`): edit those, then regenerate it. This part, the head
# (10-head.py), holds the docstring above, the imports and the paths and limits the other
# parts read.

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import uuid
from typing import Any

FORMAT = 1
DEFAULT_CONFIG = "/etc/containerd/config.toml"
DEFAULT_ADDRESS = "/run/containerd/containerd.sock"
K3S_ADDRESS = "/run/k3s/containerd/containerd.sock"
DROP_IN_DIRS = ("conf.d", "config.d")
TOOLKIT_PATHS = (
    "/usr/local/nvidia/toolkit/nvidia-container-runtime",
    "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi",
    "/usr/local/nvidia/toolkit/nvidia-container-runtime.legacy",
    "/usr/local/nvidia/toolkit/nvidia-container-cli",
    "/usr/local/nvidia/toolkit/libnvidia-container.so.1",
    "/usr/bin/nvidia-container-runtime",
    "/usr/bin/nvidia-container-cli",
)
LIBC_DIRS = (
    "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib",
)
CRICTL_PATHS = (
    "/usr/bin/crictl", "/usr/local/bin/crictl", "/var/lib/rancher/rke2/bin/crictl",
    "/snap/k8s/current/bin/crictl", "/snap/microk8s/current/bin/crictl", "/opt/bin/crictl",
)
MAX_FILE = 512 * 1024
MAX_FILES = 200
MAX_DUMP = 1024 * 1024
ELF_SCAN = 64 * 1024 * 1024
_GLIBC = re.compile(rb"GLIBC_(\d+)\.(\d+)(?:\.\d+)?")
_GLIBC_BANNER = re.compile(rb"GNU C Library[^\n]*?release version (\d+)\.(\d+)")

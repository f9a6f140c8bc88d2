#!/bin/sh
# Lint every shell script gpuplane ships or runs: the node agent as POSIX sh (it runs
# under dash or busybox sh on the nodes, whatever its shebang), scripts/*.sh and the CI
# entry point .ci/run as their own shebang says. shellcheck comes from Debian's package
# registry and is installed (as root) when missing, like the packages
# scripts/fetch-containerd.sh installs. A warning that is silenced carries its reason
# beside its `# shellcheck disable=` directive.
set -eu

cd "$(dirname "$0")/.."

if ! command -v shellcheck >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        echo "shellcheck.sh: shellcheck is missing; install it (apt-get install shellcheck) or run as root" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null
fi

# The node agent: each part of its source alone (the messages name the part), then the
# joined script the nodes run, which tests/pure/test_agent_parts.py holds to be the parts'
# join. A part alone cannot see the others: a variable set in one part and read in
# another reads as unused (SC2034), unassigned (SC2154) or misspelt (SC2153) there, so
# those three are left to the check of the whole script, which sees every part.
shellcheck -s sh -e SC2034,SC2153,SC2154 components/gpuplane/data/agent/*.sh
shellcheck -s sh components/gpuplane/data/node-agent.sh
shellcheck scripts/*.sh .ci/run

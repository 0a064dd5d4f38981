# syntax=docker/dockerfile:1
# A tunehub worker: `docker build -f deploy/docker/worker.Dockerfile -t tunehub-worker .` from
# the repository root; `docker buildx build --platform linux/arm64,linux/amd64 ...` for boards.
# Small: the worker (no database, no cost model) and the C compiler that builds the kernels.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The same command as .ci/run; tests/tests/deploy.rs checks that the two lines agree.
RUN cargo build --locked -p tunehub-worker --bin tunehub-worker
RUN objcopy --strip-debug target/debug/tunehub-worker /tunehub-worker

FROM debian:bookworm-slim
# The device's toolchain: kernels are built with gcc (OpenMP: libgomp) and run here.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev libgomp1 tini \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 tunehub \
    && useradd --system --uid 10001 --gid 10001 --no-create-home tunehub
COPY --from=build /tunehub-worker /usr/local/bin/tunehub-worker
# Numeric, so that Kubernetes can check runAsNonRoot.
USER 10001:10001
ENV TUNEHUB_SERVER=http://tunehub-server:50051 \
    TUNEHUB_LOG_FORMAT=json
STOPSIGNAL SIGTERM
# SIGTERM: the piece in hand is finished and reported, then the worker exits.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/tunehub-worker"]

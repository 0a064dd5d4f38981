# syntax=docker/dockerfile:1
# The tunehub server: `docker build -f deploy/docker/server.Dockerfile -t tunehub-server .` from
# the repository root. Multi-stage: the build needs Rust and XGBoost's C++ toolchain, the image
# only the binary (XGBoost is linked into it) and the C compiler that builds the kernels it
# measures.

FROM rust:1.95-bookworm AS build
# XGBoost's C++ library is built from source by the xgb crate (cmake, ninja, g++; bindgen
# needs libclang), as a static library (costmodel/xgboost-build.cmake): the same packages as
# .ci/run installs.
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake ninja-build g++ libclang-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The same command as .ci/run (the dev profile CI tests; it optimises every dependency and
# the engine, see Cargo.toml). tests/tests/deploy.rs checks that the two lines agree.
RUN cargo build --locked -p tunehub --bin tunehub
# The binary without its debug info.
RUN objcopy --strip-debug target/debug/tunehub /tunehub

FROM debian:bookworm-slim
# gcc, libc6-dev and libgomp1 build and run the kernels of local jobs; tini reaps them and
# passes signals on (SIGTERM starts the graceful stop).
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev libgomp1 tini \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 tunehub \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/tunehub --create-home tunehub
COPY --from=build /tunehub /usr/local/bin/tunehub
# Numeric, so that Kubernetes can check runAsNonRoot.
USER 10001:10001
WORKDIR /var/lib/tunehub
ENV TUNEHUB_LISTEN=0.0.0.0:50051 \
    TUNEHUB_METRICS_ADDR=0.0.0.0:9090 \
    TUNEHUB_DB=/var/lib/tunehub/tunehub.db \
    TUNEHUB_LOG_FORMAT=json
VOLUME /var/lib/tunehub
# gRPC (API, workers, grpc.health.v1), Prometheus metrics.
EXPOSE 50051 9090
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/tunehub"]
CMD ["server", "-v"]

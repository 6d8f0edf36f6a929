# Docker equivalent of `e2e/images/build nats`: a static nats-server built from source at
# /nats-server and a static msgbench-lazyfs at /usr/local/bin/msgbench-lazyfs (a JetStreamCluster
# with spec.faultInjection.powerLoss runs nats-server under it), non-root, under msgbench's name
# and the server's own version. Build from the repository root:
#   docker build -f e2e/images/docker/nats.Dockerfile --build-arg VERSION=0.1.0 \
#     -t ghcr.io/msgbench/nats-server:2.15.2 .
# NATS_SERVER_VERSION is the image tag (the chart's images.nats.tag) and VERSION msgbench's (the
# workspace version): the build fails unless nats-server and msgbench-lazyfs say they are those.
# Base images by digest (the tag is for people; .github/workflows/release.yml checks each digest
# still serves linux/amd64 and linux/arm64).
FROM golang:1.25-bookworm@sha256:3b4a11519ad929d1e1d261a12cff056f0c85b735253d7d861346b9c6f8b36437 AS build
ARG NATS_SERVER_VERSION=2.15.2
COPY e2e/images/check-version /usr/local/bin/check-version
RUN CGO_ENABLED=0 GOBIN=/out go install "github.com/nats-io/nats-server/v2@v$NATS_SERVER_VERSION" \
 && check-version /out/nats-server "$NATS_SERVER_VERSION" \
 && mkdir -p /out/etc/nats /out/data \
 && printf 'port: 4222\nhttp_port: 8222\njetstream {\n  store_dir: /data\n}\n' > /out/etc/nats/nats.conf

# The final image has no libc: glibc linked static (lazyfs takes uid/gid as numbers, so no NSS).
# --target is this platform's own triple (rustc -vV's host), for cargo to keep +crt-static out of
# build scripts and proc macros.
FROM rust:1-bookworm@sha256:fdb91abf3cb33f1ebc84a76461d2472fd8cf606df69c181050fa7474bade2895 AS lazyfs
ARG VERSION
WORKDIR /src
COPY . .
RUN test -n "$VERSION" || { echo "--build-arg VERSION=<msgbench's version> is required" >&2; exit 1; } \
 && triple="$(rustc -vV | sed -n 's/^host: //p')" \
 && RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked --target "$triple" -p msgbench-lazyfs \
 && mkdir -p /out \
 && cp "target/$triple/release/msgbench-lazyfs" /out/msgbench-lazyfs \
 && { ldd /out/msgbench-lazyfs 2>&1 | grep -qE 'statically linked|not a dynamic executable' \
      || { echo "msgbench-lazyfs is not statically linked" >&2; exit 1; }; } \
 && e2e/images/check-version /out/msgbench-lazyfs "$VERSION"

FROM scratch
COPY --from=build /out/nats-server /nats-server
COPY --from=lazyfs /out/msgbench-lazyfs /usr/local/bin/msgbench-lazyfs
COPY --from=build /out/etc/ /etc/
COPY --from=build --chown=65532:65532 /out/data /data
ENV PATH=/usr/local/bin:/usr/bin:/bin
USER 65532:65532
EXPOSE 4222 6222 8222
ENTRYPOINT ["/nats-server"]
CMD ["--config", "/etc/nats/nats.conf"]

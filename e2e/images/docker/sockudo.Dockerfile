# Docker equivalent of `e2e/images/build sockudo`: sockudo (PubSubServer protocol pusher) built
# from its crate on crates.io with only the `local` feature, as `e2e/tools/ensure sockudo` builds
# it, under msgbench's name, run as uid 65532. Build from the repository root:
#   docker build -f e2e/images/docker/sockudo.Dockerfile -t ghcr.io/msgbench/sockudo:5.2.0 .
# SOCKUDO_VERSION is the crate version and the image tag (the chart's images.sockudo.tag); the
# build fails unless the binary says it is that version. The environment below keeps it off
# external services (local adapter, in-memory cache, app manager and rate limiter, no webhook
# queue); the operator adds the app's credentials and limits.
# Base images by digest (the tag is for people; .github/workflows/release.yml checks each digest
# still serves linux/amd64 and linux/arm64).
FROM rust:1-bookworm@sha256:fdb91abf3cb33f1ebc84a76461d2472fd8cf606df69c181050fa7474bade2895 AS build
ARG SOCKUDO_VERSION=5.2.0
COPY e2e/images/check-version /usr/local/bin/check-version
# protoc and its well-known types: sockudo's metrics exporter compiles a .proto at build time.
RUN apt-get update && apt-get install -y --no-install-recommends protobuf-compiler libprotobuf-dev \
 && cargo install sockudo --version "$SOCKUDO_VERSION" --locked --no-default-features \
      --features local --root /out --bin sockudo \
 && check-version /out/bin/sockudo "$SOCKUDO_VERSION"

# glibc + libgcc like the ldd-assembled image, CA certificates, user 65532, no shell.
FROM gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f
COPY --from=build /out/bin/sockudo /usr/local/bin/sockudo
ENV PATH=/usr/local/bin:/usr/bin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    HOST=0.0.0.0 PORT=6001 ADAPTER_DRIVER=local CACHE_DRIVER=memory QUEUE_DRIVER=none \
    APP_MANAGER_DRIVER=memory RATE_LIMITER_DRIVER=memory
USER 65532:65532
WORKDIR /
EXPOSE 6001 9601
ENTRYPOINT ["/usr/local/bin/sockudo"]

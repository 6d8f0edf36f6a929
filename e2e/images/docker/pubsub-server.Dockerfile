# Docker equivalent of `e2e/images/build pubsub-server` (that script needs no Docker; this is for
# Docker/kind users). Build from the repository root:
#   docker build -f e2e/images/docker/pubsub-server.Dockerfile -t ghcr.io/msgbench/pubsub-server:0.1.0 .
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release -p pubsub-server

# glibc + libgcc like the ldd-assembled image, CA certificates, user 65532, no shell.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/pubsub-server /usr/local/bin/pubsub-server
ENV PATH=/usr/local/bin:/usr/bin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/pubsub-server"]

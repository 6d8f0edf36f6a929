# Docker equivalent of `e2e/images/build operator` (that script needs no Docker; this is for
# Docker/kind users). Build from the repository root:
#   docker build -f e2e/images/docker/operator.Dockerfile -t ghcr.io/msgbench/operator:0.1.0 .
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release -p msgbench-operator

# glibc + libgcc like the ldd-assembled image, CA certificates, user 65532, no shell.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/msgbench-operator /usr/local/bin/msgbench-operator
ENV PATH=/usr/local/bin:/usr/bin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/msgbench-operator"]

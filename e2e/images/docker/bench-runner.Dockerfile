# Docker equivalent of `e2e/images/build bench-runner` (that script needs no Docker; this is for
# Docker/kind users). Build from the repository root:
#   docker build -f e2e/images/docker/bench-runner.Dockerfile -t ghcr.io/msgbench/bench-runner:0.1.0 .
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release -p bench-runner

# nft and its libraries for the fault agent's partitions (`fault-agent --network`).
FROM debian:bookworm-slim AS nft
RUN apt-get update && apt-get install -y --no-install-recommends nftables \
 && mkdir -p /out/usr/sbin /out/lib \
 && cp /usr/sbin/nft /out/usr/sbin/ \
 && for l in $(ldd /usr/sbin/nft | grep -o '/[^ ]*'); do mkdir -p "/out$(dirname "$l")"; cp -L "$l" "/out$l"; done

# glibc + libgcc like the ldd-assembled image, CA certificates, user 65532, no shell.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/bench-runner /usr/local/bin/bench-runner
COPY --from=nft /out/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/bench-runner"]

# Docker equivalent of `e2e/images/build bench-runner` (that script needs no Docker; this is for
# Docker/kind users). Build from the repository root:
#   docker build -f e2e/images/docker/bench-runner.Dockerfile --build-arg VERSION=0.1.0 \
#     -t ghcr.io/msgbench/bench-runner:0.1.0 .
# VERSION is the image tag: the build fails unless the binary says it is that version.
# Base images by digest (the tag is for people; .github/workflows/release.yml checks each digest
# still serves linux/amd64 and linux/arm64).
FROM rust:1-bookworm@sha256:fdb91abf3cb33f1ebc84a76461d2472fd8cf606df69c181050fa7474bade2895 AS build
ARG VERSION
WORKDIR /src
COPY . .
RUN test -n "$VERSION" || { echo "--build-arg VERSION=<the image tag> is required" >&2; exit 1; } \
 && cargo build --release --locked -p bench-runner \
 && e2e/images/check-version target/release/bench-runner "$VERSION"

# nft and its libraries for the fault agent's partitions (`fault-agent --network`).
FROM debian:bookworm-slim@sha256:7b140f374b289a7c2befc338f42ebe6441b7ea838a042bbd5acbfca6ec875818 AS nft
RUN apt-get update && apt-get install -y --no-install-recommends nftables \
 && mkdir -p /out/usr/sbin /out/lib \
 && cp /usr/sbin/nft /out/usr/sbin/ \
 && for l in $(ldd /usr/sbin/nft | grep -o '/[^ ]*'); do mkdir -p "/out$(dirname "$l")"; cp -L "$l" "/out$l"; done

# glibc + libgcc like the ldd-assembled image, CA certificates, user 65532, no shell.
FROM gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f
COPY --from=build /src/target/release/bench-runner /usr/local/bin/bench-runner
COPY --from=nft /out/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/bench-runner"]

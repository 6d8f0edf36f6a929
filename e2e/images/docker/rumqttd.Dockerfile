# Docker equivalent of `e2e/images/build rumqttd`: rumqttd (MqttBroker implementation rumqttd)
# built from its crate on crates.io at the pinned version, under msgbench's name, run as uid 65532.
# The crate's own Cargo.lock no longer builds with today's Rust: the source (checked against the
# sha256 in e2e/images/locks) builds with msgbench's lockfile there, as `e2e/tools/ensure` does.
# Build from the repository root:
#   docker build -f e2e/images/docker/rumqttd.Dockerfile -t ghcr.io/msgbench/rumqttd:0.19.0 .
# RUMQTTD_VERSION is the crate version and the image tag (the chart's images.rumqttd.tag); the build
# fails unless the binary says it is that version. The operator runs `rumqttd --config <file>` with
# the TOML it renders, so the image carries no config of its own.
# Base images by digest (the tag is for people; .github/workflows/release.yml checks each digest
# still serves linux/amd64 and linux/arm64).
FROM rust:1-bookworm@sha256:fdb91abf3cb33f1ebc84a76461d2472fd8cf606df69c181050fa7474bade2895 AS build
ARG RUMQTTD_VERSION=0.19.0
COPY e2e/images/check-version /usr/local/bin/check-version
COPY e2e/images/locks/ /locks/
WORKDIR /src
RUN curl -sSfL "https://static.crates.io/crates/rumqttd/rumqttd-$RUMQTTD_VERSION.crate" -o "rumqttd-$RUMQTTD_VERSION.crate" \
 && sha256sum -c "/locks/rumqttd-$RUMQTTD_VERSION.crate.sha256" \
 && tar -xzf "rumqttd-$RUMQTTD_VERSION.crate" \
 && cp "/locks/rumqttd-$RUMQTTD_VERSION.Cargo.lock" "rumqttd-$RUMQTTD_VERSION/Cargo.lock" \
 && cargo install --path "rumqttd-$RUMQTTD_VERSION" --locked --root /out --bin rumqttd \
 && check-version /out/bin/rumqttd "$RUMQTTD_VERSION"

# glibc + libgcc, user 65532, no shell.
FROM gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f
COPY --from=build /out/bin/rumqttd /usr/local/bin/rumqttd
ENV PATH=/usr/local/bin:/usr/bin:/bin
USER 65532:65532
EXPOSE 1883
ENTRYPOINT ["/usr/local/bin/rumqttd"]

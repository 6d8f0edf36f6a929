# Docker equivalent of `e2e/images/build nats`: a static nats-server built from source at
# /nats-server, non-root, under msgbench's name and the server's own version. Build from the
# repository root:
#   docker build -f e2e/images/docker/nats.Dockerfile -t ghcr.io/msgbench/nats-server:2.15.2 .
# NATS_SERVER_VERSION is the image tag (the chart's images.nats.tag): the build fails unless the
# binary says it is that version.
# Base images by digest (the tag is for people; .github/workflows/release.yml checks each digest
# still serves linux/amd64 and linux/arm64).
FROM golang:1.25-bookworm@sha256:3b4a11519ad929d1e1d261a12cff056f0c85b735253d7d861346b9c6f8b36437 AS build
ARG NATS_SERVER_VERSION=2.15.2
COPY e2e/images/check-version /usr/local/bin/check-version
RUN CGO_ENABLED=0 GOBIN=/out go install "github.com/nats-io/nats-server/v2@v$NATS_SERVER_VERSION" \
 && check-version /out/nats-server "$NATS_SERVER_VERSION" \
 && mkdir -p /out/etc/nats /out/data \
 && printf 'port: 4222\nhttp_port: 8222\njetstream {\n  store_dir: /data\n}\n' > /out/etc/nats/nats.conf

FROM scratch
COPY --from=build /out/nats-server /nats-server
COPY --from=build /out/etc/ /etc/
COPY --from=build --chown=65532:65532 /out/data /data
ENV PATH=/usr/local/bin:/usr/bin:/bin
USER 65532:65532
EXPOSE 4222 6222 8222
ENTRYPOINT ["/nats-server"]
CMD ["--config", "/etc/nats/nats.conf"]

# Docker equivalent of `e2e/images/build nats`: a static nats-server v2.15.2 at /nats-server,
# like the official image, but non-root. (Docker users may also use the official nats:2.15.2.)
#   docker build -f e2e/images/docker/nats.Dockerfile -t docker.io/library/nats:2.15.2 .
FROM golang:1.25-bookworm AS build
RUN CGO_ENABLED=0 GOBIN=/out go install github.com/nats-io/nats-server/v2@v2.15.2 \
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

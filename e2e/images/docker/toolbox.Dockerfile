# Docker equivalent of `e2e/images/build toolbox`: static busybox for debugging (ephemeral
# containers, e2e probes), non-root.
#   docker build -f e2e/images/docker/toolbox.Dockerfile -t ghcr.io/msgbench/toolbox:0.1.0 .
# Base images by digest (the tag is for people; .github/workflows/release.yml checks each digest
# still serves linux/amd64 and linux/arm64).
FROM debian:bookworm-slim@sha256:7b140f374b289a7c2befc338f42ebe6441b7ea838a042bbd5acbfca6ec875818 AS build
RUN apt-get update && apt-get install -y --no-install-recommends busybox-static \
 && mkdir -p /out/bin && cp /bin/busybox /out/bin/busybox \
 && for a in $(/bin/busybox --list); do ln -sf busybox /out/bin/$a; done

FROM scratch
COPY --from=build /out/ /
COPY --from=build /etc/ssl/certs/ /etc/ssl/certs/
ENV PATH=/usr/local/bin:/usr/bin:/bin
USER 65532:65532
ENTRYPOINT ["/bin/sh"]

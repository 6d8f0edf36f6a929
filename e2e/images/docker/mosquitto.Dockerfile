# Docker equivalent of `e2e/images/build mosquitto`: Debian bookworm's mosquitto package with its
# libraries and /usr/bin/mosquitto_passwd (an MqttBroker with spec.auth runs it), run as uid
# 1883, under msgbench's name. Build from the repository root:
#   docker build -f e2e/images/docker/mosquitto.Dockerfile -t ghcr.io/msgbench/mosquitto:2.0.11-1.2_deb12u2 .
# MOSQUITTO_VERSION is the Debian package version installed; the image tag is it with '+' as '_'
# (the chart's images.mosquitto.tag). The build fails unless the binary says it is its upstream
# part, or when Debian no longer serves that package version.
# Base images by digest (the tag is for people; .github/workflows/release.yml checks each digest
# still serves linux/amd64 and linux/arm64).
FROM debian:bookworm-slim@sha256:7b140f374b289a7c2befc338f42ebe6441b7ea838a042bbd5acbfca6ec875818
ARG MOSQUITTO_VERSION=2.0.11-1.2+deb12u2
COPY e2e/images/check-version /usr/local/bin/check-version
RUN apt-get update && apt-get install -y --no-install-recommends "mosquitto=$MOSQUITTO_VERSION" \
 && check-version /usr/sbin/mosquitto "${MOSQUITTO_VERSION%%-*}" && rm /usr/local/bin/check-version \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /mosquitto/config /mosquitto/data /mosquitto/log \
 && printf 'listener 1883\nallow_anonymous true\npersistence false\n' > /mosquitto/config/mosquitto.conf \
 && chown -R 1883:1883 /mosquitto \
 && usermod -u 1883 mosquitto && groupmod -g 1883 mosquitto
USER 1883:1883
EXPOSE 1883
ENTRYPOINT ["/usr/sbin/mosquitto"]
CMD ["-c", "/mosquitto/config/mosquitto.conf"]

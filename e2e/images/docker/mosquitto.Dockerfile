# Docker equivalent of `e2e/images/build mosquitto`: Debian bookworm's mosquitto 2.0.11 with its
# libraries and /usr/bin/mosquitto_passwd (an MqttBroker with spec.auth runs it), run as uid
# 1883. (Docker users may also use the official eclipse-mosquitto:2.0.11, which has both.)
#   docker build -f e2e/images/docker/mosquitto.Dockerfile -t docker.io/library/eclipse-mosquitto:2.0.11 .
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends mosquitto \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /mosquitto/config /mosquitto/data /mosquitto/log \
 && printf 'listener 1883\nallow_anonymous true\npersistence false\n' > /mosquitto/config/mosquitto.conf \
 && chown -R 1883:1883 /mosquitto \
 && usermod -u 1883 mosquitto && groupmod -g 1883 mosquitto
USER 1883:1883
EXPOSE 1883
ENTRYPOINT ["/usr/sbin/mosquitto"]
CMD ["-c", "/mosquitto/config/mosquitto.conf"]

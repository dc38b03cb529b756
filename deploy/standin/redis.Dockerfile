# Stand-in for redis:7.4-alpine where no registry is reachable: Debian's redis-server, data in /data.
ARG DEBIAN=agui-standin/debian:bookworm
FROM ${DEBIAN}
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/* && install -d -o redis -g redis /data
WORKDIR /data
USER redis
EXPOSE 6379
CMD ["redis-server"]

# Stand-in for nginx:1.27-alpine where no registry is reachable: Debian's nginx (1.22) and wget (the compose
# health check uses it); logs go to the container's output, as in the official image.
ARG DEBIAN=agui-standin/debian:bookworm
FROM ${DEBIAN}
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx-core wget \
    && rm -rf /var/lib/apt/lists/* \
    && ln -sf /dev/stdout /var/log/nginx/access.log && ln -sf /dev/stderr /var/log/nginx/error.log
EXPOSE 8080
STOPSIGNAL SIGQUIT
CMD ["nginx", "-g", "daemon off;"]

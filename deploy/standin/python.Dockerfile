# Stand-in for python:3.12-slim where no registry is reachable: Debian's python3 (3.11) with venv and pip.
# PIP_CERT: pip inside a build trusts the host's CA bundle (the package mirror may sit behind a TLS-inspecting proxy).
ARG DEBIAN=agui-standin/debian:bookworm
FROM ${DEBIAN}
COPY ca-certificates.crt /etc/ssl/certs/agui-host-ca.crt
ENV PIP_CERT=/etc/ssl/certs/agui-host-ca.crt PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*

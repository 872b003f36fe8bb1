# syntax=docker/dockerfile:1
# One image for every effectgate service and the `effectgate` CLI.
#
#   docker build -t effectgate:0.1 .
#   docker run -e SERVICE=policy -e NATS_URL=... effectgate:0.1      # python -m effectgate.policy
#
# docker-compose.yml builds it once per service and picks the service with `command`.
# Dependencies come from uv.lock exactly (`--frozen`); dev tools are not installed.
FROM python:3.11-slim

ARG UV_VERSION=0.13.8

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv \
    PATH=/app/.venv/bin:$PATH \
    SERVICE=registry

RUN pip install --no-cache-dir "uv==${UV_VERSION}"

# mcp-server-git (a workspace dependency, configured in the demo and docs/how-to/configure-mcp-servers.md)
# runs the `git` binary; only git itself, no recommended packages, no apt lists left behind.
RUN apt-get update \
    && apt-get install --yes --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*

# An unprivileged user; the mount points of the keys, sandbox, data and TLS volumes are
# created here so that named volumes start out owned by it.
RUN useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin effectgate \
    && mkdir -p /app /keys /sandbox /data /nats-tls /nats-ca \
    && chown effectgate:effectgate /keys /sandbox /data /nats-tls /nats-ca

WORKDIR /app
COPY . .
RUN --mount=type=cache,target=/root/.cache/uv uv sync --frozen --no-dev

USER effectgate
CMD ["sh", "-c", "exec python -m effectgate.${SERVICE}"]

# Recipes for people who have `just`; each calls ./dev, the single entry point.

default:
    @just --list

# the scripted demo on real NATS, Redis, files and git
demo:
    ./dev demo

# lint, types and every test (unit, connected, e2e, fault)
test *args:
    ./dev test {{args}}

# ruff and mypy only
lint:
    ./dev lint

# all services until Ctrl-C
up:
    ./dev up

# latency and throughput against a bare NATS request/reply
bench:
    ./dev bench

# Recipes for people who have `just`; each calls ./dev, the single entry point.
# Arguments reach ./dev as they were typed, quoting kept (`just test -k "a or b"` passes
# `-k` and `a or b`): positional arguments are on, and recipes pass "$@", never {{args}}.

set positional-arguments

default:
    @just --list

# the scripted demo on real NATS, Redis, files and git
demo *args:
    ./dev demo "$@"

# lint, types and every test (unit, connected, e2e, fault)
test *args:
    ./dev test "$@"

# ruff and mypy only
lint:
    ./dev lint

# all services until Ctrl-C
up *args:
    ./dev up "$@"

# latency and throughput against a bare NATS request/reply
bench *args:
    ./dev bench "$@"

# the SDK's wheels into a folder (default dist/sdk): pip install effectgate-sdk --find-links DIR
sdk-wheels *args:
    ./dev sdk-wheels "$@"

"""Which Redis URLs the settings accept, and the refusal naming what is wrong with the rest."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from effectgate.shared.config.settings import ServiceSettings
from effectgate.shared.runtime.redis_urls import SentinelUrl, checked_redis_url, parse_sentinel_url


def test_a_sentinel_url_names_the_sentinels_the_master_and_the_database() -> None:
    url = "redis+sentinel://u:p%40ss@h1:26380,h2,[::1]:26381/main/3"
    assert parse_sentinel_url(url) == SentinelUrl(
        (("h1", 26380), ("h2", 26379), ("::1", 26381)), "main", 3, username="u", password="p@ss"
    )
    assert parse_sentinel_url("redis+sentinel://h1:26379/main") == SentinelUrl((("h1", 26379),), "main")


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("redis+sentinel:///main/0", "names no Sentinel"),
        ("redis+sentinel://h1:26379", "names no master"),
        ("redis+sentinel://h1:26379/", "names no master"),
        ("redis+sentinel://h1:port/main", "port 'port' is not a number"),
        ("redis+sentinel://h1:0/main", "port '0' is not a number in 1..65535"),
        ("redis+sentinel://h1,:26379/main", "':26379' has no host"),
        ("redis+sentinel://h1/main/zero", "database 'zero'"),
        ("redis+sentinel://h1/main/0/extra", "more than /<master name>/<db>"),
        ("redis+sentinel://h1/main?ssl=1", "no query"),
        ("sentinel://h1/main", "must start with"),
        ("rediss+sentinel://h1/main", "must start with"),
    ],
)
def test_a_malformed_url_is_refused_naming_what_is_wrong(url: str, named: str) -> None:
    with pytest.raises(ValueError, match=re.escape(named)):
        checked_redis_url(url)


def test_the_settings_refuse_a_malformed_sentinel_url() -> None:
    with pytest.raises(ValidationError, match="names no master"):
        ServiceSettings(redis_url="redis+sentinel://h1:26379")
    assert ServiceSettings(redis_url="redis+sentinel://h1/main").redis_url == "redis+sentinel://h1/main"
    assert ServiceSettings(redis_url="unix:///run/redis.sock").redis_url == "unix:///run/redis.sock"

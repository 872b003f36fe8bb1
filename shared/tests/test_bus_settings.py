"""The bus layout comes from EFFECTGATE_BUS_*, then the [bus] table of effectgate.toml, then the defaults."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from effectgate.shared.config.bus import RECORD_MAX_AGE_S, BusLayout, BusSettings
from effectgate.shared.config.effectgate_file import ConfigInvalid


def test_the_defaults_are_one_replica_and_no_byte_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EFFECTGATE_CONFIG", raising=False)
    assert BusSettings().layout() == BusLayout(replicas=1, record_max_age_s=RECORD_MAX_AGE_S, record_max_bytes=None)


def test_the_file_sets_the_layout_and_the_environment_overrides_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "effectgate.toml"
    config.write_text("[bus]\nreplicas = 3\nrecord_max_bytes = 1000000\nstore_high_water = 0.8\n")
    layout = BusSettings(config_file=config).layout()
    assert (layout.replicas, layout.record_max_bytes, layout.store_high_water) == (3, 1_000_000, 0.8)
    monkeypatch.setenv("EFFECTGATE_BUS_REPLICAS", "1")
    assert BusSettings(config_file=config).layout().replicas == 1


def test_a_replica_count_out_of_range_is_refused_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EFFECTGATE_BUS_REPLICAS", "0")
    with pytest.raises(pydantic.ValidationError, match="replicas"):
        BusSettings()


def test_an_unknown_bus_key_is_refused_with_the_closest_one(tmp_path: Path) -> None:
    config = tmp_path / "effectgate.toml"
    config.write_text("[bus]\nreplica = 3\n")
    with pytest.raises(ConfigInvalid, match='bus.replica: unknown field; did you mean "replicas"'):
        BusSettings(config_file=config)

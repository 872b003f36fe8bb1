"""An export file that is not a chain, or keys that are missing, are refused, naming which."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectgate.cli.commands.audit_file import ExportInvalid, verify_file
from effectgate.shared.config.keyring import PUBLIC, lay_out_keys


@pytest.mark.parametrize("line", ['{"sequence": 1}', "not json", "[]", '{"sequence": "1"}'])
def test_a_line_that_is_not_a_record_is_refused_naming_the_line(tmp_path: Path, line: str) -> None:
    lay_out_keys(tmp_path / "keys")
    export = tmp_path / "chain.jsonl"
    export.write_text(f"{line}\n")
    with pytest.raises(ExportInvalid, match="line 1 is not an audit record"):
        verify_file(export, tmp_path / "keys" / PUBLIC)


def test_missing_public_keys_are_named(tmp_path: Path) -> None:
    export = tmp_path / "chain.jsonl"
    export.write_text("")
    with pytest.raises(ExportInvalid, match="lacks approvals.pub, policy.pub, receipts.pub"):
        verify_file(export, tmp_path)

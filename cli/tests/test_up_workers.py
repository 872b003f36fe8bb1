"""``effectgate up`` runs the tool workers of ``[workers.<name>]``: each its own NATS user, restarted like a service."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectgate.cli.stack.credentials import BusCredentials, stack_directory
from effectgate.cli.stack.files import PRINCIPALS_ENV
from effectgate.cli.stack.system import Stack
from effectgate.cli.stack.workers import configured_workers, with_workers
from effectgate.contracts.directory import PrincipalDirectory
from effectgate.shared.config.effectgate_file import CONFIG_ENV
from effectgate.shared.config.toml_file import ConfigInvalid


def config(tmp_path: Path, text: str) -> dict[str, str]:
    (tmp_path / "effectgate.toml").write_text(text)
    return {CONFIG_ENV: str(tmp_path / "effectgate.toml")}


def test_configured_workers_get_a_nats_user_and_an_account_of_their_own(tmp_path: Path) -> None:
    env = config(tmp_path, '[workers.payments]\nmodule = "acme_tools.payments"\n')
    workers = configured_workers(env)
    assert workers == {"payments": "acme_tools.payments"}
    directory = with_workers(PrincipalDirectory(principals={}, approvers={}), workers)
    credentials, text = BusCredentials.generate(directory)
    assert "worker-payments" in credentials.passwords
    assert credentials.inboxes["worker-payments"] == "_INBOX_worker-payments"
    assert '"WORKER_payments": {' in text


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[workers.Pay]\nmodule = "m"\n', "workers.Pay: worker name must match"),
        ('[workers.pay]\nmodule = "not a module"\n', "workers.pay.module: must be a dotted module name"),
        ("[workers.pay]\n", "workers.pay"),
        ('[workers.pay]\nmodule = "m"\nreplicas = 2\n', "workers.pay"),
        ('[worker.pay]\nmodule = "m"\n', 'did you mean "workers"?'),
    ],
    ids=["bad-name", "bad-module", "no-module", "unknown-key", "misspelt-table"],
)
def test_a_bad_worker_table_is_refused_naming_it(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(ConfigInvalid) as refused:
        configured_workers(config(tmp_path, text))
    assert any(said in problem for problem in refused.value.problems)


def test_no_config_no_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    assert configured_workers({}) == {}


def test_a_worker_that_exited_is_started_again_as_a_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stack = Stack(tmp_path, "nats://127.0.0.1:9", "redis://127.0.0.1:9", {})
    started: list[tuple[str, ...]] = []
    monkeypatch.setattr(stack, "start", lambda service, name=None: started.append((service, name or service)))
    stack.services["worker-payments"], stack.workers["worker-payments"] = "worker", ("payments", "acme_tools.payments")
    stack.services["policy-2"] = "policy"
    monkeypatch.setattr(stack, "start_worker", lambda name, module: started.append((name, module)))
    stack.restart("worker-payments")
    stack.restart("policy-2")
    assert started == [("payments", "acme_tools.payments"), ("policy", "policy-2")]


def test_workers_of_the_principal_directory_get_their_users_on_the_stack(tmp_path: Path) -> None:
    (tmp_path / "principals.toml").write_text("[principals.a]\nautonomy = 1\n[workers.refunds]\n")
    files = {
        name: str(tmp_path / "principals.toml") for name in (PRINCIPALS_ENV, "EFFECTGATE_APPROVALS_PRINCIPALS_FILE")
    }
    credentials, _ = BusCredentials.generate(stack_directory(files))
    assert {"agent-a", "worker-refunds"} <= set(credentials.passwords)

"""deploy/kubernetes read as kustomize reads it: the kustomization and the objects of its resource files.

The tests check each resource file (the kustomization lists every one) and each generated ConfigMap's
files; they do not render the overlay (no kustomize binary is needed), so names here are the unhashed
names the files use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.deploy.settings_env import ROOT

KUBERNETES = ROOT / "deploy" / "kubernetes"
KUSTOMIZATION: dict[str, Any] = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
Object = dict[str, Any]


def resource_files() -> list[Path]:
    """The kustomization's resources, in its order."""
    return [KUBERNETES / name for name in KUSTOMIZATION["resources"]]


def objects() -> list[Object]:
    """Every object of every resource file."""
    return [doc for path in resource_files() for doc in yaml.safe_load_all(path.read_text()) if doc]


def of_kind(kind: str) -> dict[str, Object]:
    """The objects of one kind, by name."""
    return {obj["metadata"]["name"]: obj for obj in objects() if obj["kind"] == kind}


def generated_config_maps() -> dict[str, list[Path]]:
    """``configMapGenerator`` name → its files."""
    return {item["name"]: [KUBERNETES / f for f in item["files"]] for item in KUSTOMIZATION["configMapGenerator"]}


def pod_spec(workload: Object) -> dict[str, Any]:
    """The pod template's spec of a Deployment or StatefulSet."""
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def container(workload: Object) -> dict[str, Any]:
    """The one container of a workload."""
    (only,) = pod_spec(workload)["containers"]
    found: dict[str, Any] = only
    return found


def env(workload: Object) -> dict[str, str]:
    """The container's literal environment, name → value."""
    return {item["name"]: item["value"] for item in container(workload).get("env", []) if "value" in item}


def mounts(workload: Object) -> dict[str, dict[str, Any]]:
    """Mount path → the volume mounted there (a StatefulSet's claim templates as ``{"name": …, "claim": …}``)."""
    claims = {t["metadata"]["name"]: t for t in workload["spec"].get("volumeClaimTemplates", [])}
    volumes = {name: {"name": name, "claim": claim} for name, claim in claims.items()}
    volumes |= {volume["name"]: volume for volume in pod_spec(workload).get("volumes", [])}
    return {mount["mountPath"]: volumes[mount["name"]] for mount in container(workload).get("volumeMounts", [])}


def port_number(workload: Object, port: int | str) -> int:
    """A container port by number or by name."""
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in container(workload)["ports"] if p["name"] == port)


def labels_match(selector: dict[str, Any], workload: Object) -> bool:
    """Whether a label selector's ``matchLabels`` select the workload's pods."""
    labels = workload["spec"]["template"]["metadata"]["labels"]
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())

"""Reading deploy/: its Kubernetes manifests, the settings a pod loads from them, and the metric
names each PromQL expression of the Prometheus rules and the Grafana dashboard reads."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from toolslim.config.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]


DEPLOY = ROOT / "deploy"


KUBERNETES = DEPLOY / "kubernetes"


RULES = DEPLOY / "prometheus" / "rules.yml"


DASHBOARD = DEPLOY / "grafana" / "toolslim.json"


TOKEN = "deploy-test-token-0123456789abcdef"


HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


PROMQL_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')


PROMQL_NAME = re.compile(r"(?<![\w:])[A-Za-z_][\w:]*")


def manifests() -> dict[str, dict[str, Any]]:
    """Every resource the kustomization lists, by kind (one of each)."""
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    found: dict[str, dict[str, Any]] = {}
    for name in kustomization["resources"]:
        for doc in yaml.safe_load_all((KUBERNETES / name).read_text()):
            if doc:
                assert doc["kind"] not in found, f"two {doc['kind']} resources"
                found[doc["kind"]] = doc
    return found


def config_text() -> str:
    (text,) = manifests()["ConfigMap"]["data"].values()
    return str(text)


def deployed_settings(tmp_path: Path, env: Mapping[str, str], **flags: Any) -> Settings:
    """The ConfigMap's config.yaml through toolslim's own loader, with the pod's environment."""
    path = tmp_path / "config.yaml"
    path.write_text(config_text())
    return load_settings(str(path), flags, env)


def rule_groups() -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = yaml.safe_load(RULES.read_text())["groups"]
    return groups


def dashboard_queries() -> dict[str, str]:
    """Every PromQL query of the dashboard, by where it is: panel targets and query variables."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = {
        f"panel {panel['id']} {target['refId']}": target["expr"]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    }
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            queries[f"variable {variable['name']}"] = variable["query"]["query"]
    return queries


def identifiers(expr: str) -> set[str]:
    """The identifiers of a PromQL expression outside string literals (label values, regexes)."""
    return set(PROMQL_NAME.findall(PROMQL_STRING.sub('""', expr)))


def metric_names(expr: str) -> set[str]:
    """Names of toolslim metrics an expression reads (`toolslim_...`; recorded `toolslim:...`
    names are rules, not metrics)."""
    return {name for name in identifiers(expr) if name.startswith("toolslim_") and ":" not in name}


def exported_names(text: str) -> dict[str, str]:
    """Series name -> family name for every family /metrics declares, with or without samples:
    a histogram's series are its _bucket, _sum and _count."""
    names: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            suffixes = HISTOGRAM_SUFFIXES if kind == "histogram" else ("",)
            names.update({name + suffix: name for suffix in suffixes})
    return names

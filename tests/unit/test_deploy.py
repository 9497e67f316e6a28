"""deploy/: the Kubernetes manifests fit toolslim's own settings and image, and every PromQL
query of the Prometheus rules and the Grafana dashboard is well formed over recorded names.

Schema validation (kubernetes-validate) and promtool run in .ci/validate-deploy; these tests need
only Python. The ServiceMonitor is checked here against deploy/kubernetes/schemas/.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from deploy_assets import (
    DASHBOARD,
    DEPLOY,
    KUBERNETES,
    ROOT,
    TOKEN,
    config_text,
    dashboard_queries,
    deployed_settings,
    exported_names,
    identifiers,
    manifests,
    metric_names,
    rule_groups,
)
from toolslim.config.settings import ConfigError, Settings

SERVICE_MONITOR_SCHEMA = KUBERNETES / "schemas" / "servicemonitor-monitoring-v1.json"


# --- reading deploy/ -------------------------------------------------------------------------


def pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = manifests()["Deployment"]["spec"]["template"]["spec"]
    return spec


def container() -> dict[str, Any]:
    (only,) = pod_spec()["containers"]
    return dict(only)


def stop_seconds(settings: Settings) -> float:
    """The longest toolslim takes to exit after SIGTERM: the readiness delay, if the version has
    one (shutdown_delay), then the grace for in-flight streams."""
    delay: float = getattr(settings, "shutdown_delay", 0.0)
    return delay + settings.shutdown_grace


# --- PromQL, as far as names go --------------------------------------------------------------


def recorded_names(expr: str) -> set[str]:
    return {name for name in identifiers(expr) if ":" in name}


# --- a real /metrics -------------------------------------------------------------------------


# --- the metric names ------------------------------------------------------------------------


def test_the_tokenizer_takes_metric_names_and_leaves_strings_functions_and_rules_alone() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le) (rate(toolslim_proxy_overhead_seconds_bucket"
        '{job=~"toolslim_not_a_metric"}[5m]))) / on (job) toolslim:requests:rate5m'
        " > bool toolslim_requests_total offset 1h"
    )
    assert metric_names(expr) == {
        "toolslim_proxy_overhead_seconds_bucket",
        "toolslim_requests_total",
    }
    assert recorded_names(expr) == {"toolslim:requests:rate5m"}
    text = "# TYPE toolslim_x_seconds histogram\n# TYPE toolslim_y_total counter\n"
    assert exported_names(text) == {
        "toolslim_x_seconds_bucket": "toolslim_x_seconds",
        "toolslim_x_seconds_sum": "toolslim_x_seconds",
        "toolslim_x_seconds_count": "toolslim_x_seconds",
        "toolslim_y_total": "toolslim_y_total",
    }


def test_every_recorded_name_an_expression_reads_is_recorded_in_rules() -> None:
    rules = [rule for group in rule_groups() for rule in group["rules"]]
    recorded = {rule["record"] for rule in rules if "record" in rule}
    read = {name for rule in rules for name in recorded_names(rule["expr"])}
    assert read <= recorded, sorted(read - recorded)
    for name in recorded:  # level:metric:operations, the Prometheus naming convention
        assert re.fullmatch(r"toolslim:\w+:\w+", name), name


def test_every_alert_has_a_severity_and_a_summary() -> None:
    for group in rule_groups():
        for rule in group["rules"]:
            if "alert" in rule:
                assert rule["labels"]["severity"] in {"critical", "warning", "info"}, rule["alert"]
                assert rule["annotations"]["summary"], rule["alert"]


def test_the_dashboard_is_one_importable_grafana_dashboard_over_a_chosen_data_source() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    assert len({panel["id"] for panel in panels}) == len(panels)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        refs = [target["refId"] for target in panel["targets"]]
        assert len(set(refs)) == len(refs), panel["title"]
    for where, expr in dashboard_queries().items():
        if where.startswith("panel"):
            assert 'job=~"$job"' in expr, where  # the job and instance pickers apply everywhere


# --- the Kubernetes manifests ----------------------------------------------------------------


def test_the_kustomization_lists_every_manifest_and_the_issue_asks_for_each_kind() -> None:
    listed = set(yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())["resources"])
    assert listed == {p.name for p in KUBERNETES.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(manifests()) == {
        "ConfigMap",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
        "ServiceMonitor",
    }


def test_the_configmap_config_loads_with_toolslims_loader_given_the_token_from_the_secret(
    tmp_path: Path,
) -> None:
    settings = deployed_settings(tmp_path, {"TOOLSLIM_ADMIN_TOKEN": TOKEN})
    assert settings.host == "0.0.0.0"
    assert settings.port == container()["ports"][0]["containerPort"]
    assert settings.admin_token == TOKEN
    assert "admin_token" not in yaml.safe_load(config_text())
    with pytest.raises(ConfigError, match="admin_token"):  # fails closed without the Secret
        deployed_settings(tmp_path, {})


def test_the_admin_token_comes_from_a_secret_reference_that_the_service_monitor_shares() -> None:
    (env,) = [e for e in container()["env"] if e["name"] == "TOOLSLIM_ADMIN_TOKEN"]
    assert "value" not in env
    secret = env["valueFrom"]["secretKeyRef"]
    assert "optional" not in secret  # a missing Secret keeps the pod from starting
    (endpoint,) = manifests()["ServiceMonitor"]["spec"]["endpoints"]
    assert endpoint["authorization"]["type"] == "Bearer"
    assert endpoint["authorization"]["credentials"] == {
        "name": secret["name"],
        "key": secret["key"],
    }
    for path in DEPLOY.rglob("*.y*ml"):  # the Secret itself is never committed
        for doc in yaml.safe_load_all(path.read_text()):
            assert not (isinstance(doc, dict) and doc.get("kind") == "Secret"), path


def test_termination_grace_outlasts_the_configured_stop(tmp_path: Path) -> None:
    settings = deployed_settings(tmp_path, {"TOOLSLIM_ADMIN_TOKEN": TOKEN})
    assert pod_spec()["terminationGracePeriodSeconds"] > stop_seconds(settings)
    # The liveness probe must not restart a pod that stopped listening to drain its streams.
    probe = container()["livenessProbe"]
    assert (
        probe["periodSeconds"] * probe["failureThreshold"]
        > pod_spec()["terminationGracePeriodSeconds"]
    )


def test_probes_ask_readyz_for_readiness_and_healthz_for_liveness_on_the_served_port() -> None:
    c = container()
    (port,) = c["ports"]
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}


def test_the_pod_runs_as_the_images_non_root_user_on_a_read_only_root_filesystem() -> None:
    (user,) = re.findall(r"^USER (\d+):(\d+)$", (ROOT / "Dockerfile").read_text(), re.M)
    pod, c = pod_spec(), container()
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == tuple(
        map(int, user)
    )
    security = c["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    (tmp,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert "emptyDir" in volumes[tmp["name"]]


def test_the_container_reads_the_configmap_file_it_mounts() -> None:
    c, pod = container(), pod_spec()
    config_path = c["command"][c["command"].index("--config") + 1]
    mount = next(m for m in c["volumeMounts"] if config_path.startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == manifests()["ConfigMap"]["metadata"]["name"]
    key = config_path.removeprefix(mount["mountPath"] + "/")
    assert key in manifests()["ConfigMap"]["data"]
    assert c["command"][:2] == ["toolslim", "serve"]


def test_service_links_are_off_because_a_service_named_toolslim_would_set_toolslim_port(
    tmp_path: Path,
) -> None:
    assert pod_spec()["enableServiceLinks"] is False
    env = {"TOOLSLIM_ADMIN_TOKEN": TOKEN, "TOOLSLIM_PORT": "tcp://10.0.0.7:8788"}
    with pytest.raises(ConfigError, match="TOOLSLIM_PORT"):
        deployed_settings(tmp_path, env)


def selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def test_service_budget_and_autoscaler_all_point_at_the_deployments_pods() -> None:
    m = manifests()
    pods = m["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert selects(m["Deployment"]["spec"]["selector"]["matchLabels"], pods)
    assert selects(m["Service"]["spec"]["selector"], pods)
    (service_port,) = m["Service"]["spec"]["ports"]
    assert service_port["targetPort"] == container()["ports"][0]["name"]
    assert selects(m["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"], pods)
    hpa = m["HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": m["Deployment"]["metadata"]["name"],
    }
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert "cpu" in container()["resources"]["requests"]  # Utilization is relative to it
    # A drain leaves at least one pod serving.
    assert m["PodDisruptionBudget"]["spec"]["maxUnavailable"] < hpa["spec"]["minReplicas"]


def test_the_service_monitor_scrapes_metrics_through_the_service_and_fits_its_schema() -> None:
    m = manifests()
    monitor = m["ServiceMonitor"]
    jsonschema.Draft202012Validator(json.loads(SERVICE_MONITOR_SCHEMA.read_text())).validate(
        monitor
    )
    assert selects(monitor["spec"]["selector"]["matchLabels"], m["Service"]["metadata"]["labels"])
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == m["Service"]["spec"]["ports"][0]["name"]
    assert endpoint["path"] == "/metrics"


def test_the_service_monitor_schema_rejects_a_misspelt_field() -> None:
    monitor = manifests()["ServiceMonitor"]
    monitor["spec"]["endpoints"][0]["scrapeTimout"] = "10s"
    validator = jsonschema.Draft202012Validator(json.loads(SERVICE_MONITOR_SCHEMA.read_text()))
    assert not validator.is_valid(monitor)

"""deploy/: the Kubernetes manifests fit toolslim's own settings and image, and every PromQL query
of the Prometheus rules and the Grafana dashboard names a metric that a real /metrics exports.

Schema validation (kubernetes-validate) and promtool run in .ci/validate-deploy; these tests need
only Python. The ServiceMonitor is checked here against deploy/kubernetes/schemas/.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
import jsonschema
import pytest
import yaml
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from toolslim.config.settings import ConfigError, Settings, load_settings
from toolslim.proxy.app import make_app

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
RULES = DEPLOY / "prometheus" / "rules.yml"
DASHBOARD = DEPLOY / "grafana" / "toolslim.json"
SERVICE_MONITOR_SCHEMA = KUBERNETES / "schemas" / "servicemonitor-monitoring-v1.json"

# Metrics other issues add. Rules over them wait in PENDING_GROUP, which is skipped while one
# of these is not exported, and dashboard panels may read them; any other name /metrics lacks
# fails, in every group and panel. None now: the tool ledger's (group toolslim.tools) are in.
PENDING_METRICS: frozenset[str] = frozenset()
PENDING_GROUP = "toolslim.pending"
# Labels the scrape adds to every series (job, instance) rather than toolslim.
TARGET_LABELS = frozenset({"job", "instance"})
TOKEN = "deploy-test-token-0123456789abcdef"
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_NAME = re.compile(r"(?<![\w:])[A-Za-z_][\w:]*")
_SELECTOR = re.compile(r"(?<![\w:])(toolslim_\w+)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"(\w+)\s*(?:=~|!~|!=|=)")
_CLAUSE = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")


# --- reading deploy/ -------------------------------------------------------------------------


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


def pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = manifests()["Deployment"]["spec"]["template"]["spec"]
    return spec


def container() -> dict[str, Any]:
    (only,) = pod_spec()["containers"]
    return dict(only)


def config_text() -> str:
    (text,) = manifests()["ConfigMap"]["data"].values()
    return str(text)


def deployed_settings(tmp_path: Path, env: Mapping[str, str], **flags: Any) -> Settings:
    """The ConfigMap's config.yaml through toolslim's own loader, with the pod's environment."""
    path = tmp_path / "config.yaml"
    path.write_text(config_text())
    return load_settings(str(path), flags, env)


def stop_seconds(settings: Settings) -> float:
    """The longest toolslim takes to exit after SIGTERM: the readiness delay, if the version has
    one (shutdown_delay), then the grace for in-flight streams."""
    delay: float = getattr(settings, "shutdown_delay", 0.0)
    return delay + settings.shutdown_grace


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


# --- PromQL, as far as names go --------------------------------------------------------------


def identifiers(expr: str) -> set[str]:
    """The identifiers of a PromQL expression outside string literals (label values, regexes)."""
    return set(_NAME.findall(_STRING.sub('""', expr)))


def metric_names(expr: str) -> set[str]:
    """Names of toolslim metrics an expression reads (`toolslim_...`; recorded `toolslim:...`
    names are rules, not metrics)."""
    return {name for name in identifiers(expr) if name.startswith("toolslim_") and ":" not in name}


def recorded_names(expr: str) -> set[str]:
    return {name for name in identifiers(expr) if ":" in name}


def family(name: str, exported: Mapping[str, str]) -> str:
    return exported.get(name, name)


# --- a real /metrics -------------------------------------------------------------------------


async def _upstream(request: web.Request) -> web.Response:
    await request.read()
    usage = {"input_tokens": 40, "output_tokens": 5, "cache_read_input_tokens": 10}
    return web.json_response({"id": "msg_1", "type": "message", "usage": usage})


TOOLS_BODY = json.dumps(
    {
        "model": "m",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [
            {
                "name": "read_file",
                "input_schema": {
                    "$schema": "http://json-schema.org/draft-07/schema#",
                    "title": "ReadFile",
                    "type": "object",
                    "properties": {"path": {"type": "string", "title": "Path"}},
                },
            }
        ],
    }
).encode()


@pytest.fixture
async def scrape(aiohttp_server: Any, tmp_path: Path) -> str:
    """/metrics of the app as deployed (the ConfigMap's settings, the token from the Secret),
    scraped the way the ServiceMonitor does, after one compacted request and one GET."""
    fake = web.Application()
    fake.router.add_route("*", "/{tail:.*}", _upstream)
    upstream = await aiohttp_server(fake)
    base = f"http://127.0.0.1:{upstream.port}"
    upstreams = {"anthropic": base, "openai": base, "gemini": base}
    settings = deployed_settings(tmp_path, {"TOOLSLIM_ADMIN_TOKEN": TOKEN}, upstreams=upstreams)
    proxy = await aiohttp_server(make_app(settings))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    headers = {"anthropic-version": "2023-06-01", "content-type": "application/json"}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as client:
        async with client.post(proxy.make_url("/v1/messages"), data=TOOLS_BODY, headers=headers):
            pass
        async with client.get(proxy.make_url("/v1/models"), headers=headers):
            pass
        deadline = time.monotonic() + 5
        while True:  # requests are counted after their last byte; tokens off the request path
            async with client.get(proxy.make_url("/stats"), headers=auth) as response:
                requests = (await response.json())["requests"]
            if requests["total"] >= 2 and requests["tokens_pending"] == 0:
                break
            assert time.monotonic() < deadline, requests
            await asyncio.sleep(0.02)
        async with client.get(proxy.make_url("/stats"), headers=auth) as response:
            toolschema = (await response.json())["components"]["toolschema"]
        assert toolschema["applied"] == 1, f"the compactor did not apply: {toolschema}"
        async with client.get(proxy.make_url("/metrics"), headers=auth) as response:
            assert response.status == 200
            return await response.text()


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


def label_names(text: str) -> dict[str, set[str]]:
    """Series name -> the label names its samples carry in this scrape."""
    labels: dict[str, set[str]] = {}
    for metric in text_string_to_metric_families(text):
        for sample in metric.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    return labels


def unknown_labels(expr: str, labels: Mapping[str, set[str]]) -> set[str]:
    """Label names in selectors and in by/on/... clauses that none of the metrics the expression
    reads carries (nor the scrape adds).

    A metric needs a sample in the scrape to show its labels; a pending metric, new in
    /metrics, may have none after the fixture's two requests, and then its labels go unchecked.
    """
    unsampled = metric_names(expr) - labels.keys()
    if unsampled and unsampled <= PENDING_METRICS:
        return set()
    problems = {f"{name}: no sample in the scrape to read its labels from" for name in unsampled}
    in_scope = set(TARGET_LABELS) | {"le"}
    for name in metric_names(expr):
        in_scope |= labels.get(name, set())
    bare = _STRING.sub('""', expr)
    for name, matchers in _SELECTOR.findall(bare):
        for label in _MATCHER.findall(matchers):
            if label not in labels.get(name, set()) | TARGET_LABELS:
                problems.add(f"{name}{{{label}}}")
    for clause in _CLAUSE.findall(bare):
        for label in filter(None, (part.strip() for part in clause.split(","))):
            if label not in in_scope:
                problems.add(f"({label})")
    return problems


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


@pytest.mark.parametrize("group", rule_groups(), ids=lambda group: group["name"])
async def test_every_rule_reads_only_metrics_that_metrics_exports(
    group: dict[str, Any], scrape: str
) -> None:
    exported = exported_names(scrape)
    names = {name for rule in group["rules"] for name in metric_names(rule["expr"])}
    unknown = names - exported.keys()
    assert not unknown - PENDING_METRICS, f"not in /metrics: {sorted(unknown - PENDING_METRICS)}"
    if group["name"] == PENDING_GROUP:
        if unknown:
            pytest.skip(f"waiting for {', '.join(sorted(unknown))} in /metrics")
    else:
        assert not unknown, f"pending metrics belong in {PENDING_GROUP}: {sorted(unknown)}"
    labels = label_names(scrape)
    problems = {
        rule.get("record") or rule["alert"]: unknown_labels(rule["expr"], labels)
        for rule in group["rules"]
    }
    assert not {name: bad for name, bad in problems.items() if bad}


async def test_every_dashboard_query_reads_only_metrics_that_metrics_exports(scrape: str) -> None:
    exported = exported_names(scrape)
    labels = label_names(scrape)
    queries = dashboard_queries()
    unknown = {
        where: sorted(metric_names(expr) - exported.keys() - PENDING_METRICS)
        for where, expr in queries.items()
    }
    assert not {where: names for where, names in unknown.items() if names}
    assert not {
        where: bad for where, expr in queries.items() if (bad := unknown_labels(expr, labels))
    }
    # Together they cover the families operators read most (README, "What it reports").
    read = {family(name, exported) for expr in queries.values() for name in metric_names(expr)}
    assert {
        "toolslim_requests_total",
        "toolslim_requests_by_status_total",
        "toolslim_component_runs_total",
        "toolslim_component_skips_total",
        "toolslim_upstream_errors_total",
        "toolslim_upstream_tokens_total",
        "toolslim_proxy_overhead_seconds",
        "toolslim_upstream_ttfb_seconds",
        "toolslim_cache_warm_break_even_requests",
    } <= read


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

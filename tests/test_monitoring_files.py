"""The monitoring files an operator deploys (C9): deploy/prometheus/alerts.yml, its scrape
configuration deploy/prometheus/prometheus.yml, and the Grafana dashboard
deploy/grafana/jobpost.json.

Each query may name only metrics the service exports: the names are collected from a real
scrape of the web's /metrics (on a migrated database) and from what a worker's /metrics
serves, so a renamed metric cannot leave a rule or a panel that never fires or stays empty.
promtool (Debian's `prometheus` package, `make prometheus`) checks the files and runs the
rules' unit tests, tests/prometheus/alerts.test.yml.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.orm import sessionmaker

import workers.tasks  # noqa: F401  (what a worker loads, and so counts and serves)
from api import ratelimit
from api.app import Collaborators, create_app
from models.core.settings import Settings
from tests.conftest import Api, migrated
from tests.services import missing
from tests.test_deploy_files import argv, environment, option
from tests.test_docs import HEADING, slug
from workers.observability import metrics_registry

ROOT = Path(__file__).resolve().parent.parent
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
SCRAPE = ROOT / "deploy" / "prometheus" / "prometheus.yml"
RULE_TESTS = ROOT / "tests" / "prometheus" / "alerts.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "jobpost.json"
OPERATIONS = ROOT / "docs" / "operations.md"
SEVERITIES = {"critical", "warning", "info"}
# Prometheus's own series about each scrape, not the service's: rules may ask for them.
SCRAPE_SERIES = {"up"}
# What the issue asks the rules to watch (issue 27), by alert.
REQUIRED_ALERTS = {
    "JobpostWebhooksPending",
    "JobpostWebhooksFailing",
    "JobpostSyncRunStuck",
    "JobpostRequestLatencyHigh",
    "JobpostBeatSilent",
}
# The series a family of each type has, where its name is not one (prometheus_client drops
# _total from a counter's family name). Not _created: the multiprocess files have none.
SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_count", "_sum"),
    "summary": ("_count", "_sum"),
}


# --- what the service exports ------------------------------------------------------------------


def names_in(text: str) -> set[str]:
    """Every series name a Prometheus text page offers, families without samples included."""
    found = set()
    for family in text_string_to_metric_families(text):
        found |= series(family.name, family.type)
    # A single process's registry shows each counter's creation time as a gauge of its own;
    # the multiprocess files behind the service's /metrics have none.
    return {name for name in found if not name.endswith("_created")}


def series(name: str, kind: str) -> set[str]:
    return {name + suffix for suffix in SUFFIXES[kind]} if kind in SUFFIXES else {name}


def defaults() -> set[str]:
    """prometheus_client's process, platform and GC series: in this process's registry, but
    not on the service's /metrics, whose figures come from the multiprocess files."""
    found: set[str] = set()
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        for family in collector.collect():
            found |= series(family.name, family.type)
    return found


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The web's /metrics, scraped, on a migrated SQLite database, and the worker's."""
    folder = tmp_path_factory.mktemp("exported")
    settings = Settings.from_env({"JOBPOST_VAR_DIR": str(folder)})
    with migrated("sqlite", folder) as engine:
        parts = Collaborators(limiter=ratelimit.Unlimited(), queue_depths=lambda: {"email": 0})
        api = Api(create_app(settings, sessionmaker(engine), parts))
        api.get("/healthz")
        scraped = api.get("/metrics")
        assert scraped.status_code == 200, scraped.text
    web = names_in(scraped.text)
    assert "jobpost_outbox_entries" in web, "the database's figures are missing"
    worker = names_in(generate_latest(metrics_registry()).decode())
    return (web | worker) - defaults()


# --- PromQL ------------------------------------------------------------------------------------

STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
GROUPINGS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
WORD = re.compile(r"(?<![\w.:$])([A-Za-z_:][\w:]*)(\s*\()?")
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or"}
KEYWORDS |= {"unless", "offset", "atan2", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: not its functions, keywords, label
    names and values, durations, numbers, or Grafana variables (`$__rate_interval`)."""
    text = STRINGS.sub('""', expr)
    text = re.sub(r"\{[^{}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\[\]]*\]", " ", text)  # ranges and subqueries
    text = GROUPINGS.sub(" ", text)
    names = set()
    for word, call in WORD.findall(text):
        if not call and word.lower() not in KEYWORDS:
            names.add(word)
    return names


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (task) (increase(tasks_total{outcome="error"}[15m])) > 0', {"tasks_total"}),
        ("histogram_quantile(0.99, sum by (le) (rate(b[$__rate_interval]))) > 1e3", {"b"}),
        ('time() - max(a{task="b"}) > 2 * 3600 or (c == 1 unless on () max(d))', {"a", "c", "d"}),
        ('absent(up{job="jobpost-worker"} == 1)', {"up"}),
        ('label_replace(m offset 1m, "d", "$1", "s", "a") / ignoring (x) group_left n', {"m", "n"}),
        ("sum(rate(a[5m:1m])) without (instance) / bool b", {"a", "b"}),
    ],
)  # fmt: skip
def test_metric_names_are_found_in_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


# --- the alert rules ---------------------------------------------------------------------------


def rules() -> list[dict[str, Any]]:
    data = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return [rule for group in data["groups"] for rule in group["rules"]]


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        missing("promtool (Debian's prometheus package: `make prometheus`)")
    return found


def run_promtool(*args: str | Path) -> str:
    done = subprocess.run(
        [promtool(), *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"promtool {' '.join(map(str, args))}:\n{done.stdout}{done.stderr}"
    return done.stdout


def test_promtool_checks_the_rules() -> None:
    out = run_promtool("check", "rules", ALERTS)
    assert f"SUCCESS: {len(rules())} rules found" in out


def test_the_rules_behave_as_their_unit_tests_say() -> None:
    """A beat that stops, or never started, and webhook attempts that mostly fail."""
    assert "SUCCESS" in run_promtool("test", "rules", RULE_TESTS)


def test_promtool_checks_the_scrape_configuration_and_the_rules_it_loads() -> None:
    out = run_promtool("check", "config", SCRAPE)
    assert "alerts.yml" in out and "SUCCESS: 1 rule files found" in out


def test_every_rule_names_only_metrics_the_service_exports(exported: set[str]) -> None:
    unknown = {
        rule["alert"]: sorted(names)
        for rule in rules()
        if (names := metric_names(rule["expr"]) - exported - SCRAPE_SERIES)
        or not metric_names(rule["expr"])
    }
    assert not unknown, f"rules naming no metric, or one the service does not export: {unknown}"


def test_every_rule_has_a_severity_and_a_runbook_section_that_exists() -> None:
    headings = {slug(title) for _level, title in HEADING.findall(OPERATIONS.read_text("utf-8"))}
    problems = []
    for rule in rules():
        name = rule["alert"]
        if rule.get("labels", {}).get("severity") not in SEVERITIES:
            problems.append(f"{name}: severity is not one of {sorted(SEVERITIES)}")
        url = urlsplit(rule.get("annotations", {}).get("runbook_url", ""))
        if url.path != "docs/operations.md" or url.fragment not in headings:
            problems.append(f"{name}: runbook_url {url.geturl()!r} is no heading of that page")
        if not rule.get("annotations", {}).get("summary"):
            problems.append(f"{name}: no summary")
    assert not problems, "; ".join(problems)


def test_the_rules_watch_what_the_issue_asks_for() -> None:
    assert {rule["alert"] for rule in rules()} >= REQUIRED_ALERTS


def asked_jobs(expr: str) -> set[str]:
    return set(re.findall(r'\bjob\s*=~?\s*"([^"]+)"', expr))


def test_the_jobs_the_rules_and_panels_ask_for_are_scraped() -> None:
    jobs = {job["job_name"] for job in yaml.safe_load(SCRAPE.read_text("utf-8"))["scrape_configs"]}
    asked = set().union(*(asked_jobs(rule["expr"]) for rule in rules()))
    asked |= set().union(*(asked_jobs(expr) for _title, expr in panel_queries()))
    assert asked and asked <= jobs, f"{sorted(asked - jobs)} are not jobs of {SCRAPE.name}"


# --- the scrape configuration ------------------------------------------------------------------


def test_the_scrape_configuration_finds_every_web_and_worker_of_compose() -> None:
    """Docker's DNS answers a compose service's name with each of its containers: scaled out
    workers are all found, on the port compose gives them."""
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text("utf-8"))["services"]
    web_port = int(option(argv(services["web"]["command"]), "--port") or 0)
    worker_port = int(environment(services["worker"])["WORKER_METRICS_PORT"])
    scrape = yaml.safe_load(SCRAPE.read_text("utf-8"))
    found = {}
    for job in scrape["scrape_configs"]:
        for sd in job.get("dns_sd_configs", []):
            for name in sd["names"]:
                found[job["job_name"]] = (name, sd.get("type", "SRV"), sd.get("port"))
        assert job.get("metrics_path", "/metrics") == "/metrics"
    assert found == {
        "jobpost-web": ("web", "A", web_port),
        "jobpost-worker": ("worker", "A", worker_port),
    }
    assert scrape["rule_files"] == [ALERTS.name]


# --- the dashboard -----------------------------------------------------------------------------


def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in items:
        yield panel
        yield from panels(panel.get("panels", []))  # a collapsed row holds its own


def panel_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text("utf-8"))
    return [
        (panel["title"], target["expr"])
        for panel in panels(dashboard["panels"])
        for target in panel.get("targets", [])
    ]


def test_every_dashboard_query_names_only_metrics_the_service_exports(
    exported: set[str],
) -> None:
    queries = panel_queries()
    assert queries
    unknown = [
        f"{title}: {sorted(names)}"
        for title, expr in queries
        if (names := metric_names(expr) - exported - SCRAPE_SERIES) or not metric_names(expr)
    ]
    assert not unknown, unknown


def test_every_dashboard_graph_has_a_query_and_a_prometheus_source() -> None:
    dashboard = json.loads(DASHBOARD.read_text("utf-8"))
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    graphs = [p for p in panels(dashboard["panels"]) if p["type"] != "row"]
    assert graphs and all(p.get("targets") for p in graphs)
    assert all(p["datasource"]["uid"] == "${datasource}" for p in graphs)
    assert len({p["id"] for p in panels(dashboard["panels"])}) == len(
        list(panels(dashboard["panels"]))
    )

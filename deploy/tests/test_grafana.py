"""The Grafana dashboard: well formed, and in step with what the services
export: every expression names only metrics the job manager or an exec
service defines, and every metric they define has a panel."""

import json
import pathlib
import re

DEPLOY = pathlib.Path(__file__).resolve().parents[1]
REPO = DEPLOY.parent
DASHBOARD = DEPLOY / "grafana" / "fluxgate-dashboard.json"
# Histogram series Prometheus derives from one metric.
SUFFIXES = ("_bucket", "_sum", "_count")


def exported():
    """Metric names the services define (`pub const X: &str = "fluxgate_..."`)."""
    names = set()
    for path in REPO.glob("services/*/src/telemetry.rs"):
        names |= set(re.findall(r'pub const \w+: &str = "(fluxgate_\w+)"', path.read_text()))
    assert names, "no metrics found in services/*/src/telemetry.rs"
    return names


def dashboard():
    return json.loads(DASHBOARD.read_text())


def expressions(d):
    return [t["expr"] for p in d["panels"] for t in p["targets"]]


def base(name):
    for s in SUFFIXES:
        if name.endswith(s):
            return name[: -len(s)]
    return name


def test_the_dashboard_is_well_formed():
    d = dashboard()
    assert d["title"] == "Fluxgate" and d["uid"]
    assert d["schemaVersion"] >= 36
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for p in d["panels"]:
        assert p["title"] and p["description"], p
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        g = p["gridPos"]
        assert g["w"] > 0 and g["h"] > 0 and g["x"] + g["w"] <= 24, p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            # Every selector is scoped to the chosen scrape jobs.
            for sel in re.findall(r"fluxgate_\w+(\{[^}]*\})?", t["expr"]):
                assert 'job=~"$job"' in sel, (p["title"], t["expr"])


def test_every_expression_names_an_exported_metric():
    known = exported()
    for expr in expressions(dashboard()):
        used = re.findall(r"fluxgate_\w+", expr)
        assert used, expr
        for name in used:
            assert base(name) in known, f"{name} in {expr!r} is not exported"


def test_every_exported_metric_has_a_panel():
    used = {base(n) for e in expressions(dashboard()) for n in re.findall(r"fluxgate_\w+", e)}
    missing = exported() - used
    assert not missing, f"no panel for {sorted(missing)}"


def test_histograms_are_read_through_their_buckets():
    for expr in expressions(dashboard()):
        if "histogram_quantile" in expr:
            assert re.search(r"fluxgate_\w+_bucket\{", expr), expr
            assert "by (le)" in expr, expr

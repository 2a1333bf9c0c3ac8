"""Structural checks of the deployment files: the Kubernetes manifests against
the API schemas that kubernetes-validate ships (no cluster, no network), their
references to each other, the compose file, and the config the images carry."""

import pathlib
import re
import tomllib

import kubernetes_validate
import pytest
import yaml

DEPLOY = pathlib.Path(__file__).resolve().parents[1]
REPO = DEPLOY.parent
K8S = DEPLOY / "k8s"
# The oldest Kubernetes whose schemas the manifests must pass (gRPC probes are GA).
K8S_VERSION = "1.27.0"


def documents():
    """Every manifest document, with the file it came from."""
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                docs.append((path.name, doc))
    return docs


def by_kind(kind):
    return {d["metadata"]["name"]: d for _, d in documents() if d["kind"] == kind}


def pod_templates():
    return {name: s["spec"]["template"] for name, s in by_kind("StatefulSet").items()}


@pytest.mark.parametrize(
    "doc", [d for _, d in documents()], ids=lambda d: f"{d['kind']}/{d['metadata']['name']}"
)
def test_each_manifest_passes_the_strict_api_schema(doc):
    # strict: an unknown or misspelt field is an error, as kubectl --validate=strict.
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_kustomization_lists_every_manifest():
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kust["resources"]) == sorted(files)


def test_the_expected_objects_are_there():
    kinds = sorted((d["kind"], d["metadata"]["name"]) for _, d in documents())
    assert kinds == [
        ("ConfigMap", "fluxgate-config"),
        ("Service", "job-manager"),
        ("Service", "job-manager-pods"),
        ("Service", "node"),
        ("StatefulSet", "job-manager"),
        ("StatefulSet", "node"),
    ]


def test_statefulsets_select_their_pods_and_name_a_headless_service():
    services = by_kind("Service")
    for name, sts in by_kind("StatefulSet").items():
        spec = sts["spec"]
        labels = spec["template"]["metadata"]["labels"]
        assert spec["selector"]["matchLabels"].items() <= labels.items(), name
        governing = services[spec["serviceName"]]
        assert governing["spec"].get("clusterIP") == "None", name


def test_the_job_manager_is_one_pod_with_a_state_volume():
    spec = by_kind("StatefulSet")["job-manager"]["spec"]
    assert spec["replicas"] == 1
    claims = {c["metadata"]["name"] for c in spec["volumeClaimTemplates"]}
    (container,) = spec["template"]["spec"]["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert "state" in claims and mounts["state"] == "/var/lib/fluxgate"
    config = tomllib.loads(by_kind("ConfigMap")["fluxgate-config"]["data"]["job-manager.toml"])
    # The store lives on the volume.
    assert config["statedir"].startswith(mounts["state"] + "/")


def test_every_service_selects_pods_and_targets_a_named_port():
    templates = pod_templates().values()
    for name, svc in by_kind("Service").items():
        selector = svc["spec"]["selector"]
        matching = [t for t in templates if selector.items() <= t["metadata"]["labels"].items()]
        assert matching, f"Service {name} selects no pod"
        for port in svc["spec"]["ports"]:
            for t in matching:
                names = {p["name"] for c in t["spec"]["containers"] for p in c.get("ports", [])}
                assert port["targetPort"] in names, f"Service {name} port {port}"


def test_volumes_mounts_and_config_maps_refer_to_each_other():
    config_maps = by_kind("ConfigMap")
    for name, sts in by_kind("StatefulSet").items():
        pod = sts["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        claims = {c["metadata"]["name"] for c in sts["spec"].get("volumeClaimTemplates", [])}
        for c in pod["containers"]:
            for m in c.get("volumeMounts", []):
                assert m["name"] in volumes or m["name"] in claims, f"{name}: {m}"
        for v in volumes.values():
            if "configMap" in v:
                assert v["configMap"]["name"] in config_maps, f"{name}: {v}"


def test_containers_run_unprivileged_and_probe_through_grpc_health():
    for name, t in pod_templates().items():
        pod = t["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] != 0, name
        for c in pod["containers"]:
            ports = {p["containerPort"] for p in c["ports"]}
            ready = c["readinessProbe"]["exec"]["command"]
            assert ready[:2] == ["fluxgate", "health"], name
            assert int(ready[-1].rsplit(":", 1)[1]) in ports, name
            assert c["livenessProbe"]["grpc"]["port"] in ports, name
            assert c["securityContext"]["allowPrivilegeEscalation"] is False, name


def test_exec_nodes_join_the_job_manager_service_and_advertise_their_pod_ip():
    (c,) = pod_templates()["node"]["spec"]["containers"]
    env = [e["name"] for e in c["env"]]
    values = {e["name"]: e.get("value") for e in c["env"]}
    assert values["FLUXGATE_JOB_MANAGER"] == "http://job-manager:7000"
    # $(VAR) expands only variables defined earlier in the list.
    for ref in re.findall(r"\$\((\w+)\)", values["FLUXGATE_EXEC_ADVERTISE"]):
        assert env.index(ref) < env.index("FLUXGATE_EXEC_ADVERTISE")
    assert values["FLUXGATE_JOB_MANAGER"].endswith(":" + str(
        by_kind("Service")["job-manager"]["spec"]["ports"][0]["port"]))


def test_the_nodelist_names_the_exec_pods():
    config = tomllib.loads(by_kind("ConfigMap")["fluxgate-config"]["data"]["job-manager.toml"])
    sts = by_kind("StatefulSet")["node"]
    # StatefulSet pods are NAME-0 .. NAME-(replicas-1).
    assert config["resource"]["nodelist"] == f"node-[0-{sts['spec']['replicas'] - 1}]"


def job_manager_keys():
    """Config keys the job manager accepts: the pub fields of its config structs."""
    src = (REPO / "services/job-manager/src/config.rs").read_text()
    return set(re.findall(r"^\s*pub (\w+):", src, re.M))


def flatten(table, prefix=""):
    for key, value in table.items():
        if isinstance(value, dict):
            yield key
            yield from flatten(value, prefix + key + ".")
        else:
            yield key


@pytest.mark.parametrize("source", ["configmap", "compose"])
def test_config_files_use_only_keys_the_job_manager_knows(source):
    if source == "configmap":
        text = by_kind("ConfigMap")["fluxgate-config"]["data"]["job-manager.toml"]
    else:
        text = (DEPLOY / "config/job-manager.toml").read_text()
    keys = set(flatten(tomllib.loads(text)))
    assert keys <= job_manager_keys(), keys - job_manager_keys()


def test_the_configmap_and_the_compose_config_differ_only_in_node_names():
    cm = tomllib.loads(by_kind("ConfigMap")["fluxgate-config"]["data"]["job-manager.toml"])
    compose = tomllib.loads((DEPLOY / "config/job-manager.toml").read_text())
    cm["resource"].pop("nodelist")
    compose["resource"].pop("nodelist")
    assert cm == compose


def test_the_compose_file_has_a_job_manager_and_four_healthy_exec_nodes():
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services = compose["services"]
    assert sorted(services) == ["job-manager", "node0", "node1", "node2", "node3"]
    jm = services["job-manager"]
    assert any(v.split(":")[0] in compose["volumes"] for v in jm["volumes"])
    for name, svc in services.items():
        assert svc["healthcheck"]["test"][1:3] == ["fluxgate", "health"], name
        if name != "job-manager":
            assert svc["hostname"] == name
            assert svc["depends_on"]["job-manager"]["condition"] == "service_healthy"
            assert svc["environment"]["FLUXGATE_JOB_MANAGER"] == "http://job-manager:7000"
    nodelist = tomllib.loads((DEPLOY / "config/job-manager.toml").read_text())["resource"]["nodelist"]
    assert nodelist == "node[0-3]"


def runtime_stage(path):
    """The instructions after the last FROM, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    last = max(i for i, line in enumerate(lines) if line.startswith("FROM "))
    return lines[last + 1:]


def test_both_dockerfiles_make_the_same_runtime_image():
    def settings(path):
        keep = ("USER", "WORKDIR", "ENV", "EXPOSE", "STOPSIGNAL", "CMD", "ENTRYPOINT")
        return [line for line in runtime_stage(path) if line.startswith(keep)]

    assert settings(DEPLOY / "Dockerfile") == settings(DEPLOY / "Dockerfile.local")
    assert "USER fluxgate" in settings(DEPLOY / "Dockerfile")

"""Structural checks of the deployment files: the Kubernetes manifests against
the API schemas that kubernetes-validate ships (no cluster, no network), their
references to each other, the compose file, and the config the images carry."""

import os
import pathlib
import re
import shutil
import stat
import subprocess
import tomllib

import kubernetes_validate
import pytest
import yaml

DEPLOY = pathlib.Path(__file__).resolve().parents[1]
REPO = DEPLOY.parent
K8S = DEPLOY / "k8s"
# The oldest Kubernetes whose schemas the manifests must pass (gRPC probes are GA).
K8S_VERSION = "1.27.0"
# Where both the compose file and the pods mount their secrets.
SECRETS_DIR = "/run/secrets/fluxgate"
# What a credential looks like: a token, or a key of 16 bytes or more in hex.
CREDENTIAL = re.compile(r"fgt1\.|\b[0-9a-fA-F]{32,}\b")


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


# --- authentication: on, with the key and the node token as secrets ---------


def configmap_config():
    return tomllib.loads(by_kind("ConfigMap")["fluxgate-config"]["data"]["job-manager.toml"])


def compose_config():
    return tomllib.loads((DEPLOY / "config/job-manager.toml").read_text())


def compose_file():
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


@pytest.mark.parametrize("config", [configmap_config, compose_config], ids=["configmap", "compose"])
def test_auth_is_enabled_with_the_key_from_a_secret(config):
    c = config()
    assert c["auth"]["enabled"] is True
    assert c["auth"]["key_file"] == f"{SECRETS_DIR}/instance.key"
    # The node token is signed for this owner by make-secrets.sh.
    assert c["owner_uid"] == 1000


def secret_volumes(pod):
    return {v["name"]: v["secret"] for v in pod.get("volumes", []) if "secret" in v}


def secret_files(name):
    """Files each container of StatefulSet `name` sees from Secrets: path -> (secret, key)."""
    pod = pod_templates()[name]["spec"]
    secrets = secret_volumes(pod)
    files = {}
    for c in pod["containers"]:
        for m in c.get("volumeMounts", []):
            if m["name"] in secrets:
                secret = secrets[m["name"]]
                for item in secret["items"]:
                    files[f"{m['mountPath']}/{item['path']}"] = (secret["secretName"], item["key"])
    return files


def test_secrets_are_mounted_read_only_and_owner_only():
    seen = 0
    for name, t in pod_templates().items():
        pod = t["spec"]
        secrets = secret_volumes(pod)
        for v in secrets.values():
            # 0400; the kubelet adds the pod group's read bit (fsGroup).
            assert v["defaultMode"] == 0o400, name
            assert v.get("optional") is not True, name
        for c in pod["containers"]:
            for m in c.get("volumeMounts", []):
                if m["name"] in secrets:
                    seen += 1
                    assert m.get("readOnly") is True, f"{name}: {m}"
        if secrets:
            # Only then can the non-root user read a 0400 secret file.
            assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]
        assert pod.get("automountServiceAccountToken") is False, name
    assert seen == 2


def test_the_job_manager_reads_the_key_from_its_secret():
    files = secret_files("job-manager")
    assert files == {configmap_config()["auth"]["key_file"]: ("fluxgate-instance-key", "instance.key")}


def test_exec_nodes_get_the_node_token_file_and_never_the_key():
    files = secret_files("node")
    assert files == {f"{SECRETS_DIR}/node.token": ("fluxgate-node-token", "node.token")}
    (c,) = pod_templates()["node"]["spec"]["containers"]
    command = c["command"]
    token_file = command[command.index("--node-token-file") + 1]
    assert token_file in files


def test_no_credential_in_config_maps_env_or_manifests():
    for name, cm in by_kind("ConfigMap").items():
        for key, text in cm.get("data", {}).items():
            assert not CREDENTIAL.search(text), f"ConfigMap {name} {key}"
    for name, t in pod_templates().items():
        for c in t["spec"]["containers"]:
            for e in c.get("env", []):
                # No token or key as a literal, nor as a variable at all: a
                # process's environment is inherited by what it starts.
                assert not re.search(r"TOKEN|KEY", e["name"]), f"{name}: {e['name']}"
                assert not CREDENTIAL.search(str(e.get("value", ""))), f"{name}: {e['name']}"
                assert "secretKeyRef" not in e.get("valueFrom", {}), f"{name}: {e['name']}"
    # The Secrets are made from make-secrets.sh's files, never shipped.
    assert not by_kind("Secret")
    for path in K8S.glob("*"):
        assert not CREDENTIAL.search(path.read_text()), path.name


def test_the_secrets_are_made_as_the_kustomization_and_readme_say():
    made = {s for name in pod_templates() for s, _ in secret_files(name).values()}
    assert made == {"fluxgate-instance-key", "fluxgate-node-token"}
    kust = (K8S / "kustomization.yaml").read_text()
    readme = (DEPLOY / "README.md").read_text()
    for secret in made:
        for text in (kust, readme):
            assert f"kubectl create secret generic {secret} --from-file=" in text, secret


def test_compose_mounts_the_secrets_from_files_and_passes_the_node_token_file():
    compose = compose_file()
    assert set(compose["secrets"]) == {"instance-key", "node-token"}
    for name, secret in compose["secrets"].items():
        # From files make-secrets.sh writes 0600, not from the environment.
        assert set(secret) == {"file"}, name
    targets = {}
    for name, svc in compose["services"].items():
        mounted = {s["source"]: "/run/secrets/" + s["target"] for s in svc.get("secrets", [])}
        targets[name] = mounted
        env = svc.get("environment", {})
        for key, value in env.items():
            assert not re.search(r"TOKEN|KEY", key), f"{name}: {key}"
            assert not CREDENTIAL.search(str(value)), f"{name}: {key}"
    assert targets["job-manager"] == {"instance-key": compose_config()["auth"]["key_file"]}
    for node in ("node0", "node1", "node2", "node3"):
        svc = compose["services"][node]
        assert targets[node] == {"node-token": f"{SECRETS_DIR}/node.token"}, node
        command = svc["command"]
        assert command[command.index("--node-token-file") + 1] == targets[node]["node-token"]
    # Compose mounts secrets read-only; the files must never be committed.
    assert "/secrets/" in (DEPLOY / ".gitignore").read_text().split()


def cli_binary():
    bindir = pathlib.Path(os.environ.get("FLUXGATE_BIN_DIR", REPO / "target" / "debug"))
    path = bindir / "fluxgate"
    return path if path.is_file() else None


def test_make_secrets_writes_owner_only_files_and_keeps_the_key(tmp_path):
    cli = cli_binary()
    if cli is None:
        pytest.skip("the fluxgate CLI is not built: cargo build --workspace")
    out = tmp_path / "secrets"
    env = dict(os.environ, FLUXGATE_CLI=str(cli),
               FLUXGATE_SECRETS_OWNER=f"{os.getuid()}:{os.getgid()}")
    script = DEPLOY / "make-secrets.sh"

    def make(*args):
        r = subprocess.run([script, *args, out], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr

    make()
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    for name in ("instance.key", "node.token"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600, name
    key = (out / "instance.key").read_text().strip()
    assert re.fullmatch(r"[0-9a-f]{64}", key)
    token = (out / "node.token").read_text().strip()
    assert token.startswith("fgt1.")
    # The same token the CLI signs for the owner uid from that key.
    again = subprocess.run([cli, "token", "create", "--node", "--uid", "1000",
                            "--key", out / "instance.key"],
                           check=True, capture_output=True, text=True).stdout.strip()
    assert again == token
    # A second run keeps the key (users' tokens stay valid); --force replaces it.
    make()
    assert (out / "instance.key").read_text().strip() == key
    make("--force")
    assert (out / "instance.key").read_text().strip() != key
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    shutil.rmtree(out)


K8S_HA = DEPLOY / "k8s-ha"


def _merge(base, patch):
    """A strategic merge as kustomize makes it for these files: maps merge,
    lists of named items merge by name, other values are replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _merge(base[k], v) if k in base else v
        return out
    if isinstance(base, list) and isinstance(patch, list) and all(
        isinstance(x, dict) and "name" in x for x in base + patch
    ):
        out = [dict(x) for x in base]
        for item in patch:
            for i, b in enumerate(out):
                if b["name"] == item["name"]:
                    out[i] = _merge(b, item)
                    break
            else:
                out.append(item)
        return out
    return patch


def test_the_ha_instance_patches_the_job_manager_into_two_replicas_on_postgres():
    kust = yaml.safe_load((K8S_HA / "kustomization.yaml").read_text())
    assert kust["resources"][0] == "../k8s"
    for r in kust["resources"][1:]:
        assert (K8S_HA / r).exists(), r
    patch = yaml.safe_load((K8S_HA / kust["patches"][0]["path"]).read_text())
    base = by_kind("StatefulSet")[patch["metadata"]["name"]]
    merged = _merge(base, patch)
    kubernetes_validate.validate(merged, K8S_VERSION, strict=True)
    assert merged["spec"]["replicas"] == 2
    (jm,) = merged["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in jm["env"]}
    assert env["FLUXGATE_STORE_URL"]["valueFrom"]["secretKeyRef"]["name"] == "fluxgate-store"
    assert "$(POD_IP)" in env["FLUXGATE_HA_ADVERTISE"]["value"]
    # Ready only while leading: the Service then routes to the leader alone.
    assert "fluxgate.v1.JobManager" in jm["readinessProbe"]["exec"]["command"]


def test_the_trial_postgres_passes_the_strict_api_schema():
    for doc in yaml.safe_load_all((K8S_HA / "postgres.yaml").read_text()):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_ha_compose_override_adds_a_standby_on_postgres():
    base = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    ha = yaml.safe_load((DEPLOY / "docker-compose.ha.yml").read_text())
    services = ha["services"]
    assert {"postgres", "job-manager", "job-manager-b"} <= set(services)
    for jm in ("job-manager", "job-manager-b"):
        env = services[jm]["environment"]
        assert env["FLUXGATE_STORE_URL"].startswith("postgres://"), jm
        assert env["FLUXGATE_HA_ADVERTISE"] == f"http://{jm}:7000"
        assert services[jm]["depends_on"]["postgres"]["condition"] == "service_healthy"
    # The standby shares the instance key, never the leader's state volume.
    b = services["job-manager-b"]
    assert b["secrets"][0]["source"] in base["secrets"]
    assert b["volumes"][0].split(":")[0] in ha["volumes"]
    for node in ("node0", "node1", "node2", "node3"):
        uris = services[node]["environment"]["FLUXGATE_JOB_MANAGER"].split(",")
        assert uris == ["http://job-manager:7000", "http://job-manager-b:7000"]

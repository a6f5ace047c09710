"""clusters/aws.yaml and clusters/local.yaml against Ray's own cluster schema, their security properties, and a real
multi-node run: two raylets with different custom resources on this machine, a topology pinned to them."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from topo.ray_engine.nodes import local_cluster

ROOT = Path(__file__).resolve().parents[1]
CLUSTERS = ROOT / "clusters"
CONFIGS = ("aws.yaml", "local.yaml")
# ports that must never face the internet: dashboard, Prometheus, Grafana, Ray metrics export, GCS, Ray client
PROTECTED_PORTS = (8265, 9090, 3000, 8080, 6379, 10001)
WORLD = ("0.0.0.0/0", "::/0")


def load(name: str) -> dict:
    return yaml.safe_load((CLUSTERS / name).read_text())


def strings(node) -> list[str]:
    """Every key and string value in a parsed YAML document."""
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in [str(k), *strings(v)]]
    if isinstance(node, list):
        return [s for v in node for s in strings(v)]
    return [node] if isinstance(node, str) else []


def commands(config: dict, *keys: str) -> str:
    return "\n".join(c for key in keys for c in config.get(key, []))


# --- Ray's schema, as `ray up` applies it ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", CONFIGS)
def test_config_passes_rays_cluster_schema(name):
    """What `ray up` does before it touches a cloud: prepare_config (defaults, node types) then validate_config
    (ray/autoscaler/ray-schema.json)."""
    from ray.autoscaler._private.util import prepare_config, validate_config

    raw = load(name)
    prepared = prepare_config(copy.deepcopy(raw))
    validate_config(prepared)
    assert prepared["head_node_type"] in prepared["available_node_types"]


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("breakage", ["top-level typo", "node type typo", "wrong type"])
def test_schema_check_catches_a_broken_key(name, breakage):
    """The check above has teeth: a misspelt key or a wrongly typed value fails it."""
    import jsonschema
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = load(name)
    if breakage == "top-level typo":
        config["setup_comands"] = config.pop("setup_commands")
    elif breakage == "wrong type":
        config["idle_timeout_minutes"] = "ten"
    elif name == "aws.yaml":
        config["available_node_types"]["fast"]["resorces"] = config["available_node_types"]["fast"].pop("resources")
    else:
        config["auth"]["ssh_user_name"] = config["auth"].pop("ssh_user")
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(config))


# --- what the AWS cluster must offer ---------------------------------------------------------------------------------

def test_aws_has_a_head_and_two_worker_types_of_different_sizes_with_placement_resources():
    config = load("aws.yaml")
    types = config["available_node_types"]
    head = config["head_node_type"]
    workers = {name: t for name, t in types.items() if name != head}
    assert head in types and len(workers) >= 2
    assert len({t["node_config"]["InstanceType"] for t in workers.values()}) == len(workers)  # real heterogeneity
    offered = {res for t in workers.values() for res in t["resources"] if res not in ("CPU", "GPU", "memory")}
    assert {"fast", "slow"} <= offered
    assert all(t.get("min_workers", 0) >= 1 for t in workers.values())  # `--placement fast,..,slow` can start
    assert not set(types[head]["resources"]) & offered  # no topology worker is pinned to the head by accident


@pytest.mark.parametrize("name", CONFIGS)
def test_setup_installs_the_project_from_the_mounted_working_tree_with_java(name):
    config = load(name)
    setup = commands(config, "setup_commands", "head_setup_commands", "worker_setup_commands")
    # the working tree (datasets under ./data included) is copied to every node and installed from there
    mounted = [remote for remote, local in config["file_mounts"].items() if local == "."]
    assert mounted == ["/home/ubuntu/stream-groupings"]
    # the versions of requirements.lock, hash-checked, then the project itself without choosing any version
    assert "cd ~/stream-groupings" in setup and "pip install --require-hashes -r requirements.lock" in setup
    assert "pip install --no-deps --no-build-isolation ." in setup and "==" not in setup
    assert "git clone" not in setup and "YOUR-ORG" not in setup  # nothing to edit before `ray up`
    # the installed copy's kernels are compiled once per node, before any actor starts (outside the working tree)
    installed = setup.index("pip install --no-deps --no-build-isolation .")
    assert setup.index("cd ~ && ~/venv/bin/python -m topo.warm") > installed
    if name == "aws.yaml":
        assert "openjdk-17" in setup  # Spark (scripts/make_stream.py, scripts/analyze_runs.py)


# --- security ----------------------------------------------------------------------------------------------------

def _covers(rule: dict, port: int) -> bool:
    if str(rule.get("IpProtocol")) == "-1":
        return True
    return int(rule.get("FromPort", -1)) <= port <= int(rule.get("ToPort", -1))


def test_aws_opens_no_monitoring_port_to_the_internet():
    rules = load("aws.yaml")["provider"].get("security_group", {}).get("IpPermissions", [])
    for rule in rules:
        cidrs = [r.get("CidrIp") for r in rule.get("IpRanges", [])] + [r.get("CidrIpv6") for r in
                                                                       rule.get("Ipv6Ranges", [])]
        if any(c in WORLD for c in cidrs):
            assert not any(_covers(rule, port) for port in PROTECTED_PORTS), rule
    for name, node_type in load("aws.yaml")["available_node_types"].items():
        assert "NetworkInterfaces" not in node_type["node_config"], f"{name}: public interfaces set by hand"


@pytest.mark.parametrize("name", CONFIGS)
def test_uis_bind_to_loopback_and_token_auth_stays_on(name):
    config = load(name)
    text = "\n".join(strings(config))
    assert "0.0.0.0" not in text  # no --dashboard-host=0.0.0.0, no world CIDR, no Grafana on all interfaces
    head = commands(config, "head_start_ray_commands")
    starts = [c for c in strings(config) if "ray start" in c]
    assert starts and all("RAY_AUTH_MODE=token" in c for c in starts)
    assert "--dashboard-host=127.0.0.1" in head
    assert "RAY_AUTH_MODE=disabled" not in text
    if name == "aws.yaml":
        assert "--web.listen-address=127.0.0.1:9090" in head  # Prometheus
        assert "GF_SERVER_HTTP_ADDR=127.0.0.1" in head  # Grafana
    # the token comes from the user's machine, never from the repository
    mounts = config["file_mounts"]
    token_sources = [local for remote, local in mounts.items() if remote.endswith(".ray/auth_token")]
    assert token_sources and all(local.startswith("~/") for local in token_sources)


SECRET_PATTERNS = [
    r"aws_access_key", r"aws_secret", r"secret_access_key", r"session_token", r"passw(or)?d", r"api[_-]?key",
    r"AKIA[0-9A-Z]{16}", r"-----BEGIN [A-Z ]*PRIVATE KEY-----", r"\b[0-9a-f]{64}\b", r"GF_SECURITY_ADMIN",
    r"RAY_AUTH_TOKEN=",
]


@pytest.mark.parametrize("name", CONFIGS)
def test_no_secrets_in_the_cluster_files(name):
    text = (CLUSTERS / name).read_text()
    for pattern in SECRET_PATTERNS:
        assert not re.search(pattern, text, re.IGNORECASE), f"{name}: looks like a secret: {pattern}"
    key = load(name).get("auth", {}).get("ssh_private_key")
    assert key is None or (key.startswith("~/") and "\n" not in key)  # a path on the user's machine


def test_local_cluster_offers_per_machine_placement_resources():
    config = load("local.yaml")
    assert config["provider"]["type"] == "local" and config["provider"]["worker_ips"]
    assert "--resources=" in commands(config, "worker_start_ray_commands")


# --- a real multi-node run -----------------------------------------------------------------------------------------

INTRUDER_SCRIPT = """
import sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR")
print("CONNECTED")
"""


@pytest.mark.slow  # starts a second raylet with token authentication: about 45 s on two cores
def test_multi_node_run_pins_workers_to_the_nodes_offering_their_resource():
    """Head = "fast", second raylet = "slow"; `--placement fast,fast,slow,slow` puts workers 0-1 on the head and 2-3
    on the other node, the summary says so, and the run stays exact; a client with the wrong token is refused.
    The topology runs in a subprocess because this pytest process may already hold a local Ray
    (the ray_session fixture)."""
    with local_cluster([{"fast": 100}, {"slow": 100}]) as cluster:
        address, env, base = cluster.address, cluster.env, cluster.base
        out_dir = Path(base, "run")
        run = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "run_topology.py"), "--engine", "ray", "--address", address,
             "--placement", "fast,fast,slow,slow", "--workers", "4", "--sources", "2",
             "--stream", "zipf:z=1.0,keys=1000,messages=20000,seed=1", "--out", str(out_dir),
             "--json", "--quiet", "--no-plots"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wrong = Path(base, "wrong_token")
        wrong.write_text("0" * 64)
        intruder = subprocess.Popen(  # token authentication is on: a client with another token is turned away
            [sys.executable, "-c", INTRUDER_SCRIPT, address], env={**env, "RAY_AUTH_TOKEN_PATH": str(wrong)},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        nodes = cluster.nodes()
        stdout, stderr = run.communicate(timeout=150)
        assert run.returncode == 0, stderr[-3000:]
        intruder_out, intruder_err = intruder.communicate(timeout=120)
        # Storm's model on the same cluster: one process per node, frames between them through Ray
        spread = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "run_topology.py"), "--engine", "ray", "--address", address,
             "--processes", "2", "--workers", "4", "--sources", "2", "--rate", "4000",
             "--stream", "zipf:z=1.0,keys=1000,messages=8000,seed=1", "--out", str(Path(base, "spread")),
             "--json", "--quiet", "--no-plots"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=150)
        assert spread.returncode == 0, spread.stderr[-3000:]

    assert intruder.returncode != 0 and "CONNECTED" not in intruder_out
    assert re.search("token", intruder_err, re.IGNORECASE), intruder_err[-3000:]

    by_resource = {res: n["id"] for n in nodes for res in ("fast", "slow") if n["resources"].get(res)}
    assert len(nodes) == 2 and by_resource["fast"] != by_resource["slow"]
    assert "node:__internal_head__" in next(n for n in nodes if n["id"] == by_resource["fast"])["resources"]

    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["exact"] is True
    assert summary["tuples_processed"] == summary["tuples_in"] == 20000
    placement = ["fast", "fast", "slow", "slow"]
    for row in summary["per_worker"]:
        assert row["node"]["ip"]
        assert row["node"]["node_id"] == by_resource[placement[row["id"]]], row
    assert summary["ray"]["address"] == address

    spread_summary = json.loads(spread.stdout.strip().splitlines()[-1])
    assert spread_summary["exact"] is True
    processes = spread_summary["ray"]["recovery"]["processes"]
    assert sorted(p["node"]["node_id"] for p in processes) == sorted(n["id"] for n in nodes)  # one on each node
    assert all(p["frames"]["ray"] > 0 and p["frames"]["wire"] == 0 for p in processes)  # across nodes: Ray only

"""GKE GPUDirect that pods can use: Network objects against the pinned CRDs and cluster-toolkit's templates, the NCCL
plugin installers and the NRI device injector against Google's own manifests, the multi-node pod against Google's test
pods, jumbo MTU, subnets sized for maxNodes, local SSDs, and where GKE takes compact placement.

Each rule has a case that works and one that does not. Upstream files: tests/reference/SOURCES.md.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re

import pytest
import yaml

from conftest import crd_rule_failures, needs_reference, plan_of, stack_config
from gpupools.clouds import gcp
from gpupools.fabric import gpudirect
from gpupools.fabric.plan import plan_fabric, plan_fabrics
from gpupools.landing.scheduling import runs_on
from gpupools.pools.planning import plan_pools
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

GNP = "kubernetes:networking.gke.io/v1:GKENetworkParamSet"
NETWORK = "kubernetes:networking.gke.io/v1:Network"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
NODE_POOL = "gcp:container/nodePool:NodePool"
VPC = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"

# One pool of each GPUDirect flavour, each in a zone that offers its GPU (the catalog's gcpZones).
FABRIC_POOLS = [
    {"name": "high", "instanceType": "a3-highgpu-8g", "maxNodes": 2, "zones": ["us-central1-a"]},
    {"name": "mega", "instanceType": "a3-megagpu-8g", "maxNodes": 2, "zones": ["us-central1-b"]},
    {"name": "ultra", "instanceType": "a3-ultragpu-8g", "maxNodes": 2, "zones": ["us-central1-b"]},
]
L4 = {"name": "l4", "instanceType": "g2-standard-8", "maxNodes": 2}


@pytest.fixture(scope="module")
def fabric_plan():
    return plan_of(stack_config("gcp", pools=[*FABRIC_POOLS, L4]))


@pytest.fixture(scope="module")
def fabric_stack():
    return validate_stack(stack_config("gcp", pools=[*FABRIC_POOLS, L4]))


def manifest(resource) -> dict:
    return {k: v for k, v in resource.inputs.items() if k != "status"}


def upstream(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((needs_reference() / "container-engine-accelerators" / name).read_text()) if d]


def crd_schema(plural: str) -> dict:
    crd = yaml.safe_load((needs_reference() / "gke-networking-api" / f"networking.gke.io_{plural}.yaml").read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1")


def pruned(obj, schema: dict, path: str = "") -> list[str]:
    """Fields the API server would drop from a custom resource (structural schemas prune unknown fields)."""
    out = []
    if isinstance(obj, dict) and "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        for key, value in obj.items():
            if key not in schema["properties"]:
                out.append(f"{path}/{key}")
            else:
                out += pruned(value, schema["properties"][key], f"{path}/{key}")
    elif isinstance(obj, list) and "items" in schema:
        for i, value in enumerate(obj):
            out += pruned(value, schema["items"], f"{path}/{i}")
    return out


def render_tftpl(text: str, variables: dict) -> str:
    """The Terraform template constructs the vendored templates use: ${var}, yamlencode and indent of a value (given
    here as JSON, which YAML reads), and one `for i in range(n)` loop, one line per i."""
    def loop(m: re.Match) -> str:
        line = m.group(2).strip()
        return "".join(f"{m.group(1)}{line.replace('${i}', str(i))}\n" for i in range(variables["accelerator_count"]))

    text = re.sub(r"( *)%\{~ for i in range\(accelerator_count\) ~\}\n(.*?)\n *%\{~ endfor ~\}\n", loop, text, flags=re.S)
    text = re.sub(r"\$\{indent\(\d+, yamlencode\((\w+)\)\)\}", lambda m: json.dumps(variables[m.group(1)]), text)
    text = re.sub(r"\$\{yamlencode\((\w+)\)\}", lambda m: json.dumps(variables[m.group(1)]), text)
    return re.sub(r"\$\{(\w+)\}", lambda m: str(variables[m.group(1)]), text)


# --------------------------------------------------------------------------------------------------------------------
# Network and GKENetworkParamSet


def test_every_gpu_subnet_gets_a_param_set_and_a_device_network_valid_against_the_crds(fabric_plan):
    jsonschema = pytest.importorskip("jsonschema")
    params = {r.inputs["metadata"]["name"]: manifest(r) for r in fabric_plan.of_type(GNP)}
    networks = {r.inputs["metadata"]["name"]: manifest(r) for r in fabric_plan.of_type(NETWORK)}
    assert len(params) == len(networks) == 4 + 8 + 9
    for objs, plural in ((params, "gkenetworkparamsets"), (networks, "networks")):
        schema = crd_schema(plural)
        for obj in objs.values():
            jsonschema.validate(obj, schema)
            assert pruned(obj["spec"], schema["properties"]["spec"]) == [] and crd_rule_failures(obj, schema) == []
    # Each param set names a VPC and a subnet the stack creates, on the network that subnet belongs to.
    vpcs = {r.inputs["name"] for r in fabric_plan.of_type(VPC)}
    subnets = {r.inputs["name"]: r.parent for r in fabric_plan.of_type(SUBNET)}
    for name, obj in params.items():
        spec = obj["spec"]
        assert spec["vpc"] in vpcs and spec["vpcSubnet"] in subnets and subnets[spec["vpcSubnet"]] == spec["vpc"]
        assert spec["deviceMode"] == ("RDMA" if name.startswith("ultra-rdma-") else "NetDevice")
        assert networks[name]["spec"] == {"parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name},
                                          "type": "Device"}
    assert sorted(n for n in networks if n.startswith("mega-")) == sorted(f"mega-vpc{i}" for i in range(1, 9))
    assert sorted(n for n in networks if n.startswith("ultra-")) == ["ultra-gvnic-1"] + [f"ultra-rdma-{i}" for i in range(8)]


def test_the_objects_are_cluster_toolkits_templates_filled_in(fabric_plan):
    ref = needs_reference() / "cluster-toolkit"
    param_template = (ref / "gke-network-paramset.yaml.tftpl").read_text()
    network_template = (ref / "network-object.yaml.tftpl").read_text()
    for r in fabric_plan.of_type(GNP):
        obj = manifest(r)
        spec = obj["spec"]
        expected = yaml.safe_load(render_tftpl(param_template, {"name": obj["metadata"]["name"], "network_name": spec["vpc"],
                                                                "subnetwork_name": spec["vpcSubnet"], "device_mode": spec["deviceMode"]}))
        assert {**obj, "metadata": {"name": obj["metadata"]["name"]}} == expected
    for r in fabric_plan.of_type(NETWORK):
        obj = manifest(r)
        expected = yaml.safe_load(render_tftpl(network_template, {"name": obj["metadata"]["name"]}))
        assert {**obj, "metadata": {"name": obj["metadata"]["name"]}} == expected


def test_the_crds_refuse_a_wrong_device_mode_or_network_type_and_prune_a_misspelt_field(fabric_plan):
    jsonschema = pytest.importorskip("jsonschema")
    param = manifest(fabric_plan.of_type(GNP)[0])
    wrong = copy.deepcopy(param)
    wrong["spec"]["deviceMode"] = "SRIOV"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, crd_schema("gkenetworkparamsets"))
    network = copy.deepcopy(manifest(fabric_plan.of_type(NETWORK)[0]))
    network["spec"]["type"] = "Bridge"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(network, crd_schema("networks"))
    misspelt = copy.deepcopy(param)
    misspelt["spec"]["vpcSubNet"] = misspelt["spec"].pop("vpcSubnet")
    schema = crd_schema("gkenetworkparamsets")
    assert pruned(misspelt["spec"], schema["properties"]["spec"]) == ["/vpcSubNet"]


def test_a_stack_without_gpudirect_pools_declares_no_networks():
    plan = plan_of(stack_config("gcp", pools=[L4, {**FABRIC_POOLS[1], "fabric": "none"}]))
    assert not plan.of_type(GNP) and not plan.of_type(NETWORK) and not plan.of_type(VPC) and not plan.of_type(DAEMONSET)


# --------------------------------------------------------------------------------------------------------------------
# The GPU networks: jumbo MTU, subnets that hold maxNodes


def test_gpu_networks_take_the_blueprints_jumbo_mtu(fabric_plan):
    mtu = {r.inputs["name"]: r.inputs.get("mtu") for r in fabric_plan.of_type(VPC)}
    assert {n: m for n, m in mtu.items() if "-high-" in n} == {f"ml-test-high-net-{i}": 8244 for i in range(1, 5)}
    assert {n: m for n, m in mtu.items() if "-mega-" in n} == {f"ml-test-mega-net-{i}": 8244 for i in range(1, 9)}
    assert {n: m for n, m in mtu.items() if "-ultra-" in n} == {"ml-test-ultra-gvnic": 8896, "ml-test-ultra-rdma": 8896}
    # Compute Engine takes 1300 to 8896 (cluster-toolkit's vpc module, variable "mtu").
    assert all(1300 <= m <= 8896 for m in mtu.values())


@pytest.mark.parametrize("max_nodes, fabric, ok", [(252, "auto", True), (253, "auto", False), (300, "none", True)])
def test_a_fabric_pool_fits_its_24_subnets(max_nodes, fabric, ok):
    config = stack_config("gcp", pools=[{**FABRIC_POOLS[1], "maxNodes": max_nodes, "fabric": fabric}])
    if ok:
        validate_stack(config)
        return
    with pytest.raises(ConfigError) as exc:
        validate_stack(config)
    (problem,) = [str(p) for p in exc.value.problems]
    assert problem.startswith("error: pools[0].maxNodes: 253: every node of a GPUDirect pool takes an address in each of its /24 GPU "
                              "subnets, which hold 252") and "\n" not in problem


def test_subnets_are_24s_from_the_pools_own_block(fabric_plan):
    import ipaddress

    cidrs = [ipaddress.ip_network(r.inputs["ipCidrRange"]) for r in fabric_plan.of_type(SUBNET)]
    assert all(c.prefixlen == gcp.SUBNET_PREFIX and c.num_addresses - 4 == gcp.SUBNET_NODES for c in cidrs)
    assert len(set(cidrs)) == len(cidrs) and not any(a.overlaps(b) for i, a in enumerate(cidrs) for b in cidrs[i + 1:])


# --------------------------------------------------------------------------------------------------------------------
# Local SSDs


def test_a3_pools_put_their_local_ssds_under_ephemeral_storage_as_cluster_toolkit_does(fabric_plan):
    tf = (needs_reference() / "cluster-toolkit" / "disk_definitions.tf").read_text()
    counts = {m: int(n) for m, n in re.findall(r'"([a-z0-9-]+)"\s*=\s*\{\s*local_ssd_count_ephemeral_storage\s*=\s*(\d+)', tf)}
    pools = {r.name: r.inputs for r in fabric_plan.of_type(NODE_POOL)}
    for spec in FABRIC_POOLS:
        assert pools[spec["name"]]["nodeConfig"]["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": counts[spec["instanceType"]]}
    assert "ephemeralStorageLocalSsdConfig" not in pools["l4"]["nodeConfig"]
    # A pool without a fabric has the same SSDs: they back its ephemeral storage too.
    (plan,) = plan_pools(validate_stack(stack_config("gcp", pools=[{**FABRIC_POOLS[0], "fabric": "none"}])))
    assert gcp.node_pool_args(plan, "cloud", "c", "us-central1", None, None)["node_config"]["ephemeral_storage_local_ssd_config"] == {
        "local_ssd_count": 16}


# --------------------------------------------------------------------------------------------------------------------
# Placement


@pytest.mark.parametrize("instance_type, zone, capacity, compact, words", [
    ("a3-megagpu-8g", "us-central1-b", None, True, "compact placement (placementPolicy COMPACT"),
    ("a3-megagpu-8g", "us-central1-b", ["spot"], True, "compact placement (placementPolicy COMPACT"),
    ("a3-megagpu-8g", "us-central1-b", [{"queued": {"maxRunDuration": "24h"}}], False,
     "no compact placement (GKE takes none with queued provisioning)"),
    ("a3-megagpu-8g", "us-central1-b", [{"flexStart": {"maxRunDuration": "12h"}}], False,
     "no compact placement (GKE takes it with flex-start only on A3 Ultra, A4 and H4D)"),
    ("a3-ultragpu-8g", "us-central1-b", [{"flexStart": {"maxRunDuration": "12h"}}], True, "flex-start takes on A3 Ultra"),
    ("a3-megagpu-8g", None, [{"reservation": {"id": "mega-block", "zones": ["us-central1-b"], "nodes": 2}}], False,
     "the reservation's own placement (no compact placement policy"),
    ("a3-megagpu-8g", "us-central1-b", ["any-reservation", "on-demand"], False, "the reservation's own placement"),
])
def test_compact_placement_only_where_gke_takes_it(instance_type, zone, capacity, compact, words):
    pool = {"name": "pretrain", "instanceType": instance_type, "maxNodes": 2, **({"zones": [zone]} if zone else {}),
            **({"capacity": capacity} if capacity else {})}
    stack = validate_stack(stack_config("gcp", pools=[pool], quotas="kueue", teams=[{"name": "ml", "gpus": 16}]))
    (plan,) = plan_pools(stack)
    fabric = plan_fabric(stack, plan)
    assert fabric is not None and fabric.zone == "us-central1-b"
    assert words in fabric.placement
    args = gcp.fabric_node_pool_args(plan, gcp.node_pool_args(plan, "cloud", "c", "us-central1", None, None), [])
    assert ("placement_policy" in args) is compact and args.get("placement_policy", {"type": "COMPACT"}) == {"type": "COMPACT"}


def test_the_plan_says_why_placement_was_skipped(stack_file):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    pool = {"name": "pretrain", "instanceType": "a3-megagpu-8g", "maxNodes": 2, "zones": ["us-central1-b"],
            "capacity": [{"flexStart": {"maxRunDuration": "12h"}}]}
    path = stack_file(stack_config("gcp", pools=[pool]))
    result = CliRunner().invoke(app, ["plan", "--config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    (row,) = [p for p in json.loads(result.output)["outputs"]["pools"] if p["name"] == "pretrain"]
    assert row["fabric"]["placement"].startswith("no compact placement (GKE takes it with flex-start only on A3 Ultra")
    assert "nothing keeps the nodes close: no compact placement" in row["topology"]
    text = " ".join(CliRunner().invoke(app, ["plan", "--config", str(path)], terminal_width=200).output.split())
    assert "GPUDirect x8 (gpudirect-tcpxo), no compact placement (GKE takes it with flex-start only on A3 Ultra, A4 and H4D)" in text


# --------------------------------------------------------------------------------------------------------------------
# The NCCL plugin installers and the NRI device injector


def _rendered_gib_installer(affinity: dict) -> dict:
    """cluster-toolkit's gIB installer as examples/gke-a3-ultragpu/gke-a3-ultragpu.yaml applies it (version v1.1.0, 8
    accelerators; image and maxUnavailable the kubectl-apply module's defaults), with our node affinity."""
    text = (needs_reference() / "cluster-toolkit" / "gke-a3-ultragpu-nccl-installer.yaml.tftpl").read_text()
    return yaml.safe_load(render_tftpl(text, {"image": "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib", "version": "v1.1.0",
                                              "accelerator_count": 8, "max_unavailable": "50%", "node_affinity": affinity}))


def _without_placement(obj: dict) -> dict:
    """A DaemonSet without what gpupools changes on purpose: its node affinity (the fabric pools' label instead of every
    node of an accelerator) and the managed-by label."""
    obj = copy.deepcopy(obj)
    obj["spec"]["template"]["spec"].pop("affinity")
    obj["metadata"]["labels"].pop("app.kubernetes.io/managed-by", None)
    return obj


# What gpupools changes in Google's manifests on purpose, besides the placement: images Google names without a digest
# pinned to one, the privileges and host namespaces no step uses dropped, resources, the scanner's exceptions, and
# TCPXO's firewall rule limited to the GPU subnets.
PUBLISHED_IMAGES = {gpudirect.UBUNTU: "ubuntu", gpudirect.ALPINE: "alpine:latest"}
PUBLISHED_RESOURCES = {"nccl-tcpx-installer": {"requests": {"cpu": "150m"}}, "nccl-tcpxo-installer": {"requests": {"cpu": "150m"}},
                       "nccl-rdma-installer": {"requests": {"cpu": "150m"}}, "device-injector": {"requests": {"cpu": "150m"}}}


def _as_published(obj: dict) -> dict:
    """Our DaemonSet with those changes undone: what it must then equal is Google's manifest."""
    obj = copy.deepcopy(obj)
    obj["metadata"].pop("annotations")
    spec = obj["spec"]["template"]["spec"]
    assert spec.pop("automountServiceAccountToken") is False and spec.pop("securityContext") == {"seccompProfile": {"type": "RuntimeDefault"}}
    spec.update(hostNetwork=True, hostPID=True)
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        container["image"] = PUBLISHED_IMAGES.get(container["image"], container["image"])
        if container["name"] == "pause":
            assert container.pop("securityContext") == gpudirect.LOCKED and container.pop("resources") == gpudirect.PAUSE_RESOURCES
        elif container["name"] in PUBLISHED_RESOURCES:
            container["resources"] = PUBLISHED_RESOURCES[container["name"]]
        else:
            assert container.pop("resources") == gpudirect.STEP_RESOURCES
        if container["name"] == "pre-installation":
            container["command"][-1] = re.sub(r" -s [0-9./,]+ -j ACCEPT", " -j ACCEPT", container["command"][-1])
        if container["name"] == gpudirect.NRI_INJECTOR:
            container["securityContext"] = {"privileged": True}
            container["volumeMounts"][0].pop("readOnly")
    if obj["metadata"]["name"] == gpudirect.NRI_INJECTOR:
        spec["volumes"].insert(0, {"name": "root", "hostPath": {"path": "/"}})
    return obj


def test_installers_and_the_injector_are_googles_manifests_on_the_fabric_pools(fabric_plan):
    daemonsets = {r.inputs["metadata"]["name"]: manifest(r) for r in fabric_plan.of_type(DAEMONSET)
                  if r.inputs["metadata"]["namespace"] == "kube-system"}
    assert set(daemonsets) == {"nccl-tcpx-installer", "nccl-tcpxo-installer", "nccl-rdma-installer", "device-injector"}
    for name, file in (("nccl-tcpx-installer", "nccl-tcpx-installer.yaml"), ("nccl-tcpxo-installer", "nccl-tcpxo-installer.yaml"),
                       ("device-injector", "nri-device-injector.yaml")):
        (theirs,) = upstream(file)
        assert _without_placement(_as_published(daemonsets[name])) == _without_placement(theirs), name
    ours = _as_published(daemonsets["nccl-rdma-installer"])
    assert _without_placement(ours) == _without_placement(_rendered_gib_installer(ours["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]))
    selected = {name: ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] for name, ds in daemonsets.items()}
    assert selected == {"nccl-tcpx-installer": ["high"], "nccl-tcpxo-installer": ["mega"], "nccl-rdma-installer": ["ultra"],
                        "device-injector": ["high", "mega"]}


def _containers(ds: dict) -> list[dict]:
    spec = ds["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def _daemonsets(stack) -> dict[str, dict]:
    from gpupools.landing.check import cluster_of

    cluster = cluster_of(stack)
    _, daemonsets = gpudirect.gpudirect_objects(stack, plan_fabrics(stack, cluster.plans))
    return {d["metadata"]["name"]: d for d in daemonsets}


def test_every_image_is_pinned_by_digest_but_the_plugins_google_publishes_by_tag(fabric_stack):
    images = {c["image"] for ds in _daemonsets(fabric_stack).values() for c in _containers(ds)}
    tagged = {gpudirect.TCPX_PLUGIN, gpudirect.TCPXO_PLUGIN, gpudirect.GIB_PLUGIN}
    assert tagged <= images and {gpudirect.UBUNTU, gpudirect.ALPINE, gpudirect.PAUSE, gpudirect.NRI_IMAGE} <= images
    for image in images - tagged:
        assert re.fullmatch(r"[-a-z0-9./]+(:[-a-z0-9.]+)?@sha256:[0-9a-f]{64}", image), image
    for image in images:
        name = image.split("@")[0].rsplit("/", 1)[-1]
        assert ":" in name or "@" in image, image  # a tag or a digest, never the floating default
        assert not name.endswith(":latest"), image


def test_each_pod_has_only_the_host_namespaces_and_privileges_a_step_uses(fabric_stack):
    """Privileged init containers where a step changes the host (Google's installers, TCPXO's pre-installation, the
    martian sysctl); the host's PID namespace only for TCPXO (nsenter into PID 1), its network namespace only for the
    gIB installer (the host's RDMA interfaces); the injector and every pause container unprivileged, without
    capabilities, with a read-only root filesystem; no API token anywhere; no host / volume."""
    daemonsets = _daemonsets(fabric_stack)
    hosts = {name: {k for k in ("hostNetwork", "hostPID", "hostIPC") if ds["spec"]["template"]["spec"].get(k)} for name, ds in daemonsets.items()}
    assert hosts == {"nccl-tcpx-installer": set(), "nccl-tcpxo-installer": {"hostPID"}, "nccl-rdma-installer": {"hostNetwork"},
                     "device-injector": set()}
    privileged = {(name, c["name"]) for name, ds in daemonsets.items() for c in _containers(ds) if (c.get("securityContext") or {}).get("privileged")}
    assert privileged == {("nccl-tcpx-installer", "nccl-tcpx-installer"), ("nccl-tcpxo-installer", "pre-installation"),
                          ("nccl-tcpxo-installer", "nccl-tcpxo-installer"), ("nccl-rdma-installer", "disable-log-martian"),
                          ("nccl-rdma-installer", "nccl-rdma-installer")}
    for name, ds in daemonsets.items():
        spec = ds["spec"]["template"]["spec"]
        assert spec["automountServiceAccountToken"] is False and spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert all(v.get("hostPath", {}).get("path") != "/" for v in spec.get("volumes", [])), name
        for container in _containers(ds):
            context = container["securityContext"]
            assert container["resources"]["limits"]["memory"] and container["resources"]["requests"]["cpu"], (name, container["name"])
            if not context.get("privileged"):
                assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True, (name, container["name"])
                assert context["capabilities"] == {"drop": ["ALL"]}, (name, container["name"])
    injector = _containers(daemonsets["device-injector"])[0]
    assert injector["securityContext"]["runAsUser"] == 0 and all(m.get("readOnly") for m in injector["volumeMounts"] if m["name"] == "dev")
    assert {c["securityContext"]["runAsUser"] for ds in daemonsets.values() for c in _containers(ds) if c["name"] == "pause"} == {65535}


def _firewall_sources(ds: dict) -> list[str]:
    (step,) = [c for c in _containers(ds) if c["name"] == "pre-installation"]
    rule = step["command"][-1].splitlines()[0]
    found = re.fullmatch(r"/sbin/iptables -I INPUT -p tcp -m tcp -s ([0-9./,]+) -j ACCEPT && modprobe import-helper", rule)
    assert found, rule
    return found.group(1).split(",")


def test_tcpxos_firewall_rule_opens_tcp_from_the_gpu_subnets_of_its_pools_only():
    """Google's rule accepts TCP from anywhere on every host interface; the traffic it is for comes from the other
    nodes' GPU NICs, so the rule names the TCPXO pools' GPU subnets, and neither another pool's nor the VPC's."""
    pools = [FABRIC_POOLS[0], FABRIC_POOLS[1], {**FABRIC_POOLS[1], "name": "mega2"}, L4]
    stack = validate_stack(stack_config("gcp", pools=pools))
    daemonsets = _daemonsets(stack)
    networks = gpudirect.gpu_networks(stack, plan_fabrics(stack, plan_pools(stack)))
    subnets = {pool: [sub["cidr"] for net in nets for sub in net["subnets"]] for pool, nets in networks.items()}
    sources = _firewall_sources(daemonsets["nccl-tcpxo-installer"])
    assert sorted(sources) == sorted(subnets["mega"] + subnets["mega2"]) and len(sources) == 16
    assert not set(sources) & set(subnets["high"])
    assert all(ipaddress.ip_network(s).subnet_of(gcp.FABRIC_RANGE) and ipaddress.ip_network(s).prefixlen == gcp.SUBNET_PREFIX for s in sources)


def test_without_the_networks_the_rule_opens_the_range_gpu_subnets_come_from():
    stack = validate_stack(stack_config("gcp", pools=[FABRIC_POOLS[1]]))
    fabrics = list(plan_fabrics(stack, plan_pools(stack)).values())
    (ds,) = [d for d in gpudirect.daemonsets(fabrics) if d["metadata"]["name"] == "nccl-tcpxo-installer"]
    assert _firewall_sources(ds) == [str(gcp.FABRIC_RANGE)]


def test_every_daemonset_says_why_for_each_check_it_does_not_meet(fabric_stack):
    """The scanner's exceptions ride on the object (`checkov.io/skipN: CHECK=why`); tests/cli/test_manifest_scan.py
    shows each is needed and nothing else fails."""
    for name, ds in _daemonsets(fabric_stack).items():
        skips = dict(v.split("=", 1) for v in ds["metadata"]["annotations"].values())
        assert skips == gpudirect.SCANNER_EXCEPTIONS[name] and all(len(why) > 40 for why in skips.values()), name


def test_each_daemonset_has_a_network_policy_that_admits_nothing(fabric_stack):
    from gpupools.landing.check import cluster_of

    cluster = cluster_of(fabric_stack)
    objects, daemonsets = gpudirect.gpudirect_objects(fabric_stack, plan_fabrics(fabric_stack, cluster.plans))
    policies = {o["metadata"]["name"]: o for o in objects if o["kind"] == "NetworkPolicy"}
    assert set(policies) == {d["metadata"]["name"] for d in daemonsets}
    for d in daemonsets:
        spec = policies[d["metadata"]["name"]]["spec"]
        assert spec == {"podSelector": {"matchLabels": d["spec"]["selector"]["matchLabels"]}, "policyTypes": ["Ingress"]}


def test_each_daemonset_runs_on_its_pools_nodes_and_on_no_other(fabric_stack):
    from gpupools.landing.check import cluster_of
    from gpupools.landing.nodes import pool_node

    cluster = cluster_of(fabric_stack)
    nodes = {p.name: pool_node(cluster, p) for p in cluster.plans}
    _, daemonsets = gpudirect.gpudirect_objects(fabric_stack, plan_fabrics(fabric_stack, cluster.plans))
    for ds in daemonsets:
        spec = ds["spec"]["template"]["spec"]
        on = {name for name, node in nodes.items() if runs_on(spec, node.labels, node.taints + node.startup_taints) is None}
        assert on == set(spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
                         ["matchExpressions"][0]["values"]), ds["metadata"]["name"]
        # Without its toleration the GPU taint keeps it off every pool.
        untolerated = {**spec, "tolerations": []}
        assert all(runs_on(untolerated, n.labels, n.taints) is not None for n in nodes.values())


def test_the_daemonsets_are_valid_kubernetes_objects(fabric_plan):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for r in fabric_plan.of_type(DAEMONSET):
        kubernetes_validate.validate(manifest(r), "1.33", strict=True)


def test_only_tcpx_and_tcpxo_pools_get_the_injector():
    plan = plan_of(stack_config("gcp", pools=[FABRIC_POOLS[2]]))
    assert [r.inputs["metadata"]["name"] for r in plan.of_type(DAEMONSET) if r.inputs["metadata"]["namespace"] == "kube-system"] == [
        "nccl-rdma-installer"]


# --------------------------------------------------------------------------------------------------------------------
# The multi-node Job


def _job(stack, pool: str, nodes: int = 2) -> dict:
    from gpupools.landing.jobs import multinode_job

    plan = next(p for p in plan_pools(stack) if p.name == pool)
    return multinode_job(stack, plan, nodes)[1]


def _interfaces(template: dict) -> list[dict]:
    return json.loads(template["metadata"]["annotations"]["networking.gke.io/interfaces"])


@pytest.mark.parametrize("pool, file, sidecar", [
    ("high", "gpudirect-tcpx-nccl-test-latest.yaml", "tcpx-daemon"),
    ("mega", "gpudirect-tcpxo-nccl-test-latest.yaml", "tcpxo-daemon"),
    ("ultra", "gpudirect-rdma-nccl-test.yaml", None),
])
def test_the_job_pod_is_googles_test_pod_with_the_pools_networks(fabric_stack, pool, file, sidecar):
    """Google's test pod for the flavour, as gpupools' Job carries it: the same interfaces (on the pool's own Network
    objects), device annotation, daemon (as a native sidecar) and trainer volumes, env and capabilities."""
    theirs = next(d for d in upstream(file) if d["kind"] == "Pod")
    template = _job(fabric_stack, pool)["spec"]["template"]
    ours_spec = template["spec"]
    annotations = template["metadata"]["annotations"]
    assert annotations["networking.gke.io/default-interface"] == theirs["metadata"]["annotations"]["networking.gke.io/default-interface"]
    expected = [{**i, "network": i["network"] if i["network"] == "default" else f"{pool}-{i['network']}"}
                for i in json.loads(theirs["metadata"]["annotations"]["networking.gke.io/interfaces"])]
    assert _interfaces(template) == expected
    by_name = {c["name"]: c for c in theirs["spec"]["containers"]}
    volumes = {v["name"]: v for v in ours_spec["volumes"]}
    if sidecar is not None:
        key = f"devices.gke.io/container.{sidecar}"
        assert annotations[key] == theirs["metadata"]["annotations"][key]
        (daemon,) = ours_spec["initContainers"]
        assert daemon["restartPolicy"] == "Always"  # a native sidecar: it ends with the trainer, and the Job completes
        extra = {k: daemon[k] for k in daemon if k not in by_name[sidecar]}
        assert set(extra) <= {"restartPolicy", "startupProbe"}
        assert {**daemon, "env": [e for e in daemon["env"] if e["name"] != "HEALTH_CHECK_LOG_FILE"]} == {**by_name[sidecar], **extra}
        assert all(m["name"] in volumes for m in daemon["volumeMounts"])
    else:
        assert "initContainers" not in ours_spec and not any(k.startswith("devices.gke.io/") for k in annotations)
    trainer = ours_spec["containers"][0]
    (theirs_trainer,) = [c for name, c in by_name.items() if name != sidecar]
    env = {e["name"]: e["value"] for e in trainer["env"]}
    assert {e["name"]: e["value"] for e in theirs_trainer["env"]}.items() <= env.items()
    mounts = [m for m in theirs_trainer["volumeMounts"] if m["name"] not in ("config-volume", "shared-memory")]
    assert all(m in trainer["volumeMounts"] for m in mounts)
    theirs_volumes = {v["name"]: v for v in theirs["spec"]["volumes"]}
    for m in trainer["volumeMounts"]:
        if m["name"] == "tcpx-socket":
            # The daemon's sockets in a directory of the pod's own (cluster-toolkit's enable-tcpx-in-workload.py), where
            # Google's test pod shares the host's /run/tcpx.
            assert volumes[m["name"]] == {"name": "tcpx-socket", "emptyDir": {}}
        elif m["name"] in theirs_volumes and "hostPath" in theirs_volumes[m["name"]]:
            assert volumes[m["name"]]["hostPath"] == theirs_volumes[m["name"]]["hostPath"]
    assert (trainer.get("securityContext") or {}) == (theirs_trainer.get("securityContext") or {})
    assert trainer["resources"]["limits"] == theirs_trainer["resources"]["limits"] == {"nvidia.com/gpu": 8}


def test_the_interfaces_name_network_objects_the_stack_declares(fabric_plan, fabric_stack):
    declared = {r.inputs["metadata"]["name"] for r in fabric_plan.of_type(NETWORK)}
    for spec in FABRIC_POOLS:
        named = {i["network"] for i in _interfaces(_job(fabric_stack, spec["name"])["spec"]["template"])} - {"default"}
        assert named and named <= declared


def test_plugins_that_keep_their_nccl_settings_in_a_script_have_it_sourced_before_torchrun(fabric_stack):
    mega = _job(fabric_stack, "mega")["spec"]["template"]["spec"]["containers"][0]
    assert mega["command"][:2] == ["bash", "-c"] and mega["command"][2].startswith("source ${NCCL_LIB_DIR}/nccl-env-profile.sh && exec torchrun ")
    ultra = _job(fabric_stack, "ultra")["spec"]["template"]["spec"]["containers"][0]
    assert ultra["command"][2].startswith("source /usr/local/gib/scripts/set_nccl_env.sh && exec torchrun ")
    assert {e["name"]: e["value"] for e in ultra["env"]}["NCCL_NET"] == "gIB"
    high = _job(fabric_stack, "high")["spec"]["template"]["spec"]["containers"][0]
    assert high["command"][0] == "torchrun" and {e["name"]: e["value"] for e in high["env"]}["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"] == "eth1,eth2,eth3,eth4"
    import shlex

    # The wrapped command is the same torchrun line, rank from the Job's index.
    assert "--node-rank=$(JOB_COMPLETION_INDEX)" in shlex.split(mega["command"][2])


@pytest.mark.parametrize("pool", ["high", "mega", "ultra"])
def test_the_job_is_a_valid_kubernetes_object(fabric_stack, pool):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    kubernetes_validate.validate(_job(fabric_stack, pool), "1.33", strict=True)


def test_workload_nodes_prints_the_gke_job(stack_file):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    path = stack_file(stack_config("gcp", pools=[FABRIC_POOLS[1]]))
    result = CliRunner().invoke(app, ["workload", "--config", str(path), "--pool", "mega", "--nodes", "2"])
    assert result.exit_code == 0, result.output
    service, budget, job = yaml.safe_load_all(result.output)
    assert (service["kind"], budget["kind"], job["kind"]) == ("Service", "PodDisruptionBudget", "Job")
    assert job["spec"]["template"]["spec"]["initContainers"][0]["name"] == "tcpxo-daemon"


def test_workload_nodes_refuses_a_pool_whose_driver_the_gpu_operator_installs(stack_file):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    config = stack_config("gcp", pools=[FABRIC_POOLS[1]], gpuSoftware={"installer": "gpu-operator"})
    result = CliRunner().invoke(app, ["workload", "--config", str(stack_file(config)), "--pool", "mega", "--nodes", "2"])
    assert result.exit_code == 2
    assert result.output.startswith("error: --nodes: pool 'mega''s GPUDirect is not reachable by pods: Google's NCCL plugins and their jobs use "
                                    "GKE's own GPU driver on COS") and result.output.count("\n") == 1


# --------------------------------------------------------------------------------------------------------------------
# What the plan says is still missing


def test_a_new_cluster_with_gkes_driver_needs_nothing_more(fabric_stack):
    fabrics = plan_fabrics(fabric_stack, plan_pools(fabric_stack))
    assert all(f.configured and f.gaps == () for f in fabrics.values())
    assert fabrics["mega"].node_software == ("nccl-tcpxo-installer", "device-injector")
    assert fabrics["ultra"].node_software == ("nccl-rdma-installer",)


def test_an_existing_cluster_needs_multi_networking_and_operator_pools_cannot_use_the_plugins():
    existing = validate_stack(stack_config("gcp", pools=[FABRIC_POOLS[1]], cluster={"name": "ml", "location": "us-central1", "create": False}))
    (fabric,) = plan_fabrics(existing, plan_pools(existing)).values()
    assert fabric.configured and fabric.gaps == ("the existing cluster must have multi-networking and Dataplane V2, which gpupools does not change",)
    operator = validate_stack(stack_config("gcp", pools=[FABRIC_POOLS[1]], gpuSoftware={"installer": "gpu-operator"}))
    (fabric,) = plan_fabrics(operator, plan_pools(operator)).values()
    assert not fabric.configured and "GKE's own GPU driver on COS" in fabric.gaps[0]


def test_an_a4_pool_is_planned_as_google_builds_a4_clusters():
    """A4 (B200) is GPUDirect-RDMA like A3 Ultra in Google's blueprint (cluster-toolkit v1.95.0 examples/gke-a4/gke-a4.yaml:
    a RoCE VPC with 8 subnets, gIB v1.1.0 through the same installer template; container-engine-accelerators
    gpudirect-rdma/nccl-test-a4.yaml: eth2..eth9 on rdma-0..rdma-7), with 32 local SSDs (disk_definitions.tf) and
    compact placement even on flex-start."""
    pool = {"name": "b200", "instanceType": "a4-highgpu-8g", "maxNodes": 2, "zones": ["us-central1-b"]}
    stack = validate_stack(stack_config("gcp", pools=[pool]))
    (fabric,) = plan_fabrics(stack, plan_pools(stack)).values()
    assert (fabric.kind, fabric.devices, fabric.node_software) == ("gpudirect-rdma", 9, ("nccl-rdma-installer",))
    networks = gpudirect.gpu_networks(stack, {"b200": fabric})["b200"]
    assert [n["mtu"] for n in networks] == [8896, 8896] and len(networks[1]["subnets"]) == 8 and networks[1]["rdma_profile"]
    (plan,) = plan_pools(stack)
    assert gcp.node_pool_args(plan, "cloud", "c", "us-central1", None, None)["node_config"]["ephemeral_storage_local_ssd_config"] == {
        "local_ssd_count": 32}
    interfaces = _interfaces(_job(stack, "b200")["spec"]["template"])
    assert interfaces[1:] == [{"interfaceName": f"eth{i + 2}", "network": f"b200-rdma-{i}"} for i in range(8)]
    flex = validate_stack(stack_config("gcp", pools=[{**pool, "capacity": [{"flexStart": {"maxRunDuration": "12h"}}]}]))
    (flex_plan,) = plan_pools(flex)
    assert gcp.compact_placement(flex_plan.pool)[0] is True

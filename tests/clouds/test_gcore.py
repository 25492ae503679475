"""Gcore Managed Kubernetes: the stack checks, the requests against Gcore's SDK types, the dynamic provider against a fake
of Gcore's HTTP API (the SDK's own transport), and the diff against Gcore's Terraform provider."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from conftest import ROOT, plan_of, stack_config
from gpupools.clouds import gcore as decide
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

pytest.importorskip("gcore")

from gpupools.deploy import gcore as component  # noqa: E402  (needs the SDK)

VM = "g3-ai-32-192-1500-l40s-48-1"
METAL = "bm3-ai-1xlarge-h100-80-8"


def problems(config: dict) -> list[str]:
    try:
        validate_stack(config)
    except ConfigError as exc:
        return [f"{p.path}: {p.message}" for p in exc.problems]
    return []


def pool(**fields) -> dict:
    return {"name": "infer", "instanceType": VM, "minNodes": 1, "maxNodes": 3, **fields}


# --------------------------------------------------------------------------------------------------------------------
# The stack file


def test_a_valid_gcore_stack_passes():
    assert problems(stack_config("gcore")) == []
    assert problems(stack_config("gcore", pools=[pool(instanceType=METAL, name="train")])) == []


@pytest.mark.parametrize("fields, path, words", [
    ({"instanceType": "g3-ai-32-192-1500-l40s-48-9"}, "pools[0].instanceType", "unknown gcore GPU flavor"),
    ({"minNodes": 0}, "pools[0].minNodes", "cannot scale to zero"),
    ({"minNodes": 4}, "pools[0].minNodes", "greater than maxNodes"),
    ({"maxNodes": 201}, "pools[0].maxNodes", "limit of 200"),
    ({"instanceType": METAL, "placement": "affinity"}, "pools[0].placement", "bare-metal flavor"),
    ({"instanceType": METAL, "diskSizeGb": 100}, "pools[0].diskSizeGb", "bare-metal flavor"),
    ({"diskSizeGb": 2001}, "pools[0].diskSizeGb", "10-2000 GiB"),
    ({"name": "a-pool-name-of-21-chr"}, "pools[0].name", "cannot name a Gcore pool"),
    ({"name": "pool-"}, "pools[0].name", None),
    ({"spot": True}, "pools[0].spot", "flavors of their own"),
    ({"zones": ["1"]}, "pools[0].zones", "no availability zones"),
    ({"capacity": ["spot"]}, "pools[0].capacity[0]", "not a capacity kind of Gcore"),
    ({"instanceType": METAL, "fabric": "on"}, "pools[0].fabric", "not for Managed Kubernetes pools"),
    ({"os": "bottlerocket"}, "pools[0].os", "applies to aws only"),
])
def test_what_gcore_refuses_is_one_line_naming_the_field(fields, path, words):
    found = problems(stack_config("gcore", pools=[pool(**fields)]))
    assert any(line.startswith(f"{path}:") for line in found), found
    if words:
        assert any(words in line for line in found if line.startswith(f"{path}:")), found


@pytest.mark.parametrize("installer, words", [("cloud", "brings the driver only"), ("device-plugin", "installs the GPU Operator")])
def test_gcore_refuses_the_installers_it_has_no_place_for(installer, words):
    found = problems(stack_config("gcore", gpuSoftware={"installer": installer}))
    assert [line for line in found if line.startswith("gpuSoftware.installer:")] and all(
        words in line for line in found if line.startswith("gpuSoftware.installer:")), found
    assert problems(stack_config("gcore", gpuSoftware={"installer": "gpu-operator"})) == []


@pytest.mark.parametrize("config, path", [
    ({"pools": [pool(provisioning="compute-class")]}, "pools[0].provisioning"),
    ({"cluster": {"name": "ml-test", "keypair": "ml-admins", "mode": "auto-mode"}}, "cluster.mode"),
])
def test_gcore_refuses_the_other_clouds_managed_modes(config, path):
    assert any(line.startswith(f"{path}:") for line in problems(stack_config("gcore", **config))), problems(stack_config("gcore", **config))


def test_placement_and_boot_volume_pass_on_a_virtual_machine_flavor():
    assert problems(stack_config("gcore", pools=[pool(placement="anti-affinity", diskSizeGb=2000)])) == []


@pytest.mark.parametrize("cluster, path", [
    ({"name": "ml-test"}, "cluster.keypair"),
    ({"name": "ml-test", "keypair": "-admins"}, "cluster.keypair"),
    ({"name": "a-cluster-name-longer", "keypair": "ml-admins"}, "cluster.name"),
    ({"name": "ml-test", "keypair": "ml-admins", "authorizedCidrs": ["203.0.113.0/24"]}, "cluster.authorizedCidrs"),
    ({"name": "ml-test", "keypair": "ml-admins", "endpointAccess": "public"}, "cluster.endpointAccess"),
    ({"name": "ml-test", "keypair": "ml-admins", "resourceGroup": "rg"}, "cluster.resourceGroup"),
])
def test_gcore_cluster_fields(cluster, path):
    assert any(line.startswith(f"{path}:") for line in problems(stack_config("gcore", cluster=cluster)))


def test_an_existing_cluster_needs_no_keypair():
    assert problems(stack_config("gcore", cluster={"name": "ml-test", "create": False})) == []


def test_gcore_keys_are_refused_on_other_clouds():
    assert any(line.startswith("pools[0].placement:") for line in
               problems(stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3, "placement": "affinity"}])))
    assert any(line.startswith("cluster.keypair:") for line in problems(stack_config("aws", cluster={"name": "ml-test", "keypair": "ml-admins"})))


def test_project_and_region_are_required_and_the_api_key_is_no_stack_key(monkeypatch):
    monkeypatch.delenv("GCORE_CLOUD_PROJECT_ID", raising=False)
    config = stack_config("gcore")
    del config["gcore:projectId"]
    assert any(line.startswith("gcore:projectId:") for line in problems(config))
    monkeypatch.setenv("GCORE_CLOUD_PROJECT_ID", "42")
    assert problems(config) == []
    leaked = {**stack_config("gcore"), "gcore:apiKey": "sk-very-secret-value"}
    found = problems(leaked)
    assert any(line.startswith("gcore:apiKey:") for line in found) and not any("sk-very-secret-value" in line for line in found)


# --------------------------------------------------------------------------------------------------------------------
# Requests, as Gcore's SDK types them


def plan_for(**fields):
    from gpupools.pools.planning import plan_pools

    stack = validate_stack(stack_config("gcore", pools=[pool(**fields)]))
    return plan_pools(stack)[0], stack


def test_a_virtual_machine_pool_request_is_the_sdks_pool_create_params():
    plan, _ = plan_for(diskSizeGb=200, placement="anti-affinity")
    params = component.pool_create_params(decide.pool_params(plan))
    assert params["servergroup_policy"] == "anti-affinity" and params["boot_volume_size"] == 200
    assert params["boot_volume_type"] == "ssd_hiiops" and params["auto_healing_enabled"] is True
    assert params["taints"] == {"nvidia.com/gpu": "present:NoSchedule"}  # Gcore's form: key -> value:Effect
    assert params["min_node_count"] == 1 and params["max_node_count"] == 3


def test_a_bare_metal_pool_request_leaves_placement_and_boot_volume_unset():
    plan, _ = plan_for(instanceType=METAL, name="train")
    params = component.pool_create_params(decide.pool_params(plan))
    assert not {"servergroup_policy", "boot_volume_size", "boot_volume_type"} & set(params)
    assert params["auto_healing_enabled"] is False  # Gcore's GPU guide: autohealing off on GPU bare metal
    plan, _ = plan_for(instanceType=METAL, name="train", autoRepair=True)
    assert decide.pool_params(plan)["auto_healing_enabled"] is True


@pytest.mark.parametrize("change, field", [
    ({"taints": {"nvidia.com/gpu": "present=NoSchedule"}}, "pool.taints.nvidia.com/gpu"),
    ({"taints": {"nvidia.com/gpu": "present:NoScheduled"}}, "pool.taints.nvidia.com/gpu"),
    ({"min_node_count": "1"}, "pool.min_node_count"),
    ({"servergroup_policy": "spread"}, "pool.servergroup_policy"),
    ({"boot_volume_type": "nvme"}, "pool.boot_volume_type"),
    ({"flavour_id": VM}, "pool.flavour_id"),
])
def test_the_sdk_types_refuse_a_wrong_request_naming_the_field(change, field):
    plan, _ = plan_for()
    with pytest.raises(component.GcoreInputError) as exc:
        component.pool_create_params({**decide.pool_params(plan), **change})
    assert str(exc.value).startswith(f"{field}:")


def test_the_cluster_request_is_the_sdks_cluster_create_params():
    stack = validate_stack(stack_config("gcore"))
    params = decide.cluster_params(stack.cluster)
    component.cluster_create_params({**params, "version": decide.api_version(params["version"])})
    assert params["keypair"] == "ml-admins" and params["cni"] == {"provider": "cilium"}
    assert decide.api_version(None) == "v1.36.1" and decide.api_version("1.34") == "v1.34.6"
    with pytest.raises(component.GcoreInputError):
        component.cluster_create_params({**params, "version": "v1.36.1", "is_ipv6": "yes"})


# --------------------------------------------------------------------------------------------------------------------
# Replace, update, resize: as Gcore's Terraform provider decides


def terraform_fields(function: str) -> list[str]:
    """The pool fields a function of Gcore's Terraform provider compares (Go field names to the API's snake_case)."""
    text = (ROOT / "tests/reference/terraform-provider-gcore/resource.go").read_text()
    body = text.split(f"func {function}(", 1)[1].split("\n}\n", 1)[0]
    names = re.findall(r"old\.(\w+)\.Value|mapsEqualOrBothEmpty\(old\.(\w+),", body)
    go = [a or b for a, b in names]
    return [re.sub(r"(?<!^)(?=[A-Z])", "_", n).lower().replace("i_d", "id").replace("ipv4", "ipv4") for n in go]


def test_the_pool_diff_is_gcores_own():
    replace = terraform_fields("poolNeedsReplace")
    update = terraform_fields("poolNeedsUpdate")
    assert replace == ["flavor_id", "boot_volume_type", "boot_volume_size", "is_public_ipv4", "servergroup_policy", "crio_config", "kubelet_config"]
    assert set(decide.POOL_REPLACE) == {"name", *replace}
    from gcore.types.cloud.k8s.clusters import PoolUpdateParams

    assert set(decide.POOL_UPDATE) == set(update)
    assert set(decide.POOL_UPDATE) <= set(PoolUpdateParams.__annotations__)
    # Security groups: the SDK's PATCH takes them, Terraform compares them in neither function, nor does gpupools.
    text = (ROOT / "tests/reference/terraform-provider-gcore/resource.go").read_text()
    assert "SecurityGroup" not in text.split("func poolNeedsReplace(", 1)[1].split("// checkPoolQuotaLimits", 1)[0]
    assert "security_group_ids" in PoolUpdateParams.__annotations__ and "security_group_ids" not in decide.POOL_FIELDS
    assert not set(decide.POOL_REPLACE) & set(PoolUpdateParams.__annotations__)


BASE_POOL = {"name": "infer", "flavor_id": VM, "min_node_count": 1, "max_node_count": 3, "labels": {"a": "b"},
             "taints": {"nvidia.com/gpu": "present:NoSchedule"}, "auto_healing_enabled": True, "is_public_ipv4": False,
             "servergroup_policy": "soft-anti-affinity", "boot_volume_type": "ssd_hiiops", "boot_volume_size": 50}
NEW_VALUES = {"name": "infer2", "flavor_id": "g3-ai-64-384-3000-l40s-48-2", "boot_volume_type": "standard", "boot_volume_size": 60,
              "is_public_ipv4": True, "servergroup_policy": "affinity", "crio_config": {"default-ulimits": "nofile=1024:2048"},
              "kubelet_config": {"podMaxPids": "4096"}, "min_node_count": 2, "max_node_count": 4, "auto_healing_enabled": False,
              "labels": {"a": "c"}, "taints": {"x": "y:NoExecute"}}


@pytest.mark.parametrize("field", sorted(NEW_VALUES))
def test_every_pool_field_is_replaced_or_updated_in_place(field, fake):
    replaces, updates = decide.pool_change(BASE_POOL, {**BASE_POOL, field: NEW_VALUES[field]})
    if field in decide.POOL_REPLACE:
        assert (replaces, updates) == ([field], [])
    else:
        assert (replaces, updates) == ([], [field])
    api, provider = fake
    diff = provider.diff("c/infer", props(BASE_POOL), props({**BASE_POOL, field: NEW_VALUES[field]}))
    assert diff.changes is True and diff.replaces == ([f"pool.{field}"] if field in decide.POOL_REPLACE else [])
    assert diff.delete_before_replace is True
    # A replacement's quota is asked before the engine deletes anything; an update's is not.
    assert [c[1].rsplit("/", 1)[1] for c in api.calls] == (["check_limits"] if field in decide.POOL_REPLACE else [])


def test_no_change_and_server_labels_are_no_diff():
    assert decide.pool_change(BASE_POOL, dict(BASE_POOL)) == ([], [])
    read = {**BASE_POOL, "labels": {"a": "b", "gcorecluster.x-k8s.io/pool": "infer"}, "crio_config": {}}
    assert decide.pool_change(read, BASE_POOL) == ([], [])
    assert component.PoolProvider().diff("c/infer", props(BASE_POOL), props(dict(BASE_POOL))).changes is False


METAL_POOL = {"name": "train", "flavor_id": METAL, "min_node_count": 1, "max_node_count": 2, "labels": {"a": "b"},
              "taints": {"nvidia.com/gpu": "present:NoSchedule"}, "auto_healing_enabled": False, "is_public_ipv4": False}


@pytest.mark.parametrize("read, found", [
    # What the API reads back of a pool that set none of these (SDK K8SClusterPool: boot_volume_size int, boot_volume_type
    # str, security_group_ids list, all required): the same pool, as Gcore's Terraform provider takes it.
    ({"boot_volume_size": 0, "boot_volume_type": "", "servergroup_policy": None}, ([], [])),
    ({"crio_config": {}, "kubelet_config": {}, "security_group_ids": ["sg-default"]}, ([], [])),
    ({"auto_healing_enabled": None, "is_public_ipv4": None, "labels": {"a": "b", "gcorecluster.x-k8s.io/pool": "train"}}, ([], [])),
    # What differs still does.
    ({"boot_volume_size": 50}, (["boot_volume_size"], [])),
    ({"boot_volume_type": "standard"}, (["boot_volume_type"], [])),
    ({"servergroup_policy": "affinity"}, (["servergroup_policy"], [])),
    ({"is_public_ipv4": True}, (["is_public_ipv4"], [])),
    ({"crio_config": {"x": "y"}}, (["crio_config"], [])),
    ({"auto_healing_enabled": True}, ([], ["auto_healing_enabled"])),
    ({"max_node_count": 3}, ([], ["max_node_count"])),
    ({"taints": {}}, ([], ["taints"])),
])
def test_what_gcore_reads_back_for_unset_is_unset(read, found):
    assert decide.pool_change({**METAL_POOL, **read}, METAL_POOL) == found
    assert decide.pool_change(METAL_POOL, {**METAL_POOL, **read}) == found


@pytest.mark.parametrize("running, bounds, target", [(1, (1, 3), None), (3, (1, 3), None), (1, (2, 4), 2), (5, (1, 3), 3), (0, (1, 1), 1)])
def test_a_pool_is_resized_only_when_its_running_count_leaves_the_new_bounds(running, bounds, target):
    assert decide.resize_target(running, *bounds) == target


@pytest.mark.parametrize("field, kind", [("name", 0), ("keypair", 0), ("fixed_network", 0), ("is_ipv6", 0), ("csi", 0), ("version", 1),
                                         ("cni", 2), ("autoscaler_config", 2), ("authentication", 2), ("logging", 2)])
def test_every_cluster_field_is_replaced_upgraded_or_patched(field, kind):
    old = {"name": "ml", "keypair": "k", "version": "1.35", "cni": {"provider": "cilium"}}
    new = {**old, field: {"changed": "1"} if field not in ("name", "keypair", "version", "is_ipv6") else ("1.36" if field == "version" else True if field == "is_ipv6" else "x")}
    found = decide.cluster_change(old, new)
    assert found[kind] == [field] and sum(len(f) for f in found) == 1


@pytest.mark.parametrize("old, new, ok", [("1.35", "1.36", True), ("1.35", "1.35", True), ("1.34", "1.36", False), ("1.36", "1.35", False)])
def test_upgrades_go_one_minor_at_a_time_and_never_down(old, new, ok):
    assert (decide.upgrade_problem(old, new) is None) is ok


# --------------------------------------------------------------------------------------------------------------------
# The dynamic provider against a fake of Gcore's HTTP API, through the SDK's own client


def props(pool_params: dict) -> dict:
    return {"project_id": 1234567, "region_id": 76, "cluster_name": "ml-test", "pool": dict(pool_params)}


# The region listing both fakes answer first (every create checks the region: tests/clouds/test_gcore_region.py), kept
# out of their `calls`: the regions the tests use, with Managed Kubernetes.
REGIONS = {"count": 2, "results": [{"id": 76, "display_name": "Region-A", "state": "ACTIVE", "has_k8s": True},
                                   {"id": 8, "display_name": "Region-B", "state": "ACTIVE", "has_k8s": True}]}


def region_listing(request: httpx.Request) -> httpx.Response | None:
    return httpx.Response(200, json=REGIONS) if request.url.path == "/cloud/v1/regions" else None


class FakeGcore:
    """Gcore's k8s pool and task endpoints as the SDK calls them (paths from gcore 0.59.0 resources/cloud/k8s/clusters/
    pools/pools.py and resources/cloud/tasks.py), with pools kept in memory."""

    PREFIX = "/cloud/v2/k8s/clusters/1234567/76/ml-test/pools"

    def __init__(self, exceeded: dict | None = None):
        self.pools: dict[str, dict] = {}
        self.calls: list[tuple[str, str, dict]] = []
        self.auth: set[str] = set()
        self.exceeded = exceeded or {}  # what check_limits answers: the exceeded quotas only
        self.groups: list[str] = []  # the security groups Gcore gives a pool it was created without

    def pool_json(self, name: str) -> dict:
        p = self.pools[name]
        return {"id": f"id-{name}", "created_at": "2026-11-25T00:00:00", "status": "Running", "security_group_ids": self.groups,
                "boot_volume_size": p.get("boot_volume_size", 0), "boot_volume_type": p.get("boot_volume_type", ""),
                "crio_config": {}, "kubelet_config": {}, "is_public_ipv4": False, "auto_healing_enabled": False,
                "max_node_count": p.get("max_node_count", p["min_node_count"]), **p,
                "labels": {**p.get("labels", {}), "gcorecluster.x-k8s.io/pool": name}}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.auth.add(request.headers.get("authorization", ""))
        if listing := region_listing(request):
            return listing
        body = json.loads(request.content) if request.content else {}
        path = request.url.path
        self.calls.append((request.method, path, body))
        if re.fullmatch(r"/cloud/v2/k8s/clusters/[0-9]+/[0-9]+/pools/check_limits", path):  # any project and region
            return httpx.Response(200, json=self.exceeded)
        if path.startswith("/cloud/v1/tasks/"):
            name = path.rsplit("/", 1)[1]
            return httpx.Response(200, json={"id": name, "state": "FINISHED", "task_type": "x", "user_id": 1,
                                             "created_resources": {"k8s_pools": [name.removeprefix("task-")]}})
        if request.method == "POST" and path == self.PREFIX:
            self.pools[body["name"]] = {**body, "node_count": body["min_node_count"]}
            return httpx.Response(200, json={"tasks": [f"task-{body['name']}"]})
        name = path.removeprefix(self.PREFIX + "/").split("/")[0]
        if request.method == "GET":
            return httpx.Response(200, json=self.pool_json(name)) if name in self.pools else httpx.Response(404, json={})
        if request.method == "PATCH":
            self.pools[name].update(body)
            return httpx.Response(200, json=self.pool_json(name))
        if request.method == "POST" and path.endswith("/resize"):
            self.pools[name]["node_count"] = body["node_count"]
            return httpx.Response(200, json={"tasks": [f"task-{name}"]})
        if request.method == "DELETE":
            del self.pools[name]
            return httpx.Response(200, json={"tasks": [f"task-{name}"]})
        return httpx.Response(400, json={})


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv("GCORE_API_KEY", "test-key-123")
    api = FakeGcore()
    return api, component.PoolProvider(http_client=httpx.Client(transport=httpx.MockTransport(api)))


def test_create_sends_the_pool_and_keeps_the_key_out_of_the_outputs(fake):
    api, provider = fake
    params = dict(BASE_POOL)
    created = provider.create(props(params))
    assert created.id == "ml-test/infer" and created.outs["node_count"] == 1
    assert api.calls[0][1].endswith("/pools/check_limits") and api.calls[0][2]["flavor_id"] == VM
    method, path, body = api.calls[1]
    assert (method, path) == ("POST", FakeGcore.PREFIX) and body == params
    assert api.auth == {"APIKey test-key-123"}
    assert "test-key-123" not in json.dumps(created.outs)


def test_update_patches_in_place_and_resizes_past_the_new_floor(fake):
    api, provider = fake
    provider.create(props(BASE_POOL))
    new = {**BASE_POOL, "min_node_count": 2, "max_node_count": 5, "labels": {"a": "c"}}
    result = provider.update("ml-test/infer", props(BASE_POOL), props(new))
    patch = [c for c in api.calls if c[0] == "PATCH"]
    assert patch == [("PATCH", f"{FakeGcore.PREFIX}/infer", {"min_node_count": 2, "max_node_count": 5, "labels": {"a": "c"}})]
    assert [c for c in api.calls if c[1].endswith("/resize")] == [("POST", f"{FakeGcore.PREFIX}/infer/resize", {"node_count": 2})]
    assert result.outs["node_count"] == 2


def test_update_inside_the_bounds_does_not_resize(fake):
    api, provider = fake
    provider.create(props(BASE_POOL))
    provider.update("ml-test/infer", props(BASE_POOL), props({**BASE_POOL, "max_node_count": 6, "taints": {}}))
    assert [c[2] for c in api.calls if c[0] == "PATCH"] == [{"max_node_count": 6, "taints": {}}]
    assert not [c for c in api.calls if c[1].endswith("/resize")]


def test_read_leaves_out_server_labels_and_delete_removes_the_pool(fake):
    api, provider = fake
    provider.create(props(BASE_POOL))
    read = provider.read("ml-test/infer", props(BASE_POOL))
    assert read.outs["pool"]["labels"] == {"a": "b"} and decide.pool_change(BASE_POOL, read.outs["pool"]) == ([], [])
    provider.delete("ml-test/infer", props(BASE_POOL))
    assert api.pools == {} and api.calls[-2][0] == "DELETE"


def test_a_refreshed_bare_metal_pool_is_no_change(fake):
    """The API reads a bare-metal pool back with boot_volume_size 0 and boot_volume_type "": a refresh must not make
    that a new boot volume, which would replace the pool."""
    _, provider = fake
    pool = decide.pool_params(plan_for(instanceType=METAL, name="train")[0])
    assert "boot_volume_size" not in pool
    created = provider.create(props(pool))
    read = provider.read(created.id, created.outs)
    assert not {"boot_volume_size", "boot_volume_type", "security_group_ids"} & set(read.outs["pool"])
    diff = provider.diff(created.id, read.outs, props(pool))
    assert (diff.changes, diff.replaces) == (False, [])
    # A state an earlier refresh wrote, the API's zeros in it: the same pool.
    stale = {**read.outs, "pool": {**read.outs["pool"], "boot_volume_size": 0, "boot_volume_type": "", "security_group_ids": []}}
    assert provider.diff(created.id, stale, props(pool)).changes is False
    # A new flavor still replaces it.
    assert provider.diff(created.id, read.outs, props({**pool, "flavor_id": "bm3-ai-1xlarge-a100-80-8"})).replaces == ["pool.flavor_id"]


def test_refresh_and_update_leave_the_pools_security_groups_alone(fake):
    api, provider = fake
    api.groups = ["sg-cluster", "sg-ssh"]
    created = provider.create(props(BASE_POOL))
    read = provider.read(created.id, created.outs)
    assert provider.diff(created.id, read.outs, props(BASE_POOL)).changes is False
    new = {**BASE_POOL, "labels": {"a": "c"}}
    diff = provider.diff(created.id, read.outs, props(new))
    assert (diff.changes, diff.replaces) == (True, [])
    provider.update(created.id, read.outs, props(new))
    assert [c[2] for c in api.calls if c[0] == "PATCH"] == [{"labels": {"a": "c"}}]
    assert api.pool_json("infer")["security_group_ids"] == ["sg-cluster", "sg-ssh"]


def test_a_refresh_shows_what_was_changed_outside_and_the_update_puts_it_back(fake):
    api, provider = fake
    created = provider.create(props(BASE_POOL))
    api.pools["infer"].update(auto_healing_enabled=False, labels={})
    read = provider.read(created.id, created.outs)
    diff = provider.diff(created.id, read.outs, props(BASE_POOL))
    assert (diff.changes, diff.replaces) == (True, [])
    provider.update(created.id, read.outs, props(BASE_POOL))
    assert [c[2] for c in api.calls if c[0] == "PATCH"] == [{"auto_healing_enabled": True, "labels": {"a": "b"}}]
    api.pools["infer"]["servergroup_policy"] = "affinity"
    read = provider.read(created.id, created.outs)
    assert provider.diff(created.id, read.outs, props(BASE_POOL)).replaces == ["pool.servergroup_policy"]


def test_an_update_sends_what_the_new_pool_leaves_unset_as_unset(fake):
    api, provider = fake
    provider.create(props(BASE_POOL))
    new = {k: v for k, v in BASE_POOL.items() if k not in ("taints", "auto_healing_enabled")}
    provider.update("ml-test/infer", props(BASE_POOL), props(new))
    assert [c[2] for c in api.calls if c[0] == "PATCH"] == [{"auto_healing_enabled": False, "taints": {}}]


def test_a_replacement_beyond_the_quota_is_refused_before_the_old_pool_goes(fake):
    """With delete_before_replace the engine deletes the old pool, then creates the new one; it asks Diff first, so the
    quota of the new pool is checked there, while nothing has been deleted (Gcore's Terraform provider checks first)."""
    api, provider = fake
    created = provider.create(props(BASE_POOL))
    new = {**BASE_POOL, "flavor_id": "g3-ai-64-384-3000-l40s-48-2"}
    api.exceeded = {"gpu_virtual_l40s_count_limit": 4, "gpu_virtual_l40s_count_usage": 3, "gpu_virtual_l40s_count_requested": 6}
    with pytest.raises(component.GcoreInputError) as exc:
        provider.diff(created.id, created.outs, props(new))
    assert str(exc.value).startswith("pool infer: the project's Gcore quota is too small (gpu_virtual_l40s_count: 6 requested")
    assert "the pool it replaces still counts" in str(exc.value)
    assert "infer" in api.pools and not [c for c in api.calls if c[0] == "DELETE"]
    assert [c[2]["flavor_id"] for c in api.calls if c[1].endswith("/check_limits")][-1] == "g3-ai-64-384-3000-l40s-48-2"
    api.exceeded = {}
    diff = provider.diff(created.id, created.outs, props(new))
    assert diff.replaces == ["pool.flavor_id"] and diff.delete_before_replace is True
    # An in-place change, or none, asks Gcore nothing.
    before = len(api.calls)
    assert provider.diff(created.id, created.outs, props({**BASE_POOL, "max_node_count": 5})).replaces == []
    assert provider.diff(created.id, created.outs, props(BASE_POOL)).changes is False
    assert len(api.calls) == before


def test_without_an_api_key_the_provider_says_which_variable(monkeypatch):
    monkeypatch.delenv("GCORE_API_KEY", raising=False)
    with pytest.raises(component.GcoreInputError, match="GCORE_API_KEY"):
        component.PoolProvider().create(props(BASE_POOL))


# --------------------------------------------------------------------------------------------------------------------
# The example stack


@pytest.fixture(scope="module")
def gcore_plan():
    from gpupools.stack.reading import read_document

    config = read_document(ROOT / "stacks" / "Pulumi.dev-gcore.yaml")["config"]
    return validate_stack(config), plan_of(config, "dev-gcore")


def test_the_example_plans_pools_whose_gpu_requests_grow_them(gcore_plan):
    stack, result = gcore_plan
    pools = [r for r in result.resources if r.type == "pulumi-python:dynamic:Resource" and "pool" in r.inputs]
    assert sorted(r.inputs["pool"]["name"] for r in pools) == ["infer", "train"]
    assert all("__provider" not in json.dumps(r.inputs.get("pool")) for r in pools)
    for verdict in result.outputs["landing"]:
        assert verdict["lands"], verdict
        if verdict["shape"] == "unit":
            assert "one more such Job makes Gcore's cluster autoscaler add a node" in verdict["node"]


def test_the_gpu_operator_leaves_the_driver_to_gcores_image(gcore_plan):
    stack, result = gcore_plan
    release = next(r for r in result.resources if r.type == "kubernetes:helm.sh/v3:Release" and r.inputs.get("name") == "gpu-operator")
    values = release.inputs["values"]
    assert values["driver"]["enabled"] is False and values["toolkit"]["enabled"] is True
    assert "defaultRuntime" not in json.dumps(values)  # the pinned operator detects CRI-O itself
    crd = (ROOT / "tests/charts/gpu-operator/crds/nvidia.com_clusterpolicies.yaml").read_text()
    assert "DefaultRuntime is no longer used by\n                      the gpu-operator" in crd


def test_the_plan_says_to_check_gcores_own_device_plugin_beside_bare_metal_pools(gcore_plan):
    stack, result = gcore_plan
    assert not [r for r in result.resources if "DaemonSet" in r.type]  # nothing assumed of what Gcore installs
    notes = decide.plan_notes(stack.pools)
    assert len(notes) == 1 and "kube-system/nvidia-device-plugin-daemonset" in notes[0] and "on train:" in notes[0]
    assert decide.plan_notes(validate_stack(stack_config("gcore")).pools) == []


class FakeGcoreClusters:
    """Gcore's k8s cluster endpoints as the SDK calls them (gcore 0.59.0 resources/cloud/k8s/k8s.py create_versions,
    clusters/clusters.py, clusters/kubeconfig.py, clusters/pools/pools.py), one region with the versions its
    documentation lists, each cluster with its pools."""

    PREFIX = "/cloud/v2/k8s/clusters/1234567/76"
    VERSIONS = ["v1.33.10", "v1.34.6", "v1.35.3", "v1.35.1", "v1.36.1"]

    def __init__(self):
        self.clusters: dict[str, dict] = {}
        self.pools: dict[str, dict[str, dict]] = {}  # cluster -> pool name -> pool
        self.exceeded: dict = {}
        self.calls: list[tuple[str, str, dict]] = []

    def pool_json(self, cluster: str, name: str) -> dict:
        p = self.pools[cluster][name]
        return {"id": f"id-{name}", "created_at": "2026-11-25T00:00:00", "status": "Running", "security_group_ids": ["sg-x"],
                "boot_volume_size": 0, "boot_volume_type": "", "crio_config": {}, "kubelet_config": {}, "is_public_ipv4": False,
                "auto_healing_enabled": False, "labels": {}, "taints": {}, "max_node_count": p["min_node_count"], **p}

    def cluster_json(self, name: str) -> dict:
        c = self.clusters[name]
        return {"id": f"id-{name}", "add_ons": {"slurm": {"enabled": False}}, "created_at": "2026-11-25", "csi": {"nfs": {"ddn_enabled": False,
                "vast_enabled": False}}, "is_public": True, "keypair": c["keypair"], "name": name, "status": "Provisioned",
                "pools": [self.pool_json(name, p) for p in self.pools.get(name, {})], "version": c["version"], "cni": c.get("cni")}

    def task(self, kind: str, name: str) -> httpx.Response:
        return httpx.Response(200, json={"tasks": [f"task-{kind}-{name}"]})

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if listing := region_listing(request):
            return listing
        body = json.loads(request.content) if request.content else {}
        path = request.url.path
        self.calls.append((request.method, path, body))
        if path == "/cloud/v2/k8s/1234567/76/create_versions":
            return httpx.Response(200, json={"count": len(self.VERSIONS), "results": [{"version": v} for v in self.VERSIONS]})
        if path == f"{self.PREFIX}/pools/check_limits":
            return httpx.Response(200, json=self.exceeded)
        if path.startswith("/cloud/v1/tasks/"):
            kind, _, name = path.rsplit("/", 1)[1].removeprefix("task-").partition("-")
            return httpx.Response(200, json={"id": name, "state": "FINISHED", "task_type": "x", "user_id": 1,
                                             "created_resources": {f"k8s_{kind}s": [name]}})
        if request.method == "POST" and path == self.PREFIX:
            self.clusters[body["name"]] = body
            self.pools[body["name"]] = {p["name"]: {**p, "node_count": p["min_node_count"]} for p in body["pools"]}
            return self.task("cluster", body["name"])
        name, _, rest = path.removeprefix(self.PREFIX + "/").partition("/")
        if rest == "pools" and request.method == "POST":
            self.pools[name][body["name"]] = {**body, "node_count": body["min_node_count"]}
            return self.task("pool", body["name"])
        if rest.startswith("pools/"):
            pool, _, action = rest.removeprefix("pools/").partition("/")
            if action == "resize":
                self.pools[name][pool]["node_count"] = body["node_count"]
                return self.task("pool", pool)
            if request.method == "PATCH":
                self.pools[name][pool].update(body)
                return httpx.Response(200, json=self.pool_json(name, pool))
            if request.method == "DELETE":
                del self.pools[name][pool]
                return self.task("pool", pool)
            return httpx.Response(200, json=self.pool_json(name, pool)) if pool in self.pools[name] else httpx.Response(404, json={})
        if rest == "config":
            return httpx.Response(200, json={"config": f"kubeconfig of {name}", "client_certificate": "", "client_key": "",
                                             "cluster_ca_certificate": "", "created_at": "2026-11-25T00:00:00Z",
                                             "expires_at": "2027-11-25T00:00:00Z", "host": "https://k8s.example"})
        if rest == "upgrade":
            self.clusters[name]["version"] = body["version"]
            return self.task("cluster", name)
        if request.method == "PATCH":
            self.clusters[name].update(body)
            return self.task("cluster", name)
        if request.method == "GET":
            return httpx.Response(200, json=self.cluster_json(name))
        if request.method == "DELETE":
            del self.clusters[name]
            return self.task("cluster", name)
        return httpx.Response(400, json={})


@pytest.fixture
def clusters(monkeypatch):
    monkeypatch.setenv("GCORE_API_KEY", "test-key-123")
    api = FakeGcoreClusters()
    return api, component.ClusterProvider(http_client=httpx.Client(transport=httpx.MockTransport(api)))


def cluster_props(**cluster) -> dict:
    params = decide.cluster_params(validate_stack(stack_config("gcore")).cluster)
    return {"project_id": 1234567, "region_id": 76, "cluster": {**params, "version": "1.35", **cluster}, "adopt": False}


def test_a_new_cluster_gets_the_newest_patch_of_its_minor_and_a_kubeconfig(clusters):
    api, provider = clusters
    created = provider.create(cluster_props())
    assert created.id == "ml-test" and created.outs["version"] == "v1.35.3"  # not v1.35.1, not another minor
    sent = next(b for m, p, b in api.calls if m == "POST" and p == FakeGcoreClusters.PREFIX)
    assert sent["version"] == "v1.35.3" and sent["keypair"] == "ml-admins" and sent["pools"][0]["name"] == "system"
    assert created.outs["kubeconfig"] == "kubeconfig of ml-test" and "test-key-123" not in json.dumps(created.outs)


def test_a_minor_gcore_does_not_offer_is_refused(clusters):
    _, provider = clusters
    with pytest.raises(component.GcoreInputError, match="cluster.version: Gcore offers no Kubernetes 1.37"):
        provider.create(cluster_props(version="1.37"))


def test_a_cluster_upgrades_one_minor_and_patches_in_place(clusters):
    api, provider = clusters
    old = cluster_props()
    outs = provider.create(old).outs
    new = cluster_props(version="1.36", autoscaler_config={"scale-down-unneeded-time": "5m"})
    diff = provider.diff("ml-test", {**old, **outs}, new)
    assert diff.changes and diff.replaces == []
    result = provider.update("ml-test", {**old, **outs}, new)
    assert result.outs["version"] == "v1.36.1" and result.outs["kubeconfig"] == "kubeconfig of ml-test"
    assert [b for m, p, b in api.calls if p.endswith("/upgrade")] == [{"version": "v1.36.1"}]
    assert [b for m, p, b in api.calls if m == "PATCH"] == [{"autoscaler_config": {"scale-down-unneeded-time": "5m"}}]
    with pytest.raises(component.GcoreInputError, match="one minor version at a time"):
        provider.update("ml-test", {**old, **outs}, cluster_props(version="1.37"))


def test_a_new_keypair_replaces_the_cluster_and_an_adopted_one_is_never_deleted(clusters):
    api, provider = clusters
    old = cluster_props()
    assert provider.diff("ml-test", old, cluster_props(keypair="other-admins")).replaces == ["cluster.keypair"]
    provider.create(old)
    adopted = {**old, "adopt": True}
    outs = provider.create(adopted).outs
    assert outs["version"] == "v1.35.3" and outs["findings"] == []  # the fake cluster runs Cilium
    api.clusters["ml-test"]["cni"] = {"provider": "calico"}
    assert "does not run Cilium" in provider.create(adopted).outs["findings"][0]
    provider.delete("ml-test", adopted)
    assert "ml-test" in api.clusters and not [c for c in api.calls if c[0] == "DELETE"]
    provider.delete("ml-test", old)
    assert "ml-test" not in api.clusters


def test_a_change_to_the_clusters_system_pool_is_made_in_place(clusters):
    api, provider = clusters
    old = cluster_props()
    outs = {**old, **provider.create(old).outs}
    system = old["cluster"]["pools"][0]
    assert provider.diff("ml-test", outs, cluster_props()).changes is False
    new = cluster_props(pools=[{**system, "max_node_count": 5, "labels": {**system["labels"], "team": "infra"}}])
    diff = provider.diff("ml-test", outs, new)
    assert (diff.changes, diff.replaces) == (True, [])
    provider.update("ml-test", outs, new)
    assert [(p, b) for m, p, b in api.calls if m == "PATCH"] == [
        (f"{FakeGcoreClusters.PREFIX}/ml-test/pools/system", {"max_node_count": 5, "labels": {"gpupools.io/pool": "system", "team": "infra"}})]
    assert not [c for c in api.calls if c[0] == "DELETE" or c[1].endswith("/resize")]
    # The security groups Gcore gave the pool are not the stack's to change; a raised floor resizes the pool.
    provider.update("ml-test", {**outs, **new}, cluster_props(pools=[{**new["cluster"]["pools"][0], "min_node_count": 2}]))
    assert [b for m, p, b in api.calls if p.endswith("/system/resize")] == [{"node_count": 2}]
    assert "security_group_ids" not in json.dumps([b for m, p, b in api.calls if m == "PATCH"])


def test_a_system_pool_replacement_checks_the_quota_first_and_never_removes_the_only_pool(clusters):
    api, provider = clusters
    old = cluster_props()
    outs = {**old, **provider.create(old).outs}
    system = old["cluster"]["pools"][0]
    new = cluster_props(pools=[{**system, "flavor_id": "g1-standard-8-16"}])
    assert provider.diff("ml-test", outs, new).replaces == []  # the cluster stays; its pool is replaced by the update
    with pytest.raises(component.GcoreInputError, match=r"^cluster.pools\[system\].flavor_id: Gcore replaces a pool .* the only pool"):
        provider.update("ml-test", outs, new)
    assert "system" in api.pools["ml-test"] and not [c for c in api.calls if c[0] == "DELETE"]
    api.pools["ml-test"]["infer"] = {"name": "infer", "flavor_id": VM, "min_node_count": 1, "node_count": 1}  # a GPU pool
    api.exceeded = {"cpu_count_limit": 8, "cpu_count_usage": 8, "cpu_count_requested": 8}
    with pytest.raises(component.GcoreInputError, match="the pool it replaces still counts"):
        provider.update("ml-test", outs, new)
    assert api.pools["ml-test"]["system"]["flavor_id"] == "g1-standard-4-8" and not [c for c in api.calls if c[0] == "DELETE"]
    api.exceeded = {}
    provider.update("ml-test", outs, new)
    changes = [(m, p.removeprefix(FakeGcoreClusters.PREFIX)) for m, p, b in api.calls if "/pools" in p and m != "GET"][-3:]
    assert changes == [("POST", "/pools/check_limits"), ("DELETE", "/ml-test/pools/system"), ("POST", "/ml-test/pools")]
    assert api.pools["ml-test"]["system"]["flavor_id"] == "g1-standard-8-16" and "infer" in api.pools["ml-test"]


def test_gcore_capacity_repair_and_existing_cluster_lines():
    plan, _ = plan_for(instanceType=METAL, name="train")
    assert decide.capacity_lines(plan.pool, "cloud") == [f"on-demand: flavor {METAL}"]
    assert decide.repair_facts(plan, "cloud")[1].startswith("nothing: auto-healing is off")
    vm, _ = plan_for()
    assert decide.repair_facts(vm, "cloud")[1].startswith("Gcore auto-healing drains and replaces")
    assert decide.existing_cluster_findings("ml", {"cni": {"provider": "calico"}}) != []
    assert decide.existing_cluster_findings("ml", {"cni": {"provider": "cilium"}}) == []


def test_the_policy_pack_judges_gcore_pools_as_gcore_sells_them(gcore_plan):
    """Gcore pools are GPU pools to the pack (their GPUs counted, 38 at maxNodes), with nothing to say of a price Gcore does
    not publish, a fabric it does not offer on Kubernetes or capacity a Gcore pool cannot buy ahead; a flavor the catalog
    does not know still cannot be budgeted."""
    from gpupools.cli.policycheck import run_policies
    from gpupools.policies._readback import fleet
    from gpupools.policies.budget import fleet_totals

    _, result = gcore_plan
    assert run_policies(result).violations == []
    resources = [type("R", (), {"resource_type": r.type, "name": r.name, "props": r.inputs, "urn": r.name})() for r in result.resources]
    pools = fleet(resources)
    assert sorted(p.pool for p in pools) == ["infer", "train"] and {p.cloud for p in pools} == {"gcore"}
    assert fleet_totals(pools)[0] == 38 and fleet_totals(pools)[2] == []
    unknown = [p for p in pools if p.pool == "train"][0]
    unknown.instance_type = "bm9-ai-unknown"
    assert fleet_totals([unknown])[2] == ["train"]


def test_a_pool_beyond_the_projects_quota_is_refused_before_anything_is_created(monkeypatch):
    monkeypatch.setenv("GCORE_API_KEY", "test-key-123")
    api = FakeGcore(exceeded={"gpu_virtual_l40s_count_limit": 2, "gpu_virtual_l40s_count_usage": 1, "gpu_virtual_l40s_count_requested": 3})
    provider = component.PoolProvider(http_client=httpx.Client(transport=httpx.MockTransport(api)))
    with pytest.raises(component.GcoreInputError) as exc:
        provider.create(props(BASE_POOL))
    assert "gpu_virtual_l40s_count: 3 requested, 1 in use, limit 2" in str(exc.value)
    assert api.pools == {} and [c[0] for c in api.calls] == ["POST"]


@pytest.mark.parametrize("key, value", [("cluster_name", "other"), ("project_id", 7654321), ("region_id", 8)])
def test_a_pool_moved_to_another_cluster_project_or_region_is_a_new_pool(key, value, fake):
    api, provider = fake
    diff = provider.diff("ml-test/infer", props(BASE_POOL), {**props(BASE_POOL), key: value})
    assert diff.changes and diff.replaces == [key]
    assert len([c for c in api.calls if c[1].endswith("/check_limits")]) == 1
    assert component.PoolProvider().diff("ml-test/infer", props(BASE_POOL), {**props(BASE_POOL), key: str(props(BASE_POOL)[key])}).changes is False


def test_a_cluster_moved_to_another_project_or_region_is_a_new_cluster(clusters):
    old = cluster_props()
    assert clusters[1].diff("ml-test", old, {**old, "region_id": 8}).replaces == ["region_id"]  # the new region checked first
    assert component.ClusterProvider().diff("ml-test", old, dict(old)).changes is False
    assert component.ClusterProvider().diff("ml-test", old, {**old, "adopt": True}).replaces == ["adopt"]
    adopted = {**old, "adopt": True}
    assert component.ClusterProvider().diff("ml-test", adopted, cluster_props(keypair="other-admins") | {"adopt": True}).changes is False


def test_gcore_upgrades_only_with_the_clusters_version():
    from gpupools.upgrades.policy import upgrade_lines

    ok = validate_stack(stack_config("gcore", pools=[pool(upgrades="inference")]))
    (line,) = upgrade_lines(ok, ok.pools[0], "cloud")
    assert line.startswith("inference: Gcore upgrades the pool with the cluster, only when cluster.kubernetesVersion changes")
    found = problems(stack_config("gcore", pools=[pool(upgrades={"kind": "training", "maxSurge": 1})]))
    assert [line.split(":")[0] for line in found] == ["pools[0].upgrades.maxSurge"]
    found = problems(stack_config("gcore", upgrades={"exclusions": [{"name": "launch", "start": "2026-12-01", "end": "2026-12-03"}]}))
    assert [line.split(":")[0] for line in found] == ["upgrades.exclusions"]


# --------------------------------------------------------------------------------------------------------------------
# The SDK's types judge each request in the providers' Check (the engine's first question, `pulumi preview` included)


def _dynamic(plan, key: str) -> list[dict]:
    return [r.inputs for r in plan.resources if r.type == "pulumi-python:dynamic:Resource" and key in r.inputs]


@pytest.mark.parametrize("stack", ["dev-gcore", "wide-gcore"])
def test_every_request_a_plan_makes_passes_the_providers_check(stack):
    import runpy

    from gpupools.stack.values import read_stack_file

    wide = runpy.run_path(str(ROOT / "tests" / "stack" / "wide_stacks.py"))["WIDE"]["gcore"]
    plan = plan_of(wide if stack == "wide-gcore" else read_stack_file(ROOT / "stacks" / f"Pulumi.{stack}.yaml"))
    pools, clusters = _dynamic(plan, "pool"), _dynamic(plan, "cluster")
    assert pools and clusters
    for inputs in pools:
        assert component.PoolProvider().check({}, inputs).failures == []
    for inputs in clusters:
        assert component.ClusterProvider().check({}, inputs).failures == []


def test_the_providers_check_names_the_field_the_sdk_types_refuse():
    from gpupools.stack.values import read_stack_file

    plan = plan_of(read_stack_file(ROOT / "stacks" / "Pulumi.dev-gcore.yaml"))
    pool, cluster = _dynamic(plan, "pool")[0], _dynamic(plan, "cluster")[0]
    failures = component.PoolProvider().check({}, {**pool, "pool": {**pool["pool"], "min_node_count": "1"}}).failures
    assert [(f.property, f.reason.split(":")[0]) for f in failures] == [("pool", "pool.min_node_count")]
    failures = component.PoolProvider().check({}, {**pool, "pool": {**pool["pool"], "taints": {"a": "b=NoSchedule"}}}).failures
    assert [(f.property, f.reason.split(":")[0]) for f in failures] == [("pool", "pool.taints.a")]
    failures = component.ClusterProvider().check({}, {**cluster, "cluster": {**cluster["cluster"], "is_ipv6": "yes"}}).failures
    assert [(f.property, f.reason.split(":")[0]) for f in failures] == [("cluster", "cluster.is_ipv6")]
    # An adopted cluster is read, never created: nothing to check.
    assert component.ClusterProvider().check({}, {**cluster, "adopt": True, "cluster": {"is_ipv6": "yes"}}).failures == []


def test_a_plan_takes_no_time_to_import_the_sdk():
    """The SDK's types cost about 0.19 s to import; a plan's own checks (the taint form) need none of it."""
    import subprocess
    import sys

    code = ("import sys; sys.argv[0] = 'gpupools'\n"
            "from gpupools.cli.planrun import run_program\n"
            "from gpupools.stack.values import read_stack_file\n"
            "run_program(read_stack_file('stacks/Pulumi.dev-gcore.yaml'), 'dev-gcore')\n"
            "print(sorted(m for m in sys.modules if m == 'gcore' or m.startswith('gcore.')))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_a_wrong_taint_form_still_stops_the_plan():
    plan, _ = plan_for()
    with pytest.raises(component.GcoreInputError, match="pool.taints.nvidia.com/gpu"):
        component.pool_taints({**decide.pool_params(plan), "taints": {"nvidia.com/gpu": "present=NoSchedule"}})
    assert component.pool_taints(decide.pool_params(plan)) == decide.pool_params(plan)

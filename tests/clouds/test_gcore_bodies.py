"""Gcore's request bodies and diff, field by field (gpupools/clouds/gcore.py): what a pool and the cluster are created
with, which change replaces, patches or resizes, what a failed call prints, and what a stack may not ask. Each test
names what it protects, so that a flipped comparison, a negated condition, a dropped line or a misspelled key there
fails here. The bodies are the SDK's own parameter names (gcore 0.59.0 PoolCreateParams, ClusterCreateParams)."""

from __future__ import annotations

import pytest

from conftest import config_problems, stack_config
from gpupools.clouds import gcore
from gpupools.pools.planning import plan_pools
from gpupools.validation.stack import validate_stack

VM = "g3-ai-32-192-1500-l40s-48-1"
METAL = "bm3-ai-1xlarge-h100-80-8"


def plan_of(**pool):
    fields = {"name": "infer", "instanceType": VM, "minNodes": 1, "maxNodes": 3, **pool}
    return plan_pools(validate_stack(stack_config("gcore", pools=[fields])))[0]


# --------------------------------------------------------------------------------------------------------------------
# Request bodies


def test_a_virtual_machine_pool_is_created_with_its_server_group_boot_volume_and_auto_healing():
    assert gcore.pool_params(plan_of()) == {
        "name": "infer", "flavor_id": VM, "min_node_count": 1, "max_node_count": 3,
        "labels": {"gpupools.io/gpu": "L40S", "gpupools.io/pool": "infer", "nvidia.com/device-plugin.config": "no-sharing"},
        "taints": {"nvidia.com/gpu": "present:NoSchedule"},
        "auto_healing_enabled": True, "is_public_ipv4": False,
        "servergroup_policy": "soft-anti-affinity", "boot_volume_type": "ssd_hiiops", "boot_volume_size": 50}
    chosen = gcore.pool_params(plan_of(placement="affinity", diskSizeGb=120, autoRepair=False, minNodes=2, maxNodes=5))
    assert (chosen["servergroup_policy"], chosen["boot_volume_size"], chosen["auto_healing_enabled"]) == ("affinity", 120, False)
    assert (chosen["min_node_count"], chosen["max_node_count"]) == (2, 5)


def test_a_bare_metal_pool_sets_no_server_group_or_boot_volume_and_heals_only_when_asked():
    body = gcore.pool_params(plan_of(name="train", instanceType=METAL))
    assert body == {"name": "train", "flavor_id": METAL, "min_node_count": 1, "max_node_count": 3,
                    "labels": {"gpupools.io/gpu": "H100-80GB", "gpupools.io/pool": "train", "nvidia.com/device-plugin.config": "no-sharing",
                               "nvidia.com/mig.config": "all-disabled"},
                    "taints": {"nvidia.com/gpu": "present:NoSchedule"}, "auto_healing_enabled": False, "is_public_ipv4": False}
    assert gcore.pool_params(plan_of(name="train", instanceType=METAL, autoRepair=True))["auto_healing_enabled"] is True


@pytest.mark.parametrize("flavor, metal", [(VM, False), ("a1-gpu-v100-16g", False), (METAL, True), ("bm3-ai-ndp2-1xlarge-h100-80-8", True)])
def test_flavors_starting_with_g_or_a_are_virtual_machines(flavor, metal):
    assert gcore.bare_metal(flavor) is metal


def test_the_cluster_is_created_with_cilium_and_its_own_cpu_pool():
    stack = validate_stack(stack_config("gcore", cluster={"name": "ml-test", "keypair": "ml-admins", "kubernetesVersion": "1.35"}))
    assert gcore.cluster_params(stack.cluster) == {
        "name": "ml-test", "keypair": "ml-admins", "version": "1.35", "cni": {"provider": "cilium"},
        "pools": [{"name": "system", "flavor_id": "g1-standard-4-8", "min_node_count": 1, "max_node_count": 3, "auto_healing_enabled": True,
                   "is_public_ipv4": False, "servergroup_policy": "soft-anti-affinity", "boot_volume_type": "ssd_hiiops",
                   "boot_volume_size": 50, "labels": {"gpupools.io/pool": "system"}}]}
    default = gcore.cluster_params(validate_stack(stack_config("gcore")).cluster)
    assert default["version"] == gcore.DEFAULT_KUBERNETES_VERSION == "1.36"
    assert gcore.api_version("1.33") == "v1.33.10" and gcore.api_version(None) == "v1.36.1"


def test_two_taints_with_one_key_cannot_be_said_in_gcores_taint_map():
    from dataclasses import replace

    from gpupools.core.pools import Taint

    plan = replace(plan_of(), taints=(Taint("a", "1", "NoSchedule"), Taint("b", "2", "NoExecute")))
    assert gcore.taints(plan) == {"a": "1:NoSchedule", "b": "2:NoExecute"}
    with pytest.raises(ValueError, match="two taints with key 'a'"):
        gcore.taints(replace(plan, taints=(Taint("a", "1", "NoSchedule"), Taint("a", "2", "NoExecute"))))


# --------------------------------------------------------------------------------------------------------------------
# The diff: replace, patch, resize, upgrade


def test_unset_values_leave_the_diff_and_server_labels_too():
    read = {"name": "train", "flavor_id": METAL, "min_node_count": 1, "max_node_count": 2, "labels": {"gcorecluster.x-k8s.io/x": "1", "a": "b"},
            "taints": {}, "auto_healing_enabled": False, "is_public_ipv4": False, "boot_volume_size": 0, "boot_volume_type": "",
            "servergroup_policy": None, "crio_config": {}, "kubelet_config": {}, "security_group_ids": ["sg"], "status": "Running"}
    assert gcore.normal_pool(read) == {"name": "train", "flavor_id": METAL, "min_node_count": 1, "max_node_count": 2, "labels": {"a": "b"}}


def test_an_update_sends_an_empty_map_to_clear_a_map_and_false_to_stop_healing():
    assert [gcore.unset_value(f) for f in ("labels", "taints", "crio_config", "kubelet_config")] == [{}, {}, {}, {}]
    assert gcore.unset_value("auto_healing_enabled") is False
    assert gcore.unset_value("max_node_count") is None and gcore.unset_value("servergroup_policy") is None


def test_changes_are_listed_in_the_apis_order_replacements_apart_from_updates():
    old = {"name": "p", "flavor_id": VM, "min_node_count": 1, "max_node_count": 3, "boot_volume_size": 50, "labels": {"a": "b"}}
    new = {**old, "flavor_id": "g3-other", "boot_volume_size": 60, "max_node_count": 4, "labels": {}}
    assert gcore.pool_change(old, new) == (["flavor_id", "boot_volume_size"], ["max_node_count", "labels"])
    assert gcore.changed(("a", "b", "c"), {"a": 1, "b": 2}, {"a": 1, "b": 3, "c": 4}) == ["b", "c"]


def test_the_clusters_own_pools_are_created_replaced_updated_and_deleted_by_name():
    system = {"name": "system", "flavor_id": "g1-standard-4-8", "min_node_count": 1, "max_node_count": 3}
    other = {"name": "other", "flavor_id": "g1-standard-2-4", "min_node_count": 1, "max_node_count": 1}
    gone = {"name": "gone", "flavor_id": "g1-standard-2-4", "min_node_count": 1, "max_node_count": 1}
    old = [system, other, gone]
    new = [{**system, "max_node_count": 5}, {**other, "flavor_id": "g1-standard-8-16"}, {"name": "new", "flavor_id": "g1-standard-2-4",
                                                                                          "min_node_count": 1}]
    assert gcore.cluster_pool_changes(old, new) == {"create": ["new"], "replace": ["other"], "update": ["system"], "delete": ["gone"]}
    assert gcore.cluster_pool_changes(old, old) == {"create": [], "replace": [], "update": [], "delete": []}
    assert gcore.cluster_pool_changes(None, [system]) == {"create": ["system"], "replace": [], "update": [], "delete": []}
    assert gcore.cluster_pool_changes([system], None) == {"create": [], "replace": [], "update": [], "delete": ["system"]}


def test_cluster_changes_split_into_replace_upgrade_and_patch():
    old = {"name": "ml", "keypair": "k", "version": "v1.35.3", "cni": {"provider": "cilium"}, "logging": None}
    new = {**old, "keypair": "k2", "version": "v1.36.1", "autoscaler_config": {"scale-down-delay-after-add": "10m"}}
    assert gcore.cluster_change(old, new) == (["keypair"], ["version"], ["autoscaler_config"])
    assert gcore.cluster_change(old, dict(old)) == ([], [], [])


@pytest.mark.parametrize("old, new, problem", [
    ("v1.35.3", "v1.36.1", None), ("1.35", "1.35", None), ("v1.35.3", "v1.35.9", None),
    ("1.36", "1.35", "Gcore does not downgrade a cluster (1.36 to 1.35)"),
    ("v1.34.6", "v1.36.1", "Gcore upgrades a cluster one minor version at a time; go from v1.34.6 to 1.35 first"),
    ("1.36", "2.0", "Gcore upgrades a cluster one minor version at a time; go from 1.36 to 1.37 first"),
    ("1.36", "2.37", "Gcore upgrades a cluster one minor version at a time; go from 1.36 to 1.37 first"),
])
def test_upgrades_go_one_minor_up_at_a_time(old, new, problem):
    assert gcore.upgrade_problem(old, new) == problem


@pytest.mark.parametrize("running, low, high, target", [(0, 1, 3, 1), (1, 1, 3, None), (3, 1, 3, None), (4, 1, 3, 3), (2, 3, 5, 3)])
def test_a_pool_is_resized_only_past_its_new_bounds(running, low, high, target):
    assert gcore.resize_target(running, low, high) == target


def test_an_exceeded_quota_reads_requested_used_and_limit_per_quota_in_name_order():
    exceeded = {"gpu_count_limit": 8, "gpu_count_usage": 8, "gpu_count_requested": 8, "cpu_count_limit": 100, "cpu_count_usage": 90,
                "cpu_count_requested": 224}
    assert gcore.quota_problems(exceeded) == ["cpu_count: 224 requested, 90 in use, limit 100", "gpu_count: 8 requested, 8 in use, limit 8"]
    assert gcore.quota_problems({}) == []


# --------------------------------------------------------------------------------------------------------------------
# What a failed call prints


def test_an_error_answer_reads_class_message_and_request_in_that_order():
    body = {"exception_class": "QuotaExceeded", "message": "no GPUs left", "request_id": "r-1"}
    assert gcore.error_text(body) == "QuotaExceeded: no GPUs left (request r-1)"
    assert gcore.error_text({"message": "plain"}) == "plain"
    assert gcore.error_text({"exception_class": 3, "message": "m", "request_id": 4}) == "m"
    assert gcore.error_text({"detail": "x"}) == '{"detail":"x"}' and gcore.error_text([1, 2]) == "[1,2]"
    assert gcore.error_text(None) == "" and gcore.error_text("text") == "text" and gcore.error_text(b"") == "b''"


@pytest.mark.parametrize("status, header, retried", [(408, None, True), (409, None, True), (429, None, True), (500, None, True),
                                                     (503, None, True), (499, None, False), (404, None, False), (400, None, False),
                                                     (404, "true", True), (500, "false", False), (500, "maybe", True)])
def test_a_call_is_retried_as_the_sdk_retries_it(status, header, retried):
    assert gcore.retried(status, header) is retried


def test_each_failure_is_one_line_saying_what_happened():
    call, op = "POST /cloud/v2/k8s/clusters/1/76/ml/pools", "creating pool infer"
    assert gcore.api_error_line(op, call, [], timeout=30.0) == f"{op}: Gcore's API did not answer {call} within 30 s"
    assert gcore.api_error_line(op, call, [], timeout=30.0, attempts=5) == f"{op}: Gcore's API did not answer {call} within 30 s after 5 attempts"
    assert gcore.api_error_line(op, call, [], text="refused") == f"{op}: could not reach Gcore's API for {call}: refused"
    assert gcore.api_error_line(op, call, []) == f"{op}: could not reach Gcore's API for {call}"
    assert gcore.api_error_line(op, call, [], status=302, location="https://elsewhere") == (
        f"{op}: Gcore's API answered {call} with HTTP 302, a redirect to https://elsewhere, which gpupools does not follow (the API "
        f"key would go with it); check GCORE_BASE_URL")
    assert gcore.api_error_line(op, call, [], status=399, location="x").endswith("check GCORE_BASE_URL")
    assert gcore.api_error_line(op, call, [], status=400, location="x") == f"{op}: Gcore's API answered {call} with HTTP 400"
    assert gcore.api_error_line(op, call, [], status=301) == f"{op}: Gcore's API answered {call} with HTTP 301; check GCORE_BASE_URL"
    assert gcore.api_error_line(op, call, [], status=401, text="bad key") == f"{op}: Gcore's API answered {call} with HTTP 401: bad key; check GCORE_API_KEY"
    assert gcore.api_error_line(op, call, [], status=403).endswith("HTTP 403; check GCORE_API_KEY")
    assert gcore.api_error_line(op, call, [], status=500, attempts=5, text="oops") == f"{op}: Gcore's API answered {call} with HTTP 500 after 5 attempts: oops"
    assert gcore.api_error_line(op, call, [], status=404, attempts=1) == f"{op}: Gcore's API answered {call} with HTTP 404"


def test_the_key_never_comes_back_whatever_form_the_api_echoes_it_in():
    key = "1234$abcdefgh/ij+kl"
    forms = gcore.secret_forms(key)
    assert forms[0] == key.replace("/", "%2F").replace("$", "%24").replace("+", "%2B") and "abcdefgh/ij+kl" in forms
    assert forms == sorted(forms, key=len, reverse=True) and gcore.secret_forms(None) == [] and gcore.secret_forms("") == []
    assert "abcdefgh" not in " ".join(gcore.secret_forms("short-key"))
    text = f"\x1b[31mdenied\x1b[0m for {key[:5]}\u200b{key[5:]} and APIKey other-secret; done"
    assert gcore.clean_text(text, forms) == "denied for [redacted] and APIKey [redacted]; done"
    assert gcore.clean_text("x" * 400, []) == "x" * 299 + "…" and gcore.clean_text("x" * 300, []) == "x" * 300
    assert gcore.clean_text("a\n\tb   c", []) == "a b c"


# --------------------------------------------------------------------------------------------------------------------
# What a stack may not ask of Gcore: one line naming the field


def gcore_problems(pools=None, **keys) -> list[str]:
    return [f"{p.path}: {p.message}" for p in config_problems(stack_config("gcore", pools=pools, **keys))]


def pool(**fields) -> dict:
    return {"name": "infer", "instanceType": VM, "minNodes": 1, "maxNodes": 3, **fields}


@pytest.mark.parametrize("size, ok", [(9, False), (10, True), (2000, True), (2001, False)])
def test_a_boot_volume_is_10_to_2000_gib(size, ok):
    # The stack's own floor is 20 GiB; Gcore's bounds are checked where a pool reaches them.
    from gpupools.stack.config import Pool

    sized = Pool(name="infer", instanceType=VM, minNodes=1, maxNodes=3).model_copy(update={"disk_size_gb": size})
    found = [f"{p.path}: {p.message}" for p in gcore.pool_problems(sized, "pools[0]")]
    assert found == ([] if ok else [f"pools[0].diskSizeGb: {size}: a Gcore boot volume is 10-2000 GiB"])
    if size >= 20:
        config = stack_config("gcore", pools=[pool(diskSizeGb=size)])
        if ok:
            validate_stack(config)
        else:
            assert gcore_problems([pool(diskSizeGb=size)]) == found


@pytest.mark.parametrize("fields, path, starts", [
    ({"minNodes": 0}, "pools[0].minNodes", "0: a Gcore pool keeps at least 1 node"),
    ({"spot": True}, "pools[0].spot", "not a pool setting on gcore"),
    ({"name": "a"}, "pools[0].name", "'a' cannot name a Gcore pool"),
    ({"name": "a" * 21}, "pools[0].name", f"'{'a' * 21}' cannot name a Gcore pool"),
    ({"instanceType": METAL, "placement": "affinity"}, "pools[0].placement", f"{METAL} is a bare-metal flavor, which takes no server-group policy"),
    ({"instanceType": METAL, "diskSizeGb": 100}, "pools[0].diskSizeGb", f"{METAL} is a bare-metal flavor, which boots from its own disks"),
    ({"zones": ["a"]}, "pools[0].zones", "not available on gcore"),
    ({"capacity": ["spot"]}, "pools[0].capacity[0]", "spot is not a capacity kind of Gcore pools"),
    ({"upgrades": {"kind": "training", "maxUnavailable": 1}}, "pools[0].upgrades.maxUnavailable", "not available on gcore: Gcore's API takes no surge"),
])
def test_what_a_gcore_pool_cannot_be_is_one_line(fields, path, starts):
    found = gcore_problems([pool(**fields)])
    assert any(p.startswith(f"{path}: {starts}") for p in found), found


def test_names_at_gcores_limits_and_on_demand_capacity_pass():
    validate_stack(stack_config("gcore", pools=[pool(name="ab"), pool(name="a" * 20, capacity=["on-demand"])]))
    validate_stack(stack_config("gcore", pools=[pool(name="b1", placement="anti-affinity", diskSizeGb=100)]))


@pytest.mark.parametrize("cluster, path, starts", [
    ({"name": "ml-cluster-name-too-long", "keypair": "ml-admins"}, "cluster.name", "'ml-cluster-name-too-long' cannot name a Gcore cluster"),
    ({"name": "ml"}, "cluster.keypair", "required on gcore for a new cluster"),
    ({"name": "ml", "keypair": "ml-admins", "endpointAccess": "private"}, "cluster.endpointAccess", "not available on gcore"),
    ({"name": "ml", "keypair": "ml-admins", "authorizedCidrs": ["203.0.113.0/24"]}, "cluster.authorizedCidrs", "not available on gcore"),
])
def test_what_a_gcore_cluster_cannot_be_is_one_line(cluster, path, starts):
    found = gcore_problems(cluster=cluster)
    assert any(p.startswith(f"{path}: {starts}") for p in found), found


def test_an_existing_cluster_needs_no_keypair_and_takes_no_exclusions():
    validate_stack(stack_config("gcore", cluster={"name": "ml", "create": False}))
    found = gcore_problems(upgrades={"exclusions": [{"name": "x", "start": "2026-12-15", "end": "2026-12-20", "scope": "no-upgrades"}]})
    assert found == ["upgrades.exclusions: not available on gcore: Gcore upgrades a cluster only when its version changes "
                     "(cluster.kubernetesVersion), so there is nothing to exclude; remove exclusions"]


# --------------------------------------------------------------------------------------------------------------------
# What the plan says


def test_the_plan_notes_gcores_own_device_plugin_on_bare_metal_pools_only():
    from gpupools.stack.config import Pool

    metal = Pool(name="train", instanceType=METAL, minNodes=1, maxNodes=2)
    vm = Pool(name="infer", instanceType=VM, minNodes=1, maxNodes=2)
    assert gcore.plan_notes([vm]) == []
    (note,) = gcore.plan_notes([metal, vm, metal.model_copy(update={"name": "train2"})])
    assert "kube-system/nvidia-device-plugin-daemonset" in note and "on train, train2:" in note


def test_an_existing_cluster_without_cilium_is_a_finding():
    assert gcore.existing_cluster_findings("ml", {"cni": {"provider": "cilium"}}) == []
    for read in ({"cni": {"provider": "calico"}}, {"cni": None}, {}):
        assert gcore.existing_cluster_findings("ml", read) == ["existing Gcore cluster 'ml' does not run Cilium: NetworkPolicy may not be enforced"]


def test_repair_follows_auto_healing_and_capacity_is_the_flavor():
    vm, metal = plan_of(), plan_of(name="train", instanceType=METAL)
    assert gcore.repair_facts(vm, "")[1] == "Gcore auto-healing drains and replaces a node whose node conditions turn unhealthy"
    assert gcore.repair_facts(metal, "")[1].startswith("nothing: auto-healing is off on this pool")
    assert gcore.capacity_lines(metal.pool, "") == [f"on-demand: flavor {METAL}"]
    assert gcore.max_nodes(vm.pool, None, None) == (200, "per Gcore pool")
    # No fabric on Managed Kubernetes: a multi-node pod gets nothing beside its GPUs.
    assert gcore.fabric_pod(2, "train", "infiniband", 8) == {"limits": {}, "env": {}, "capabilities": []}
    assert gcore.fabric_refusal(metal.pool, None) == gcore.FABRIC_OFFERED and gcore.fabric_readiness(None, metal) == (False, (gcore.FABRIC_OFFERED,))
    template = gcore.node_template(metal)
    assert template.labels == {**metal.labels, "node.kubernetes.io/instance-type": METAL} and template.taints == metal.taints

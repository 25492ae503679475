"""Mixed MIG layouts: different MIG profiles on different GPUs of one node (sharing.migLayout)."""

from __future__ import annotations

import copy

import pytest
import yaml

from gpupools.core.catalog import load_catalog
from gpupools.core.miglayout import group_problems, layout_config_name, mig_parted_entries, profile_slices, slice_budget
from gpupools.pools.planning import plan_pools
from gpupools.pools.software import software_plan
from gpupools.queues.kueue import resource_groups
from gpupools.queues.teams import plan_teams, quota_ratios
from gpupools.stack.config import MigGroup
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

from conftest import needs_reference, stack_config

B200 = "p6-b200.48xlarge"
LAYOUT = [{"gpus": 4, "profiles": {"1g.23gb": 7}}, {"gpus": 2, "profiles": {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}}, {"gpus": 2}]


def layout_stack(layout=None, instance_type=B200, region="us-east-1", **keys):
    sharing = {"mode": "mig", "migLayout": copy.deepcopy(LAYOUT if layout is None else layout)}
    config = stack_config("aws", pools=[{"name": "mixed", "instanceType": instance_type, "maxNodes": 2, "sharing": sharing}], **keys)
    config["aws:region"] = region
    return config


def error_of(config) -> str:
    with pytest.raises(ConfigError) as exc:
        validate_stack(config)
    return str(exc.value)


# --------------------------------------------------------------------------------------------------------------------
# The slice budget, held to NVIDIA's tables


def test_slice_budget_gives_nvidias_instance_counts():
    """For every MIG GPU of the catalog, the compute and memory slices derived from the profile names give exactly the
    instance count NVIDIA lists for each profile used alone (mig-parted's table and the operator's default config)."""
    table = yaml.safe_load((needs_reference() / "mig-parted" / "gpu-mig-profiles.yaml").read_text())["gpus"]
    checked = 0
    for gpu in load_catalog().gpus.values():
        if not gpu.mig_profiles:
            continue
        compute, memory = slice_budget(gpu)
        assert compute == table[gpu.name]["max_gpu_instances"], gpu.name
        for row in table[gpu.name]["profiles"]:
            if "+" in row["profile"]:
                continue  # media-extension and graphics variants: one set of engines, not slices, bounds them
            c, m = profile_slices(gpu, row["profile"])
            assert min(compute // c, memory // m) == row["max_instances"], (gpu.name, row["profile"])
            checked += 1
    assert checked >= 40


def test_slice_budgets_per_gpu():
    gpus = load_catalog().gpus
    assert slice_budget(gpus["A100-40GB"]) == (7, 8)
    assert slice_budget(gpus["B200-180GB"]) == (7, 8)
    assert slice_budget(gpus["RTX-PRO-6000-96GB"]) == (4, 4)
    assert profile_slices(gpus["B200-180GB"], "3g.90gb") == (3, 4)
    assert profile_slices(gpus["H200-141GB"], "1g.35gb") == (1, 2)


# Layouts awslabs/ai-on-eks ships in infra/base/terraform/helm-values/nvidia-gpu-operator.yaml (@886fe01b), per group.
VALID_AI_ON_EKS = [
    ("A100-40GB", {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),  # p4d-half-balanced
    ("A100-40GB", {"1g.5gb": 4, "2g.10gb": 1}),  # p4d-mixed-workload, GPUs 0-1
    ("A100-40GB", {"3g.20gb": 1, "1g.5gb": 2}),  # p4d-mixed-workload, GPUs 2-3
    ("A100-80GB", {"3g.40gb": 1, "2g.20gb": 1}),  # p4de-training-optimized
    ("H100-80GB", {"1g.10gb": 4, "2g.20gb": 1}),  # p5-inference-optimized
    ("B200-180GB", {"1g.23gb": 1, "2g.45gb": 1, "4g.90gb": 1}),  # p6-b200-half-balanced
    ("B200-180GB", {"1g.23gb": 7}),  # p6-b200-all-small
]


@pytest.mark.parametrize("gpu, profiles", VALID_AI_ON_EKS)
def test_layouts_that_fit_one_gpu(gpu, profiles):
    assert group_problems(load_catalog().gpus[gpu], profiles, "p") == []


@pytest.mark.parametrize("gpu, profiles, words", [
    # ai-on-eks p4de-mixed-workload, GPUs 0-1: 3 + 2 + 3 compute slices on a 7-slice GPU
    ("A100-80GB", {"1g.10gb": 3, "2g.20gb": 1, "3g.40gb": 1}, "take 8 compute slices; one A100-80GB GPU has 7"),
    # ai-on-eks p6-b200-inference-optimized: B200's two-slice profile is 2g.45gb
    ("B200-180GB", {"1g.23gb": 5, "2g.40gb": 1}, "'2g.40gb' is not a MIG profile of B200-180GB"),
    # within the compute slices, over the memory slices: 4 + 4 + 1 of 8
    ("A100-40GB", {"3g.20gb": 2, "1g.5gb": 1}, "take 9 memory slices; one A100-40GB GPU has 8"),
    ("H200-141GB", {"3g.71gb": 3}, "3g.71gb x 3: at most 2 fit on one H200-141GB GPU"),
    ("B200-180GB", {"1g.23gb+me": 1, "1g.23gb": 6}, ""),  # one +me instance is fine
    ("RTX-PRO-6000-96GB", {"2g.48gb": 1, "1g.24gb": 3}, "take 5 compute slices; one RTX-PRO-6000-96GB GPU has 4"),
])
def test_layouts_that_do_not_fit_one_gpu(gpu, profiles, words):
    problems = group_problems(load_catalog().gpus[gpu], profiles, "pools[0].sharing.migLayout[0].profiles")
    if not words:
        assert problems == []
        return
    (problem,) = problems
    assert problem.path == "pools[0].sharing.migLayout[0].profiles"
    assert words in problem.message


def test_at_most_one_media_extension_instance_per_gpu():
    rtx = load_catalog().gpus["RTX-PRO-6000-96GB"]
    assert group_problems(rtx, {"1g.24gb+me": 1, "1g.24gb-me": 3}, "p") == []
    (problem,) = group_problems(load_catalog().gpus["H100-80GB"], {"1g.10gb+me": 1, "2g.20gb": 1, "1g.10gb": 1}, "p") or [None]
    assert problem is None  # one +me beside plain profiles
    gb = load_catalog().gpus["B300-269GB"]
    assert group_problems(gb, {"1g.34gb+me": 1}, "p") == []
    # The catalog offers one +me profile per GPU, so two +me instances are refused by that profile's count first.
    (problem,) = group_problems(gb, {"1g.34gb+me": 2}, "p")
    assert "at most 1" in problem.message


# --------------------------------------------------------------------------------------------------------------------
# A stack with a layout


def test_layout_plans_one_config_and_several_resources():
    stack = validate_stack(layout_stack())
    (plan,) = plan_pools(stack)
    m = plan.mechanism
    assert m.mig_config == layout_config_name([MigGroup(**g) for g in LAYOUT])
    assert plan.labels["nvidia.com/mig.config"] == m.mig_config
    assert plan.node_resources == {"nvidia.com/mig-1g.23gb": 32, "nvidia.com/mig-2g.45gb": 2, "nvidia.com/mig-3g.90gb": 2, "nvidia.com/gpu": 2}
    assert plan.advertised_resources["nvidia.com/gpu"] == 2
    assert (plan.mechanism.resource, plan.units_per_node, plan.max_units) == ("nvidia.com/mig-1g.23gb", 32, 76)
    assert plan.price_per_unit == pytest.approx(plan.hardware.price_per_node / 38)  # per MIG instance or whole GPU
    assert list(m.mig_entries) == [
        {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"1g.23gb": 7}},
        {"devices": [4, 5], "mig-enabled": True, "mig-devices": {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}},
        {"devices": [6, 7], "mig-enabled": False},
    ]
    assert "4 GPUs 1g.23gb x 7, 2 GPUs 1g.23gb x 2 + 2g.45gb x 1 + 3g.90gb x 1, 2 GPUs MIG off" in m.description


def test_layout_name_follows_its_content():
    one = [MigGroup(gpus=4, profiles={"1g.23gb": 7}), MigGroup(gpus=4)]
    assert layout_config_name(one) == layout_config_name([MigGroup(gpus=4, profiles={"1g.23gb": 7}), MigGroup(gpus=4, profiles={})])
    assert layout_config_name(one) != layout_config_name([MigGroup(gpus=4), MigGroup(gpus=4, profiles={"1g.23gb": 7})])
    assert mig_parted_entries(one)[1] == {"devices": [4, 5, 6, 7], "mig-enabled": False}


def test_single_strategy_takes_one_profile_on_every_gpu():
    layout = [{"gpus": 4, "profiles": {"1g.23gb": 7}}, {"gpus": 4, "profiles": {"1g.23gb": 3}}]
    (plan,) = plan_pools(validate_stack(layout_stack(layout, gpuSoftware={"migStrategy": "single"})))
    assert plan.node_resources == {"nvidia.com/gpu": 40}
    message = error_of(layout_stack(gpuSoftware={"migStrategy": "single"}))
    assert "pools[0].sharing.migLayout: MIG off on some GPUs or more than one profile on a node needs gpuSoftware.migStrategy: mixed" in message


def test_custom_config_holds_every_layout_a_pool_names():
    """The operator's MIG manager reads only the custom config once one is named, so the single-profile pool's layout
    and all-disabled are in it beside the mixed one."""
    config = layout_stack()
    config["gpupools:pools"].append({"name": "slices", "instanceType": "p4de.24xlarge", "maxNodes": 1, "sharing": {"mode": "mig", "migProfile": "3g.40gb"}})
    config["gpupools:pools"].append({"name": "whole", "instanceType": "p5.48xlarge", "maxNodes": 1})
    stack = validate_stack(config)
    plans = plan_pools(stack)
    values = software_plan(stack, plans).releases[0].values["migManager"]["config"]
    doc = yaml.safe_load(values["data"]["config.yaml"])
    assert set(doc["mig-configs"]) == {"all-disabled", "all-3g.40gb", plans[0].mechanism.mig_config}
    assert {p.labels["nvidia.com/mig.config"] for p in plans} <= set(doc["mig-configs"])
    assert doc["mig-configs"]["all-3g.40gb"] == [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]


def test_an_operator_layout_in_a_custom_config_keeps_its_count_per_gpu_model():
    """`all-1g.10gb` is 4 instances on an A100-40GB and 7 on an H100: in a custom config it keeps the operator's
    entries per GPU model (device-filter), so the A100-40GB pool beside an H100 pool is cut as its plan counts."""
    config = layout_stack()
    config["gpupools:pools"] += [{"name": "a100", "instanceType": "p4d.24xlarge", "maxNodes": 1, "sharing": {"mode": "mig", "migProfile": "1g.10gb"}},
                                 {"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 1, "sharing": {"mode": "mig", "migProfile": "1g.10gb"}}]
    stack = validate_stack(config)
    plans = {p.name: p for p in plan_pools(stack)}
    doc = yaml.safe_load(software_plan(stack, list(plans.values())).releases[0].values["migManager"]["config"]["data"]["config.yaml"])
    entries = doc["mig-configs"]["all-1g.10gb"]
    by_filter = {tuple(e["device-filter"]): e["mig-devices"]["1g.10gb"] for e in entries}
    a100_40gb, h100 = "0x20B010DE", "0x233010DE"  # PCI device IDs of A100-SXM4-40GB and H100-SXM5-80GB
    assert [count for ids, count in by_filter.items() if a100_40gb in ids] == [4] and [c for ids, c in by_filter.items() if h100 in ids] == [7]
    assert plans["a100"].node_resources == {"nvidia.com/mig-1g.10gb": 32} and plans["h100"].node_resources == {"nvidia.com/mig-1g.10gb": 56}


def test_single_profile_layouts_outside_the_operator_s_mean_one_count_on_every_gpu():
    """A layout name gpupools writes itself (`all-<profile>` the operator lacks) has no device filter, so no two GPU
    models of the catalog may give one profile name different counts."""
    from gpupools.core.sharing import OPERATOR_DEFAULT_MIG_CONFIGS

    counts: dict[str, set[int]] = {}
    for gpu in load_catalog().gpus.values():
        for profile, count in (gpu.mig_profiles or {}).items():
            if f"all-{profile.replace('+', '.')}" not in OPERATOR_DEFAULT_MIG_CONFIGS:
                counts.setdefault(profile, set()).add(count)
    assert {p: c for p, c in counts.items() if len(c) > 1} == {}  # today every catalog profile is one of the operator's layouts


def test_the_packaged_operator_config_is_the_pinned_one():
    from importlib import resources

    from conftest import ROOT

    packaged = resources.files("gpupools.core").joinpath("mig-parted-default.yaml").read_text()
    assert packaged == (ROOT / "tests" / "reference" / "gpu-operator" / "default-mig-parted-config.yaml").read_text()


@pytest.mark.parametrize("change, path, words", [
    (lambda c: c["gpupools:pools"][0]["sharing"]["migLayout"].pop(), "pools[0].sharing.migLayout",
     "the groups hold 6 GPUs; p6-b200.48xlarge has 8 per node"),
    (lambda c: c["gpupools:pools"][0]["sharing"]["migLayout"][1]["profiles"].update({"4g.90gb": 1}), "pools[0].sharing.migLayout[1].profiles",
     "take 11 compute slices; one B200-180GB GPU has 7"),
    (lambda c: c["gpupools:pools"][0]["sharing"]["migLayout"][0]["profiles"].update({"1g.40gb": 1}), "pools[0].sharing.migLayout[0].profiles",
     "'1g.40gb' is not a MIG profile of B200-180GB"),
    (lambda c: c["gpupools:pools"][0]["sharing"].update({"migLayout": [{"gpus": 8}]}), "pools[0].sharing.migLayout",
     "no group has MIG profiles; for whole GPUs use mode 'none'"),
    (lambda c: c["gpupools:pools"][0]["sharing"].update({"migProfile": "1g.23gb"}), "pools[0].sharing.migLayout",
     "applies to mode 'mig' without migProfile"),
    (lambda c: c["gpupools:pools"][0]["sharing"].update({"mode": "none"}), "pools[0].sharing.migLayout", "applies to mode 'mig'"),
    (lambda c: c["gpupools:pools"][0].update({"os": "bottlerocket", "instanceType": "p4d.24xlarge",
                                              "sharing": {"mode": "mig", "migLayout": [{"gpus": 8, "profiles": {"3g.20gb": 2}}]}}),
     "pools[0].sharing.migLayout", "use os: al2023 for a layout"),
    (lambda c: c["gpupools:pools"][0].update({"os": "bottlerocket"}), "pools[0].sharing.mode", "Bottlerocket's MIG settings do not cover B200"),
    (lambda c: c.update({"gpupools:gpuSoftware": {"installer": "device-plugin"}}), "pools[0].sharing.mode",
     "set gpuSoftware.installer to gpu-operator"),
    (lambda c: c["gpupools:pools"][0]["sharing"]["migLayout"][0].update({"gpus": 0}), "pools[0].sharing.migLayout[0].gpus", ""),
    (lambda c: c["gpupools:pools"][0]["sharing"]["migLayout"][0]["profiles"].update({"1g.23gb": 0}), "pools[0].sharing.migLayout[0].profiles", ""),
])
def test_bad_layouts_are_one_line_naming_the_field(change, path, words):
    config = layout_stack()
    change(config)
    message = error_of(config)
    lines = [line for line in message.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, message
    assert lines[0].startswith(f"error: {path}"), message
    assert words in lines[0]


def test_a_layout_on_a_gpu_without_mig_is_refused_on_the_mode():
    message = error_of(layout_stack([{"gpus": 1, "profiles": {"1g.5gb": 7}}], instance_type="g6e.xlarge"))
    assert "pools[0].sharing.mode: 'mig' is not possible on g6e.xlarge" in message


def test_gke_own_mig_takes_no_layout():
    config = stack_config("gcp", pools=[{"name": "b", "instanceType": "a4-highgpu-8g", "maxNodes": 1, "zones": ["us-central1-b"],
                                         "sharing": {"mode": "mig", "migLayout": [{"gpus": 8, "profiles": {"3g.90gb": 2}}]}}])
    config["gcp:region"] = "us-central1"
    assert "pools[0].sharing.migLayout: GKE's own GPU software (installer 'cloud') splits every GPU of a node alike" in error_of(config)
    config["gpupools:gpuSoftware"] = {"installer": "gpu-operator"}
    config["gpupools:pools"][0]["minNodes"] = 1  # GKE's autoscaler pictures no MIG resource on a new node
    (plan,) = plan_pools(validate_stack(config))
    assert plan.node_resources == {"nvidia.com/mig-3g.90gb": 16}


# --------------------------------------------------------------------------------------------------------------------
# Teams on a pool of several resources


def test_kueue_gives_every_resource_of_the_layout_in_one_group():
    config = layout_stack(teams=[{"name": "research", "gpus": {"mixed": 38, "whole": 8}}])
    config["gpupools:pools"].append({"name": "whole", "instanceType": B200, "maxNodes": 1})
    stack = validate_stack(config)
    plans = plan_pools(stack)
    (team,) = plan_teams(stack, plans)
    (group,) = resource_groups(team)  # the layout's whole GPUs join nvidia.com/gpu of the other pool
    assert group["coveredResources"] == sorted(plans[0].node_resources)
    flavors = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    assert flavors["mixed"] == {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.23gb": 32, "nvidia.com/mig-2g.45gb": 2, "nvidia.com/mig-3g.90gb": 2}
    assert flavors["whole"] == {"nvidia.com/gpu": 8, "nvidia.com/mig-1g.23gb": 0, "nvidia.com/mig-2g.45gb": 0, "nvidia.com/mig-3g.90gb": 0}
    assert all(len(f["resources"]) == len(group["coveredResources"]) for f in group["flavors"])  # the CRD's rule
    assert quota_ratios(stack, plans)["nvidia.com/gpu"] == (10, 2 * 2 + 8)


def test_a_teams_units_on_a_layout_are_split_by_what_a_node_offers():
    config = layout_stack(teams=[{"name": "research", "gpus": {"mixed": 19}}])
    stack = validate_stack(config)
    (team,) = plan_teams(stack, plan_pools(stack))
    shares = {r: team.units_of(r) for r in team.resources}
    assert sum(shares.values()) == 19
    assert shares == {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.23gb": 16, "nvidia.com/mig-2g.45gb": 1, "nvidia.com/mig-3g.90gb": 1}


# --------------------------------------------------------------------------------------------------------------------
# The policy pack reads the layout back from the planned resources


def _policy_plan():
    from gpupools.cli.planrun import run_program

    config = layout_stack(teams=[{"name": "research", "gpus": {"mixed": 30}}], quotas="kueue", budget={"maxMonthlyUsd": 300000})
    config["gpupools:cluster"] = {"name": "ml-mixed", "kubernetesVersion": "1.36", "authorizedCidrs": ["203.0.113.0/24"]}
    config["gpupools:pools"][0]["zones"] = ["us-east-1a"]
    return run_program(config, "mixed")


def _resource(plan, typ: str, name: str | None = None):
    return next(r for r in plan.resources if r.type == typ and (name is None or r.name == name))


def _operator_layouts(plan) -> tuple[dict, dict]:
    values = _resource(plan, "kubernetes:helm.sh/v3:Release", "gpu-operator").inputs["values"]["migManager"]["config"]["data"]
    return values, yaml.safe_load(values["config.yaml"])


def _set_layouts(plan, doc) -> None:
    values, _ = _operator_layouts(plan)
    values["config.yaml"] = yaml.safe_dump(doc)


def _overfull(plan):
    _, doc = _operator_layouts(plan)
    name = next(n for n in doc["mig-configs"] if n.startswith("layout-"))
    doc["mig-configs"][name][1]["mig-devices"]["4g.90gb"] = 1
    _set_layouts(plan, doc)


def _outside_the_node(plan):
    _, doc = _operator_layouts(plan)
    name = next(n for n in doc["mig-configs"] if n.startswith("layout-"))
    doc["mig-configs"][name][2]["devices"] = [6, 7, 8]
    _set_layouts(plan, doc)


def _unknown_layout(plan):
    pool = _resource(plan, "kubernetes:karpenter.sh/v1:NodePool", "nodepool-gpupools-mixed")
    pool.inputs["spec"]["template"]["metadata"]["labels"]["nvidia.com/mig.config"] = "all-1g.23gb"


def _quota_the_pool_lacks(plan):
    queue = _resource(plan, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")
    group = queue.inputs["spec"]["resourceGroups"][0]
    group["coveredResources"].append("nvidia.com/mig-7g.180gb")
    for flavor in group["flavors"]:
        flavor["resources"].append({"name": "nvidia.com/mig-7g.180gb", "nominalQuota": 2})


@pytest.mark.parametrize("change, policy, words", [
    (_overfull, "gpu-sharing-sane", "take 11 compute slices; one B200-180GB GPU has 7"),
    (_outside_the_node, "gpu-sharing-sane", "names GPUs [6, 7, 8]; the node has GPUs 0 to 7"),
    # the pool then reads as 1g.23gb slices only, so the queue's other MIG quotas no longer match it either
    (_unknown_layout, "gpu-sharing-sane kueue-flavors-match-pools", "'all-1g.23gb' is not in the GPU Operator's custom MIG config"),
    (_quota_the_pool_lacks, "kueue-flavors-match-pools", "gives nvidia.com/mig-7g.180gb on flavor mixed"),
])
def test_policies_read_the_layout_and_refuse_what_does_not_fit(change, policy, words):
    from gpupools.cli.policycheck import run_policies

    plan = _policy_plan()
    assert not run_policies(plan).mandatory
    change(plan)
    found = run_policies(plan).mandatory
    assert {v.policy for v in found} == set(policy.split())
    assert any(words in v.message for v in found), [v.message for v in found]


def test_plan_json_names_every_resource_of_a_layout():
    from gpupools.deploy.platform import pool_capacity

    (plan,) = plan_pools(validate_stack(layout_stack()))
    got = pool_capacity(plan)
    assert got["resources"] == plan.node_resources and sum(got["resources"].values()) * 2 == got["maxSchedulable"]
    (whole,) = plan_pools(validate_stack(layout_stack([{"gpus": 8, "profiles": {"7g.180gb": 1}}])))
    assert pool_capacity(whole)["resources"] == {"nvidia.com/mig-7g.180gb": 8}


def test_reserved_flavor_quota_is_bounded_per_resource_by_what_the_reserved_nodes_offer():
    """An over-promised team on a reserved layout pool: the reserved flavor gets no more of each resource than the
    reserved node offers of it (2 whole GPUs, not 32 slices' worth)."""
    from gpupools.queues.kueue import pool_flavors

    config = layout_stack(teams=[{"name": "research", "gpus": {"mixed": 152}}])
    config["gpupools:pools"][0].update({"zones": ["us-east-1a"], "capacity": [
        {"reservation": {"id": "cr-0123456789abcdef0", "kind": "odcr", "zones": ["us-east-1a"], "nodes": 1}}, "on-demand"]})
    stack = validate_stack(config)
    (plan,) = plan_pools(stack)
    (team,) = plan_teams(stack, [plan])
    flavors = pool_flavors(stack, plan, "karpenter")
    assert len(flavors) == 2
    (group,) = resource_groups(team, {plan.name: flavors})
    quota = {(f["name"], r["name"]): r["nominalQuota"] for f in group["flavors"] for r in f["resources"]}
    reserved = flavors[0].name
    assert quota[(reserved, "nvidia.com/gpu")] == 2 and quota[(reserved, "nvidia.com/mig-1g.23gb")] == 32
    assert sum(v for (f, r), v in quota.items() if r == "nvidia.com/gpu") == team.nominal_of(plan, "nvidia.com/gpu") == 8


def test_a_layout_edit_moves_the_pools_label_and_the_operators_config_only():
    """Editing a layout names another config (its name follows its content): the agent pool changes only in its node
    labels, which AKS updates in place, and the MIG manager applies the new config when the label moves."""
    from conftest import POOL_RESOURCE, plan_of

    def planned(layout):
        pools = [{"name": "mixed", "instanceType": "Standard_NC96ads_A100_v4", "minNodes": 1, "maxNodes": 2,
                  "sharing": {"mode": "mig", "migLayout": layout}}]
        plan = plan_of(stack_config("azure", pools=pools))
        pool = copy.deepcopy(plan.get(POOL_RESOURCE["azure"], "mixed").inputs)
        labels = pool.pop("nodeLabels")
        release = next(r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "gpu-operator")
        return pool, labels, release.inputs["values"]["migManager"]["config"]["data"]["config.yaml"]

    before = planned([{"gpus": 2, "profiles": {"3g.40gb": 2}}, {"gpus": 2}])
    after = planned([{"gpus": 2, "profiles": {"1g.10gb": 7}}, {"gpus": 2}])
    assert before[0] == after[0]
    assert before[1]["nvidia.com/mig.config"] != after[1]["nvidia.com/mig.config"]
    assert after[1]["nvidia.com/mig.config"] in yaml.safe_load(after[2])["mig-configs"]


def test_a_layout_that_cannot_wake_from_zero_is_told_to_keep_a_node():
    """The AKS autoscaler pictures no MIG resource on a new node; a layout of several profiles cannot switch to the
    single strategy, so the one way out named is a node kept running."""
    pools = [{"name": "mixed", "instanceType": "Standard_NC96ads_A100_v4", "maxNodes": 2,
              "sharing": {"mode": "mig", "migLayout": [{"gpus": 2, "profiles": {"3g.40gb": 2}}, {"gpus": 2}]}}]
    message = error_of(stack_config("azure", pools=pools))
    assert "pools[0].minNodes: 0 would leave pool 'mixed' stuck at zero nodes" in message
    assert message.rstrip().endswith("set minNodes: 1 or more (a layout of several profiles, or with MIG off on some GPUs, needs the mixed strategy)")
    pools[0]["sharing"]["migLayout"] = [{"gpus": 4, "profiles": {"3g.40gb": 2}}]
    assert "set gpuSoftware.migStrategy: single" in error_of(stack_config("azure", pools=pools))

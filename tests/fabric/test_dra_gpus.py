"""GPU allocation through NVIDIA's DRA driver, the preview sharing mode `dra`: its keys and refusals (one line, exit 2),
the chart's values rendered by helm (and the chart's own refusal without the override), the GPU Operator kept off the
pools' nodes, Kueue's deviceClassMappings and the landing check following the claim, the ResourceClaimTemplate and Job
`gpupools workload` prints (validated against resource.k8s.io/v1 and batch/v1), and "preview" on every plan line the
mode touches, nothing changed for stacks without it."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import yaml
from typer.testing import CliRunner

from charts.chartrender import RenderError, kind_of, render, stack_releases
from conftest import config_problems, stack_config, write_stack
from gpupools.cli.main import app
from gpupools.core.pools import POOL_LABEL
from gpupools.core.sharing import DEPLOY_DEVICE_PLUGIN_LABEL, DRA_GPU_RESOURCE, DRA_MIG_RESOURCE, MIG_CONFIG_LABEL
from gpupools.fabric import computedomain as cd
from gpupools.fabric import dragpu
from gpupools.landing.check import cluster_of, land
from gpupools.pools.planning import plan_pools
from gpupools.pools.software import gpu_operator_values
from gpupools.queues import kueue
from gpupools.validation.stack import validate_stack

POOLS = [{"name": "whole", "instanceType": "p4d.24xlarge", "minNodes": 1, "maxNodes": 2, "sharing": {"mode": "dra"}},
         {"name": "slices", "instanceType": "p4de.24xlarge", "minNodes": 1, "maxNodes": 2,
          "sharing": {"mode": "dra", "migProfile": "3g.40gb", "preview": True, "draFeatures": ["time-slicing"]}}]
TEAMS = [{"name": "ml", "gpus": {"whole": 8, "slices": 8}}]
KEYS = {"gpuSoftware": {"installer": "gpu-operator"}, "autoscaler": "cluster-autoscaler"}
CONFIG = stack_config("aws", pools=POOLS, teams=TEAMS, **KEYS)
PLAIN = stack_config("aws", pools=[{**POOLS[0], "sharing": {"mode": "none"}}], teams=[{"name": "ml", "gpus": {"whole": 8}}], **KEYS)


@pytest.fixture(scope="module")
def dra():
    stack = validate_stack(CONFIG)
    return stack, plan_pools(stack)


@pytest.fixture(scope="module")
def plain():
    stack = validate_stack(PLAIN)
    return stack, plan_pools(stack)


def _paths(config: dict) -> list[str]:
    return [p.path for p in config_problems(config)]


# --------------------------------------------------------------------------------------------------------------------
# Keys and refusals


def test_sharing_features_need_the_preview_flag():
    features = {"mode": "dra", "draFeatures": ["dynamic-mig"]}
    assert _paths(stack_config("aws", pools=[{**POOLS[0], "sharing": features}], **KEYS)) == ["pools[0].sharing.draFeatures"]
    validate_stack(stack_config("aws", pools=[{**POOLS[0], "sharing": {**features, "preview": True}}], **KEYS))


def test_dra_keys_belong_to_mode_dra_only():
    assert _paths(stack_config("aws", pools=[{**POOLS[0], "sharing": {"mode": "none", "preview": True}}], **KEYS)) == ["pools[0].sharing.preview"]
    assert _paths(stack_config("aws", pools=[{**POOLS[1], "sharing": {"mode": "mig", "migProfile": "3g.40gb", "draFeatures": ["mps"]}}],
                               **KEYS)) == ["pools[0].sharing.draFeatures"]


def test_a_static_mig_layout_needs_the_operator_and_excludes_dynamic_mig():
    both = {"mode": "dra", "migProfile": "3g.40gb", "preview": True, "draFeatures": ["dynamic-mig"]}
    assert _paths(stack_config("aws", pools=[{**POOLS[1], "sharing": both}], **KEYS)) == ["pools[0].sharing.migProfile"]
    plugin = {**KEYS, "gpuSoftware": {"installer": "device-plugin"}}
    assert _paths(stack_config("aws", pools=[{**POOLS[1], "sharing": {"mode": "dra", "migProfile": "3g.40gb"}}], **plugin)) == [
        "pools[0].sharing.migProfile"]


def test_gkes_own_device_plugin_and_bottlerocket_are_refused():
    gke = stack_config("gcp", pools=[{"name": "g", "instanceType": "a2-highgpu-1g", "minNodes": 1, "maxNodes": 1, "sharing": {"mode": "dra"}}])
    (problem,) = config_problems(gke)
    assert problem.path == "pools[0].sharing.mode" and "installer 'cloud'" in problem.message and "gpu-operator" in problem.message
    gke_operator = {**gke, "gpupools:gpuSoftware": {"installer": "gpu-operator"}}
    assert validate_stack(gke_operator).pools[0].sharing.mode == "dra"
    rocket = stack_config("aws", pools=[{**POOLS[0], "os": "bottlerocket"}], **KEYS)
    assert "pools[0].sharing.mode" in _paths(rocket)


def test_the_device_plugin_beside_a_dra_pool_under_the_operator_is_refused(tmp_path):
    mixed = stack_config("aws", pools=[POOLS[0], {"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 2, "sharing": {"mode": "none"}}], **KEYS)
    (problem,) = config_problems(mixed)
    assert problem.path == "pools[1].sharing.mode" and "TransformValidator" in problem.message
    result = CliRunner().invoke(app, ["plan", "--config", str(write_stack(tmp_path, mixed))])
    assert result.exit_code == 2 and result.stderr.splitlines() == [str(problem)]
    # The standalone device plugin keeps off nodes labelled false, and runs no validator: allowed.
    validate_stack({**mixed, "gpupools:gpuSoftware": {"installer": "device-plugin"}})


def test_a_rack_pool_on_the_device_plugin_beside_a_dra_pool_is_refused():
    pools = [("pools[0].sharing", "dra", False, False), ("pools[1].sharing", "none", True, False), ("pools[2].sharing", "dra", True, False)]
    (problem,) = dragpu.stack_problems(pools, "kueue", True)
    assert problem.path == "pools[1].sharing.mode" and "templates/validation.yaml" in problem.message
    assert dragpu.stack_problems(pools[1:2], "kueue", True) == []  # no DRA pool: ComputeDomains only, as before


def test_karpenter_and_quotas_that_count_no_claims_are_refused():
    assert _paths({**CONFIG, "gpupools:autoscaler": "karpenter"}) == ["autoscaler"]
    assert _paths({**CONFIG, "gpupools:quotas": "resourcequota"}) == ["quotas"]
    assert dragpu.stack_problems([("sharing", "dra", False, True)], "kueue", True, "cluster-autoscaler") == []


# --------------------------------------------------------------------------------------------------------------------
# Install: the chart with GPU allocation on the DRA pools, the device plugin kept off them


def test_the_chart_allocates_gpus_on_the_dra_pools_only(dra):
    stack, plans = dra
    release = dragpu.dra_release(stack, plans)
    values = release.values
    assert release.chart == cd.CHART and values["resources"] == {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}}
    assert values["gpuResourcesEnabledOverride"] is True
    assert cd.plugin_pools(values) == {"whole", "slices"}
    assert values["featureGates"] == {"TimeSlicingSettings": True}
    assert values["nvidiaDriverRoot"] == "/"
    # A stack without DRA pools: the ComputeDomain release as before (none here: no rack pool).
    assert dragpu.dra_release(*plain_plans()) is None


def plain_plans():
    stack = validate_stack(PLAIN)
    return stack, plan_pools(stack)


def test_helm_renders_the_gpu_kubelet_plugin_and_refuses_it_without_the_override(dra):
    (release,) = [r for r in stack_releases("dra-test", config=CONFIG) if r.chart == "dra-driver-nvidia-gpu"]
    objects = release.render(api_versions=("resource.k8s.io/v1",))
    classes = {o["metadata"]["name"] for o in kind_of(objects, "DeviceClass")}
    assert classes == set(cd.served_device_classes(release.values)) >= {"gpu.nvidia.com", "mig.nvidia.com"}
    (plugin,) = kind_of(objects, "DaemonSet")
    pod = plugin["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["gpus"]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": POOL_LABEL, "operator": "In", "values": ["slices", "whole"]}]
    assert {"name": "FEATURE_GATES", "value": "TimeSlicingSettings=true,"} in pod["containers"][0]["env"]
    refused = {k: v for k, v in release.values.items() if k != "gpuResourcesEnabledOverride"}
    with pytest.raises(RenderError, match="cannot be deployed alongside the standard GPU device plugin"):
        render("dra-driver-nvidia-gpu", refused, release.release, release.namespace, ("resource.k8s.io/v1",))


def test_the_operator_keeps_its_device_plugin_off_and_its_mig_manager_on(dra, plain):
    stack, plans = dra
    whole, slices = plans
    assert whole.labels[DEPLOY_DEVICE_PLUGIN_LABEL] == "false" == slices.labels[DEPLOY_DEVICE_PLUGIN_LABEL]
    assert slices.labels[MIG_CONFIG_LABEL] == "all-3g.40gb" and whole.labels[MIG_CONFIG_LABEL] == "all-disabled"
    values = gpu_operator_values(stack, plans, None)
    assert values["devicePlugin"]["enabled"] is False and values["migManager"]["enabled"] is True
    values = gpu_operator_values(*plain, None)
    assert values["devicePlugin"]["enabled"] is True and values["migManager"]["enabled"] is False
    assert DEPLOY_DEVICE_PLUGIN_LABEL not in plain[1][0].labels


# --------------------------------------------------------------------------------------------------------------------
# Queues: quota by device class, the landing check following the claim


def test_kueue_maps_gpu_and_mig_classes_to_queue_resources(dra, plain):
    assert kueue.device_class_mappings(dra[1]) == [{"name": DRA_GPU_RESOURCE, "deviceClassNames": ["gpu.nvidia.com"]},
                                                   {"name": DRA_MIG_RESOURCE, "deviceClassNames": ["mig.nvidia.com"]}]
    assert kueue.device_class_mappings(dra[1][:1]) == [{"name": DRA_GPU_RESOURCE, "deviceClassNames": ["gpu.nvidia.com"]}]
    assert kueue.device_class_mappings(plain[1]) == []


@pytest.fixture(scope="module")
def cluster(dra):
    return cluster_of(*dra)


def _team_job(stack, plans, pool):
    from gpupools.landing.jobs import team_job

    job = team_job(stack, plans, "ml", pool, None, "nvcr.io/nvidia/cuda:12.8.0-base-ubuntu24.04", units=2)
    plan = next(p for p in plans if p.name == pool)
    return plan, dragpu.dra_docs(plan, [job])


def test_a_queued_job_lands_by_its_claim(dra, cluster):
    stack, plans = dra
    for pool, klass, resource in (("whole", "gpu.nvidia.com", DRA_GPU_RESOURCE), ("slices", "mig.nvidia.com", DRA_MIG_RESOURCE)):
        plan, docs = _team_job(stack, plans, pool)
        verdict = land(cluster, cluster.teams[0], plan, "job", docs[-1], docs)
        assert verdict.lands, verdict.steps
        (claims,) = [s for s in verdict.steps if s.name == "claims"]
        assert claims.detail == f"{klass} counted as 2 x {resource} on flavor {pool} (8 nominal)"
        assert not any(s.name == "device" for s in verdict.steps)


def test_without_the_mapping_the_claim_does_not_land(dra, cluster):
    stack, plans = dra
    mapped = cluster_of(stack, plans)
    unmapped = dataclasses.replace(mapped, class_mappings=[m for m in mapped.class_mappings if m["name"] != DRA_GPU_RESOURCE])
    plan, docs = _team_job(stack, plans, "whole")
    verdict = land(unmapped, unmapped.teams[0], plan, "job", docs[-1], docs)
    assert not verdict.lands and verdict.failing.name == "claims"
    assert verdict.failing.detail.startswith("DeviceClass gpu.nvidia.com is not mapped in Kueue's deviceClassMappings")


def test_allocation_mode_all_is_refused(dra, cluster):
    stack, plans = dra
    plan, docs = _team_job(stack, plans, "whole")
    docs = copy.deepcopy(docs)
    docs[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "All"
    del docs[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"]
    verdict = land(cluster, cluster.teams[0], plan, "job", docs[-1], docs)
    assert not verdict.lands and verdict.failing.name == "claims"
    assert "AllocationMode 'All' is not supported" in verdict.failing.detail


# --------------------------------------------------------------------------------------------------------------------
# `gpupools workload --pool P`: a ResourceClaimTemplate and a Job claiming it


@pytest.fixture(scope="module")
def workload_docs(tmp_path_factory):
    path = write_stack(tmp_path_factory.mktemp("dra"), CONFIG, "dra-test")
    out = {}
    for pool in ("whole", "slices"):
        result = CliRunner().invoke(app, ["workload", "--config", str(path), "--pool", pool, "--units", "2"])
        assert result.exit_code == 0, result.output
        out[pool] = [d for d in yaml.safe_load_all(result.stdout) if d]
    return out


def test_workload_prints_a_claim_template_and_a_job_claiming_it(workload_docs):
    template, job = workload_docs["whole"]
    assert template == {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "gpu-smoke-whole-gpu"},
                        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                            "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2}}]}}}}
    pod = job["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpu-smoke-whole-gpu"}]
    (container,) = pod["containers"]
    assert container["resources"] == {"claims": [{"name": "gpu"}]}  # no nvidia.com/gpu (or any) limit
    template, _ = workload_docs["slices"]
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["deviceClassName"] == "mig.nvidia.com" and exactly["count"] == 2
    assert exactly["selectors"] == [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"}}]


def test_the_printed_objects_are_valid_kubernetes(workload_docs):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for docs in workload_docs.values():
        for doc in docs:
            kubernetes_validate.validate(doc, "1.34", strict=True)
    bad = copy.deepcopy(workload_docs["whole"][0])
    bad["spec"]["spec"]["devices"]["requests"][0]["exactly"]["class"] = "gpu.nvidia.com"  # strict: no unknown fields
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.34", strict=True)


def test_other_pools_print_the_job_alone(plain, tmp_path):
    result = CliRunner().invoke(app, ["workload", "--config", str(write_stack(tmp_path, PLAIN)), "--pool", "whole"])
    (job,) = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert dragpu.dra_docs(plain[1][0], [job]) == [job]


# --------------------------------------------------------------------------------------------------------------------
# The plan: "preview" on every line the mode touches; nothing else changes


# Rows a DRA pool's mode does not change: where its nodes come from, how they are kept and upgraded.
UNCHANGED_ROWS = {"creates", "instance", "nodes", "taint", "broken GPU", "repair", "upgrades", "driver", "disk", "local NVMe"}


@pytest.fixture(scope="module")
def plan_rows():
    """Each pool's plan table, as (key, value) rows, printed wide enough that no row wraps."""
    import io

    from rich.console import Console

    from conftest import plan_of
    from gpupools.cli.planreport import print_plan

    stack = validate_stack(CONFIG)
    out = io.StringIO()
    print_plan(stack, plan_of(CONFIG, "dra-test"), Console(file=out, width=4000, highlight=False, emoji=False))
    tables: dict[str, list[tuple[str, str]]] = {}
    pool = None
    for line in out.getvalue().splitlines():
        if line.startswith("pool "):
            pool = line.split()[1]
            tables[pool] = []
        elif pool and line.strip() and line.startswith(" "):
            key, value = line[1:15].strip(), line[15:].strip()
            tables[pool].append((key, value))
        elif pool and not line.strip() and tables[pool]:
            pool = None
    return tables


def test_every_line_the_mode_touches_says_preview(plan_rows):
    for pool in ("whole", "slices"):
        key, seen = "", set()
        for head, value in plan_rows[pool]:
            key = head or key
            seen.add(key)
            assert key in UNCHANGED_ROWS or value.startswith("preview: "), (pool, key, value)
            assert key not in UNCHANGED_ROWS or "preview" not in value, (pool, key, value)
        assert {"sharing", "DRA", "labels", "GPU metrics", "capacity", "price", "scale-up", "ready"} <= seen
    rows = {}
    for head, value in plan_rows["slices"]:
        rows.setdefault(head, []).append(value) if head else rows[list(rows)[-1]].append(value)
    assert rows["sharing"][0] == ("preview: NVIDIA DRA driver, existing MIG devices 3g.40gb x2 (mig.nvidia.com, all-3g.40gb), "
                                  "time-slicing per claim")
    assert "TimeSlicingSettings" in " ".join(rows["DRA"])
    assert "validated driver, toolkit, and CUDA (no device plugin" in rows["ready"][0]
    assert any("cannot attribute this pool's GPUs" in line for line in rows["DRA"])


def test_a_plan_without_the_mode_says_no_preview(plain):
    stack, plans = plain
    (plan,) = plans
    assert dragpu.dra_lines(stack, plan) == [] and dragpu.preview_mark(plan.mechanism)("x") == "x"
    assert dragpu.dra_release(stack, plans) is None and kueue.device_class_mappings(plans) == []


def test_the_readiness_reporter_waits_for_the_last_check_the_validator_runs(dra, plain):
    from gpupools.pools.software import SoftwarePlan, readiness_software

    def endpoint(stack, plans) -> str:
        out = SoftwarePlan()
        readiness_software(stack, plans, out)
        (ds,) = [o for o in out.objects if o["kind"] == "DaemonSet"]
        (env,) = [e for c in ds["spec"]["template"]["spec"]["containers"] for e in c.get("env", []) if e["name"] == "CHECK_ENDPOINT"]
        return env["value"]

    assert endpoint(*dra).endswith("/cuda-ready")  # no device plugin, so no plugin check and no plugin-ready
    assert endpoint(*plain).endswith("/plugin-ready")


def test_the_operators_gpucluster_is_refused_beside_its_clusterpolicy(tmp_path):
    config = {**CONFIG, "gpupools:gpuSoftware": {"installer": "gpu-operator", "draDriver": "gpu-cluster"}}
    (problem,) = config_problems(config)
    assert problem.path == "gpuSoftware.draDriver" and "PrerequisiteNotMet" in problem.message
    result = CliRunner().invoke(app, ["plan", "--config", str(write_stack(tmp_path, config))])
    assert result.exit_code == 2 and result.stderr.splitlines() == [str(problem)]
    assert validate_stack({**CONFIG, "gpupools:gpuSoftware": {"installer": "gpu-operator", "draDriver": "chart"}}).gpu_software.dra_driver == "chart"


def test_the_policy_pack_reads_dra_pools_back_and_passes(tmp_path):
    result = CliRunner().invoke(app, ["check", "--config", str(write_stack(tmp_path, CONFIG, "dra-test"))])
    assert result.exit_code == 0, result.output
    assert "0 mandatory" in result.stdout


@pytest.fixture(scope="module")
def plan_text():
    """The whole plan of the DRA stack and of the same stack without the mode, wide enough that no line wraps."""
    import io

    from rich.console import Console

    from conftest import plan_of
    from gpupools.cli.planreport import print_plan

    def text(config, name):
        out = io.StringIO()
        print_plan(validate_stack(config), plan_of(config, name), Console(file=out, width=4000, highlight=False, emoji=False))
        return out.getvalue().splitlines()

    return text(CONFIG, "dra-test"), text(PLAIN, "plain-test")


def test_lines_outside_the_pool_tables_say_preview_where_the_mode_changes_them(plan_text):
    lines, plain_lines = plan_text
    release = next(line for line in lines if line.startswith("helm release dra-driver-nvidia-gpu:"))
    assert release.endswith("(preview: allocates the GPUs of whole, slices)"), release
    assert ("preview: the quotas of whole, slices count devices NVIDIA's DRA driver allocates (sharing mode dra), as Kueue's "
            "deviceClassMappings name them") in lines
    team = next(line for line in lines if line.startswith("  ml: "))
    assert "slices (preview) " in team and "whole (preview) " in team, team
    # Every landing line that names a DRA pool marks it; nothing else in the plan outside the pool tables says preview.
    outside = [line for line in lines if not line.startswith(" ") or line.startswith("  ")]
    assert all("preview" in line for line in outside if line.startswith("    whole ") or line.startswith("    slices ")), outside
    assert not any("preview" in line for line in plain_lines)

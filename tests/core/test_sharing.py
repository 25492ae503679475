"""Sharing decisions and the config documents they produce, checked against the pinned upstream schemas."""

from __future__ import annotations

import pytest
import yaml

from gpupools.core.catalog import load_catalog, mig_config_name, mig_resource_name
from gpupools.stack.config import Sharing
from gpupools.validation.stack import validate_stack
from gpupools.pools.planning import plan_pools
from gpupools.core.sharing import (
    DEVICE_PLUGIN_CONFIG_LABEL,
    MIG_CONFIG_LABEL,
    OPERATOR_DEFAULT_MIG_CONFIGS,
    device_plugin_config_entry,
    device_plugin_entry_name,
    all_profile_entries,
    mig_parted_config,
    resolve_installer,
)
from gpupools.pools.software import device_plugin_config_data, gpu_operator_values, software_plan

from conftest import ROOT, has_path, value_paths, needs_reference, stack_config


def plans_for(cloud, pools, **keys):
    stack = validate_stack(stack_config(cloud, pools=pools, **keys))
    return stack, plan_pools(stack)


def test_auto_installer_per_cloud():
    from gpupools.clouds.registry import cloud_module

    assert [resolve_installer(cloud_module(c), "auto") for c in ("aws", "azure", "gcp")] == ["gpu-operator", "gpu-operator", "cloud"]
    assert resolve_installer(cloud_module("gcp"), "gpu-operator") == "gpu-operator"


def test_device_plugin_entries_are_named_by_setting():
    assert device_plugin_entry_name(Sharing(mode="time-slicing", replicas=4)) == "time-slicing-4"
    assert device_plugin_entry_name(Sharing(mode="mps", replicas=8)) == "mps-8"
    assert device_plugin_entry_name(Sharing()) == "no-sharing"
    assert device_plugin_entry_name(Sharing(mode="mig", mig_profile="1g.5gb")) == "no-sharing"


def test_device_plugin_documents_match_the_upstream_readme_shape():
    """k8s-device-plugin README (v0.20.0) examples, with the replicas we chose."""
    ts = device_plugin_config_entry(Sharing(mode="time-slicing", replicas=10))
    mps = device_plugin_config_entry(Sharing(mode="mps", replicas=10))
    assert ts == {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 10}]}}}
    assert mps == {"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 10}]}}}


def test_device_plugin_documents_equal_upstream_examples():
    ref = needs_reference()
    upstream_ts = list(yaml.safe_load_all((ref / "k8s-device-plugin" / "README-example-timeslicing.yaml").read_text()))[0]
    upstream_mps = list(yaml.safe_load_all((ref / "k8s-device-plugin" / "README-example-mps.yaml").read_text()))[0]
    assert device_plugin_config_entry(Sharing(mode="time-slicing", replicas=10)) == upstream_ts
    assert device_plugin_config_entry(Sharing(mode="mps", replicas=10)) == upstream_mps


def test_one_config_entry_per_distinct_setting():
    _, plans = plans_for("aws", [
        {"name": "a", "instanceType": "g5.xlarge", "maxNodes": 1, "sharing": {"mode": "time-slicing", "replicas": 4}},
        {"name": "b", "instanceType": "g5.xlarge", "maxNodes": 1, "sharing": {"mode": "time-slicing", "replicas": 4}},
        {"name": "c", "instanceType": "g6.xlarge", "maxNodes": 1, "sharing": {"mode": "mps", "replicas": 2}},
        {"name": "d", "instanceType": "g6.xlarge", "maxNodes": 1},
    ])
    data = device_plugin_config_data(plans)
    assert sorted(data) == ["mps-2", "no-sharing", "time-slicing-4"]
    assert yaml.safe_load(data["mps-2"])["sharing"]["mps"]["resources"][0]["replicas"] == 2
    assert [p.labels[DEVICE_PLUGIN_CONFIG_LABEL] for p in plans] == ["time-slicing-4", "time-slicing-4", "mps-2", "no-sharing"]


def test_mig_through_the_operator_uses_labels_and_default_configs():
    stack, (plan,) = plans_for("aws", [{"name": "m", "instanceType": "p4d.24xlarge", "maxNodes": 1, "sharing": {"mode": "mig", "migProfile": "1g.5gb"}}])
    assert plan.labels[MIG_CONFIG_LABEL] == "all-1g.5gb"
    assert plan.mechanism.resource == "nvidia.com/mig-1g.5gb"
    assert plan.units_per_node == 8 * 7
    values = gpu_operator_values(stack, [plan], None)
    assert values["migManager"]["enabled"] is True
    assert {"name": "WITH_REBOOT", "value": "true"} in values["migManager"]["env"]
    assert "config" not in values["migManager"]  # the operator's default config holds all-1g.5gb
    assert values["mig"]["strategy"] == "mixed"


def test_single_mig_strategy_keeps_the_gpu_resource_name():
    _, (plan,) = plans_for("aws", [{"name": "m", "instanceType": "p4de.24xlarge", "maxNodes": 1, "sharing": {"mode": "mig", "migProfile": "3g.40gb"}}],
                           gpuSoftware={"migStrategy": "single"})
    assert plan.mechanism.resource == "nvidia.com/gpu"
    assert plan.units_per_node == 16


def test_mig_capable_pool_without_mig_is_kept_whole():
    _, (plan,) = plans_for("aws", [{"name": "w", "instanceType": "p4d.24xlarge", "maxNodes": 1}])
    assert plan.labels[MIG_CONFIG_LABEL] == "all-disabled"
    _, (t4,) = plans_for("aws", [{"name": "t", "instanceType": "g4dn.xlarge", "maxNodes": 1}])
    assert MIG_CONFIG_LABEL not in t4.labels


def test_custom_mig_config_only_for_layouts_the_defaults_lack(monkeypatch):
    import gpupools.pools.software as software

    stack, plans = plans_for("aws", [{"name": "m", "instanceType": "p4d.24xlarge", "maxNodes": 1, "sharing": {"mode": "mig", "migProfile": "2g.10gb"}}])
    assert "config" not in software_plan(stack, plans).releases[0].values["migManager"]
    monkeypatch.setattr(software, "OPERATOR_DEFAULT_MIG_CONFIGS", frozenset({"all-disabled"}))
    config = software_plan(stack, plans).releases[0].values["migManager"]["config"]
    assert {k: v for k, v in config.items() if k != "data"} == {"name": software.MIG_CONFIGMAP, "create": True, "default": "all-disabled"}
    doc = yaml.safe_load(config["data"]["config.yaml"])
    assert doc["mig-configs"]["all-2g.10gb"] == [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.10gb": 3}}]


def test_mig_parted_document_follows_the_upstream_schema():
    doc = mig_parted_config({"all-1g.10gb.me": all_profile_entries("1g.10gb+me", 1)})
    assert doc["version"] == "v1"
    assert doc["mig-configs"]["all-1g.10gb.me"] == [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb+me": 1}}]
    assert doc["mig-configs"]["all-disabled"] == [{"devices": "all", "mig-enabled": False}]


def test_operator_default_mig_configs_match_the_pinned_operator():
    ref = needs_reference()
    upstream = yaml.safe_load((ref / "gpu-operator" / "default-mig-parted-config.yaml").read_text())["mig-configs"]
    assert OPERATOR_DEFAULT_MIG_CONFIGS <= set(upstream)
    # Every single-profile layout of every catalog GPU is one the operator ships, with the catalog's instance count.
    for gpu in load_catalog().gpus.values():
        for profile, count in gpu.mig_profiles.items():
            name = mig_config_name(profile)
            assert name in OPERATOR_DEFAULT_MIG_CONFIGS, (gpu.name, profile)
            counts = {d["mig-devices"][profile] for d in upstream[name]}
            assert count in counts, (gpu.name, profile, counts)


def test_mig_resource_names_follow_the_device_plugin():
    assert mig_resource_name("1g.10gb") == "nvidia.com/mig-1g.10gb"
    assert mig_resource_name("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"


def test_gke_cloud_sharing_is_a_node_pool_setting():
    from gpupools.clouds import gcp

    _, (ts, mig) = plans_for("gcp", [
        {"name": "ts", "instanceType": "g2-standard-8", "maxNodes": 1, "sharing": {"mode": "mps", "replicas": 6}},
        {"name": "mig", "instanceType": "a2-ultragpu-1g", "maxNodes": 1, "sharing": {"mode": "mig", "migProfile": "3g.40gb"}},
    ])
    acc = gcp.guest_accelerator(ts, "cloud")
    assert acc["gpu_sharing_config"] == {"gpu_sharing_strategy": "MPS", "max_shared_clients_per_gpu": 6}
    assert acc["gpu_driver_installation_config"] == {"gpu_driver_version": "LATEST"}
    assert gcp.guest_accelerator(mig, "cloud")["gpu_partition_size"] == "3g.40gb"
    assert mig.units_per_node == 2 and mig.mechanism.resource == "nvidia.com/gpu"
    assert DEVICE_PLUGIN_CONFIG_LABEL not in ts.labels


def test_gke_with_the_operator():
    from gpupools.clouds import gcp

    stack, (plan,) = plans_for("gcp", [{"name": "ts", "instanceType": "g2-standard-8", "maxNodes": 1, "sharing": {"mode": "time-slicing", "replicas": 2}}],
                               gpuSoftware={"installer": "gpu-operator"})
    args = gcp.node_pool_args(plan, "gpu-operator", "c", "us-central1", "p", None)
    cfg = args["node_config"]
    assert cfg["image_type"] == "UBUNTU_CONTAINERD"
    assert cfg["labels"][gcp.NO_DEFAULT_DEVICE_PLUGIN_LABEL] == "true"
    assert cfg["labels"][DEVICE_PLUGIN_CONFIG_LABEL] == "time-slicing-2"
    assert cfg["guest_accelerators"][0]["gpu_driver_installation_config"] == {"gpu_driver_version": "INSTALLATION_DISABLED"}
    assert "gpu_sharing_config" not in cfg["guest_accelerators"][0]
    quota = [o for o in software_plan(stack, [plan]).objects if o["kind"] == "ResourceQuota"][0]
    assert quota["metadata"] == {"name": "gpu-operator-quota", "namespace": "gpu-operator"}
    assert quota["spec"]["scopeSelector"]["matchExpressions"][0]["values"] == ["system-node-critical", "system-cluster-critical"]


def test_bottlerocket_mig_settings():
    from gpupools.clouds import aws

    _, (plan,) = plans_for("aws", [{"name": "br", "instanceType": "p4de.24xlarge", "os": "bottlerocket", "maxNodes": 1,
                                    "sharing": {"mode": "mig", "migProfile": "3g.40gb"}}])
    toml = aws.bottlerocket_settings(plan)
    assert 'device-partitioning-strategy = "mig"' in toml
    assert '"a100.80gb" = "3g.40gb"' in toml


def test_operator_driver_ownership_per_cloud():
    for cloud, owns in (("aws", False), ("azure", True), ("gcp", True)):
        stack, plans = plans_for(cloud, None, gpuSoftware={"installer": "gpu-operator"})
        values = gpu_operator_values(stack, plans, None)
        assert values["driver"]["enabled"] is owns and values["toolkit"]["enabled"] is owns, cloud


def test_azure_spot_pools_add_the_spot_toleration_to_gpu_daemonsets():
    stack, plans = plans_for("azure", [{"name": "spot", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 1, "spot": True}])
    tolerations = gpu_operator_values(stack, plans, None)["daemonsets"]["tolerations"]
    assert {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot", "effect": "NoSchedule"} in tolerations
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations


@pytest.mark.parametrize("cloud, installer", [("aws", "gpu-operator"), ("azure", "gpu-operator"), ("gcp", "gpu-operator"), ("aws", "device-plugin")])
def test_every_helm_value_we_set_exists_in_the_pinned_chart(cloud, installer):
    ref = needs_reference()
    upstream = {"gpu-operator": yaml.safe_load((ref / "gpu-operator" / "values.yaml").read_text()),
                "nvidia-device-plugin": yaml.safe_load((ref / "k8s-device-plugin" / "values.yaml").read_text())}
    pools = [{"name": "a", "instanceType": {"aws": "p4d.24xlarge", "azure": "Standard_NC24ads_A100_v4", "gcp": "a2-highgpu-1g"}[cloud],
              "maxNodes": 1, "sharing": {"mode": "time-slicing", "replicas": 2}}]
    stack, plans = plans_for(cloud, pools, gpuSoftware={"installer": installer})
    # The Node Readiness Controller beside it is checked in tests/health.
    (release,) = [r for r in software_plan(stack, plans, {"additionalLabels": {"release": "kube-prometheus-stack"}, "relabelings": []}).releases
                  if r.name in upstream]
    missing = [".".join(p) for p in value_paths(release.values, ("map", "data", "additionalLabels", "affinity"))
               if not has_path(upstream[release.name], p)]
    assert missing == []


def test_chart_versions_are_the_pinned_upstream_releases():
    ref = needs_reference()
    from gpupools.pools.software import DEVICE_PLUGIN, GPU_OPERATOR

    assert yaml.safe_load((ref / "k8s-device-plugin" / "Chart.yaml").read_text())["version"] == DEVICE_PLUGIN.default_version
    # The gpu-operator Chart.yaml in git says v1.0.0-devel; releases are packaged with the tag (SOURCES.md): v26.7.0.
    assert GPU_OPERATOR.default_version == "v26.7.0"


# --------------------------------------------------------------------------------------------------------------------
# The newer GPUs: Blackwell and H200 MIG through the operator's own layouts, GB200 refused, the driver they need


def problems_of(cloud, pools, region=None, **keys):
    from gpupools.stack.errors import ConfigError

    config = stack_config(cloud, pools=pools, **keys)
    if region:
        config["aws:region"] = region
    with pytest.raises(ConfigError) as exc:
        validate_stack(config)
    return [(p.path, p.message) for p in exc.value.problems]


def aws_plans(pools, **keys):
    config = stack_config("aws", pools=pools, **keys)
    config["aws:region"] = "us-east-2"  # sells p5en, p6-b200 and g7e
    stack = validate_stack(config)
    return stack, plan_pools(stack)


@pytest.mark.parametrize("instance_type, profile, per_gpu", [("p6-b200.48xlarge", "3g.90gb", 2), ("p6-b200.48xlarge", "1g.23gb+me", 1),
                                                            ("p5en.48xlarge", "1g.18gb", 7), ("g7e.48xlarge", "1g.24gb-me", 4),
                                                            ("g7e.4xlarge", "2g.48gb", 2)])
def test_blackwell_and_h200_mig_use_the_operators_own_layouts(instance_type, profile, per_gpu):
    stack, (plan,) = aws_plans([{"name": "m", "instanceType": instance_type, "maxNodes": 1, "sharing": {"mode": "mig", "migProfile": profile}}])
    assert plan.labels[MIG_CONFIG_LABEL] == mig_config_name(profile)
    assert plan.mechanism.resource == mig_resource_name(profile)
    assert plan.units_per_node == plan.hardware.gpus_per_node * per_gpu
    assert "config" not in gpu_operator_values(stack, [plan], None)["migManager"]  # the default config holds the layout


def test_rtx_pro_6000_layouts_the_operator_ships_are_known():
    # The RTX PRO 6000 layouts of the pinned default config, +gfx and +me.all among them, so a custom config is never
    # written for one of them (NVIDIA/gpu-operator v26.7.0 assets/state-mig-manager/0400_configmap.yaml).
    ref = needs_reference()
    upstream = yaml.safe_load((ref / "gpu-operator" / "default-mig-parted-config.yaml").read_text())["mig-configs"]
    for name in ("all-1g.24gb.gfx", "all-1g.24gb.me.all", "all-2g.48gb.gfx", "all-2g.48gb.me.all", "all-4g.96gb.gfx"):
        assert name in upstream and name in OPERATOR_DEFAULT_MIG_CONFIGS


def test_a_mig_profile_the_gpu_lacks_lists_the_gpus_own():
    found = problems_of("aws", [{"name": "m", "instanceType": "p6-b200.48xlarge", "maxNodes": 1, "sharing": {"mode": "mig", "migProfile": "3g.40gb"}}],
                        region="us-east-2")
    assert found == [("pools[0].sharing.migProfile", "'3g.40gb' is not a MIG profile of B200-180GB; it has 1g.23gb, 1g.23gb+me, 1g.45gb, "
                                                     "2g.45gb, 3g.90gb, 4g.90gb, 7g.180gb")]


def test_bottlerocket_mig_does_not_cover_blackwell():
    found = problems_of("aws", [{"name": "m", "instanceType": "p6-b200.48xlarge", "os": "bottlerocket", "maxNodes": 1,
                                 "sharing": {"mode": "mig", "migProfile": "3g.90gb"}}], region="us-east-2")
    assert found == [("pools[0].sharing.mode", "Bottlerocket's MIG settings do not cover B200-180GB; use os: al2023 (GPU Operator MIG manager)")]


def test_gb200_mig_is_refused_with_the_reason():
    from gpupools.core.catalog import Hardware
    from gpupools.core.sharing import sharing_problems

    gb200 = load_catalog().gpus["GB200-186GB"]
    from gpupools.clouds.registry import cloud_module

    found = sharing_problems(cloud_module("aws"), "gpu-operator", None, Sharing(mode="mig", mig_profile="1g.23gb"), Hardware("x", gb200, 4, 1.0, "2026-07"), "pools[0].sharing")
    assert [p.path for p in found] == ["pools[0].sharing.mode"] and "CDMM" in found[0].message and "no MIG" in found[0].message


@pytest.mark.parametrize("cloud, instance_type, region_key, region", [("azure", "Standard_ND128isr_NDR_GB200_v6", "azure-native:location", "eastus")])
def test_gb200_in_a_plain_pool_is_one_line_naming_the_field_and_what_to_use(cloud, instance_type, region_key, region):
    from gpupools.stack.errors import ConfigError

    config = stack_config(cloud, pools=[{"name": "gb", "instanceType": instance_type, "maxNodes": 1}])
    if region_key:
        config[region_key] = region
    with pytest.raises(ConfigError) as exc:
        validate_stack(config)
    (problem,) = exc.value.problems
    assert problem.path == "pools[0].instanceType" and problem.message == load_catalog().refusal(cloud, instance_type)
    assert "\n" not in str(problem)


def test_new_types_are_refused_where_the_region_does_not_sell_them():
    found = problems_of("aws", [{"name": "b", "instanceType": "p6-b200.48xlarge", "maxNodes": 1}], region="eu-central-1")
    assert [p for p, _ in found] == ["pools[0].instanceType"]
    assert "not offered in eu-central-1" in found[0][1] and "us-east-2" in found[0][1]


def test_the_drivers_gpupools_installs_know_every_catalog_gpu():
    """Where the GPU Operator installs the driver (AKS, GKE with the operator) its pinned default branch knows every GPU
    of the catalog, and gpupools leaves driver.kernelModuleType at the chart's "auto", which picks NVIDIA's open kernel
    modules on Blackwell (NVIDIA/gpu-operator v26.7.0 api/nvidia/v1/clusterpolicy_types.go KernelModuleType)."""
    ref = needs_reference()
    chart = yaml.safe_load((ref / "gpu-operator" / "values.yaml").read_text())["driver"]
    assert chart["kernelModuleType"] == "auto"
    branch = int(str(chart["version"]).split(".")[0])
    for gpu in load_catalog().gpus.values():
        assert gpu.min_driver is None or branch >= gpu.min_driver, gpu.name
    for cloud in ("azure", "gcp"):
        stack, plans = plans_for(cloud, None, gpuSoftware={"installer": "gpu-operator"})
        driver = gpu_operator_values(stack, plans, None)["driver"]
        assert driver["enabled"] is True and "kernelModuleType" not in driver and "version" not in driver


def test_gke_a4_pool_plans_with_gkes_own_b200_partitions():
    config = stack_config("gcp", pools=[{"name": "b200", "instanceType": "a4-highgpu-8g", "maxNodes": 1, "zones": ["us-central1-b"],
                                         "sharing": {"mode": "mig", "migProfile": "3g.90gb"}}])
    stack = validate_stack(config)
    (plan,) = plan_pools(stack)
    assert plan.hardware.accelerator == "nvidia-b200" and plan.units_per_node == 16


def driver_of(cloud, pool, region=None, **keys):
    from gpupools.pools.software import driver_plan

    config = stack_config(cloud, pools=[pool], **keys)
    if region:
        config["aws:region" if cloud == "aws" else "azure-native:location"] = region
    stack = validate_stack(config)
    (plan,) = plan_pools(stack)
    return driver_plan(stack, plan)


def test_the_driver_of_a_pool_says_who_installs_it_and_what_its_gpu_needs():
    from gpupools.pools.software import GPU_OPERATOR_DRIVER

    chart = yaml.safe_load((needs_reference() / "gpu-operator" / "values.yaml").read_text())["driver"]
    assert GPU_OPERATOR_DRIVER == chart["version"]
    b200 = driver_of("aws", {"name": "b", "instanceType": "p6-b200.48xlarge", "maxNodes": 1}, "us-east-2")
    assert (b200.installed_by, b200.version, b200.min_branch, b200.open_modules_only) == ("the EKS AL2023 NVIDIA AMI", None, 570, True)
    assert "open kernel modules" in b200.words and "branch 570 or later" in b200.words
    assert b200.as_json() == {"installedBy": "the EKS AL2023 NVIDIA AMI", "version": None, "minBranch": 570, "openKernelModulesOnly": True}
    h100 = driver_of("aws", {"name": "h", "instanceType": "p5.48xlarge", "maxNodes": 1}, "us-east-1")
    assert not h100.open_modules_only and h100.min_branch is None and h100.words == "the EKS AL2023 NVIDIA AMI"
    bottlerocket = driver_of("aws", {"name": "g", "instanceType": "g5.2xlarge", "maxNodes": 1, "os": "bottlerocket"})
    assert bottlerocket.installed_by.startswith("Bottlerocket")
    operator = driver_of("azure", {"name": "h", "instanceType": "Standard_ND96isr_H200_v5", "maxNodes": 1}, "eastus2")
    assert operator.version == GPU_OPERATOR_DRIVER and "GPU Operator (chart v26.7.0" in operator.installed_by
    other_chart = driver_of("azure", {"name": "t", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 1}, gpuSoftware={"version": "v25.10.0"})
    assert other_chart.version is None and "chart v25.10.0" in other_chart.installed_by
    aks = driver_of("azure", {"name": "t", "instanceType": "Standard_NC4as_T4_v3", "maxNodes": 1}, gpuSoftware={"installer": "device-plugin"})
    assert aks.installed_by.startswith("AKS") and aks.version is None
    gke = driver_of("gcp", {"name": "b", "instanceType": "a4-highgpu-8g", "maxNodes": 1, "zones": ["us-central1-b"]})
    assert gke.installed_by.startswith("GKE") and "LATEST" in gke.installed_by and gke.open_modules_only and gke.min_branch == 570
    gke_operator = driver_of("gcp", {"name": "l", "instanceType": "g2-standard-8", "maxNodes": 1}, gpuSoftware={"installer": "gpu-operator"})
    assert gke_operator.version == GPU_OPERATOR_DRIVER


@pytest.mark.parametrize("driver, refused", [("550.90.07", True), ("565.57.01", True), ("570.86.15", False), ("595.91.07", False)])
def test_a_pinned_driver_older_than_the_pools_gpu_is_refused(driver, refused):
    """B200's device ID first appears in the 570 branch (catalog.yaml minDriver); where the GPU Operator installs the
    driver, a pinned older one would not know the GPU."""
    config = stack_config("gcp", pools=[{"name": "b200", "instanceType": "a4-highgpu-8g", "maxNodes": 1, "zones": ["us-central1-b"]},
                                        {"name": "l4", "instanceType": "g2-standard-8", "maxNodes": 1}],
                          gpuSoftware={"installer": "gpu-operator", "driverVersion": driver})
    if not refused:
        validate_stack(config)
        return
    found = problems_of_config(config)
    assert found == [("gpuSoftware.driverVersion", f"{driver} is branch {driver[:3]}; pool 'b200' (a4-highgpu-8g, B200-180GB) needs branch "
                                                   f"570 or later, the oldest that knows the GPU")]
    config["gpupools:pools"] = config["gpupools:pools"][1:]  # L4 alone: any branch the operator takes
    validate_stack(config)


def problems_of_config(config):
    from gpupools.stack.errors import ConfigError

    with pytest.raises(ConfigError) as exc:
        validate_stack(config)
    return [(p.path, p.message) for p in exc.value.problems]


@pytest.mark.parametrize("instance_type, region", [("p6-b200.48xlarge", "us-east-1"), ("p6-b300.48xlarge", "us-west-2"), ("g7e.4xlarge", "us-east-2")])
def test_hami_vgpus_on_blackwell(instance_type, region):
    """HAMi's device plugin registers every GPU NVML lists whatever its model (v2.10.0 register.go getAPIDevices), so
    vgpu pools of Blackwell types plan with HAMi; the pinned chart's device config names B200 and RTX PRO 6000, for its
    own MIG mode."""
    config = stack_config("aws", pools=[{"name": "v", "instanceType": instance_type, "maxNodes": 1, "sharing": {"mode": "vgpu", "replicas": 4}}])
    config["aws:region"] = region
    (plan,) = plan_pools(validate_stack(config))
    assert plan.mechanism.installer == "hami" and plan.units_per_node == plan.hardware.gpus_per_node * 4
    assert plan.labels["nvidia.com/mig.config"] == "all-disabled"
    device_config = (ROOT / "tests" / "charts" / "hami" / "templates" / "scheduler" / "device-configmap.yaml").read_text()
    assert '"B200"' in device_config and '"RTX PRO 6000 Blackwell Server Edition"' in device_config


@pytest.mark.parametrize("installer, os, sharing, units, words", [
    ("bottlerocket", "bottlerocket", Sharing(mode="time-slicing", replicas=4), 4, "Bottlerocket device plugin, time-slicing x4"),
    ("bottlerocket", "bottlerocket", Sharing(mode="mps", replicas=2), 2, "Bottlerocket device plugin, MPS x2"),
    ("bottlerocket", "bottlerocket", Sharing(), 1, "Bottlerocket device plugin, whole GPUs"),
    ("device-plugin", None, Sharing(mode="time-slicing", replicas=3), 3, "NVIDIA device plugin"),
    ("gpu-operator", None, Sharing(mode="time-slicing", replicas=3), 3, "GPU Operator"),
])
def test_the_mechanism_names_what_serves_the_gpus_and_counts_its_units(installer, os, sharing, units, words):
    from gpupools.clouds.registry import cloud_module
    from gpupools.core.sharing import mechanism

    from gpupools.stack.config import Pool

    aws = cloud_module("aws")
    hardware, found = aws.resolve(Pool.model_validate({"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 1}), load_catalog(), "pools[0]")
    assert found == []
    m = mechanism(cloud_module("aws"), installer, os, sharing, hardware, "single")
    assert m.units_per_gpu == units and words in m.description and (("NVIDIA device plugin" in m.description) is (installer == "device-plugin"))


def test_mig_on_an_unknown_instance_type_is_judged_once_it_is_known():
    """An instance type the catalog does not know is reported by itself; the MIG checks wait for hardware."""
    from gpupools.clouds.registry import cloud_module
    from gpupools.core.sharing import sharing_problems

    assert sharing_problems(cloud_module("aws"), "gpu-operator", None, Sharing(mode="mig", mig_profile="1g.10gb"), None, "sharing") == []

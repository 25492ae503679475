"""Resource policies: a happy-path resource passes, and changing one field makes the policy report it."""

from __future__ import annotations

import base64
import importlib

import pytest

from gpupools.policies.helm import OFFICIAL_REPOSITORIES
from gpupools.pools.software import Chart

from test_policies import (
    AKS,
    CONFIGMAP,
    EKS,
    GKE,
    LT,
    RELEASE,
    aks_agent_pool,
    device_plugin_configmap,
    eks_node_group,
    gke_node_pool,
    helm_release,
    launch_template,
    resource_violations,
)

# --------------------------------------------------------------------------------------------------------------------
# gpu-pool-taint


@pytest.mark.parametrize("typ, factory", [(EKS, eks_node_group), (AKS, aks_agent_pool), (GKE, gke_node_pool)])
def test_tainted_gpu_pools_pass(typ, factory):
    assert resource_violations("gpu-pool-taint", typ, factory()) == []


def test_eks_gpu_node_group_without_taint_fails():
    (message,) = resource_violations("gpu-pool-taint", EKS, eks_node_group(taints=[]), name="infer")
    assert "'infer'" in message and "nvidia.com/gpu" in message


def test_eks_taint_with_wrong_effect_fails():
    props = eks_node_group(taints=[{"effect": "PREFER_NO_SCHEDULE", "key": "nvidia.com/gpu", "value": "present"}])
    assert resource_violations("gpu-pool-taint", EKS, props)


def test_eks_gpu_found_by_ami_alone_and_cpu_groups_ignored():
    unknown_instance = eks_node_group(instanceTypes=["x9.mystery"], taints=[])
    assert resource_violations("gpu-pool-taint", EKS, unknown_instance)  # _NVIDIA AMI means GPU
    cpu = eks_node_group(amiType="AL2023_x86_64_STANDARD", instanceTypes=["t3.large"], taints=[])
    assert resource_violations("gpu-pool-taint", EKS, cpu) == []


def test_aks_gpu_pool_without_taint_fails():
    assert resource_violations("gpu-pool-taint", AKS, aks_agent_pool(nodeTaints=["other=x:NoSchedule"]))


def test_gke_gpu_pool_without_taint_fails():
    assert resource_violations("gpu-pool-taint", GKE, gke_node_pool(taints=[]))


# --------------------------------------------------------------------------------------------------------------------
# gpu-sharing-sane


def test_sharing_happy_paths():
    assert resource_violations("gpu-sharing-sane", CONFIGMAP, device_plugin_configmap(4)) == []
    assert resource_violations("gpu-sharing-sane", AKS, aks_agent_pool()) == []
    assert resource_violations("gpu-sharing-sane", GKE, gke_node_pool()) == []


def test_time_slicing_replicas_over_maximum_fail_and_config_raises_it():
    (message,) = resource_violations("gpu-sharing-sane", CONFIGMAP, device_plugin_configmap(32))
    assert "32" in message and "16" in message
    assert resource_violations("gpu-sharing-sane", CONFIGMAP, device_plugin_configmap(32), config={"maxReplicas": 32}) == []


def test_device_plugin_entry_that_is_not_v1_yaml_fails():
    cm = device_plugin_configmap(4)
    cm["data"]["broken"] = "sharing: [unclosed"
    assert any("broken" in m for m in resource_violations("gpu-sharing-sane", CONFIGMAP, cm))


def test_device_plugin_release_values_are_checked_too():
    release = helm_release(chart="nvidia-device-plugin", repositoryOpts={"repo": "https://nvidia.github.io/k8s-device-plugin"},
                           version="0.20.0", values={"config": {"map": device_plugin_configmap(20)["data"]}})
    assert resource_violations("gpu-sharing-sane", RELEASE, release)


def test_mig_layout_missing_on_the_pools_gpu_fails():
    # 3g.20gb is an A100-40GB profile; this pool has A100 80 GB GPUs.
    labels = {**aks_agent_pool()["nodeLabels"], "nvidia.com/mig.config": "all-3g.20gb"}
    (message,) = resource_violations("gpu-sharing-sane", AKS, aks_agent_pool(nodeLabels=labels))
    assert "all-3g.20gb" in message and "A100-80GB" in message


def test_mig_on_a_gpu_without_mig_fails():
    labels = {**eks_node_group()["labels"], "nvidia.com/mig.config": "all-1g.10gb"}
    (message,) = resource_violations("gpu-sharing-sane", EKS, eks_node_group(labels=labels))
    assert "no MIG support" in message


def test_media_extension_profiles_match_their_dotted_layout_name():
    labels = {**aks_agent_pool()["nodeLabels"], "nvidia.com/mig.config": "all-1g.10gb.me"}
    assert resource_violations("gpu-sharing-sane", AKS, aks_agent_pool(nodeLabels=labels)) == []


def test_gke_sharing_clients_over_maximum_fail():
    accelerator = {"count": 1, "type": "nvidia-l4", "gpuSharingConfig": {"gpuSharingStrategy": "MPS", "maxSharedClientsPerGpu": 40}}
    assert resource_violations("gpu-sharing-sane", GKE, gke_node_pool(accelerator))


def test_gke_partition_size_must_exist_on_the_gpu():
    good = {"count": 1, "type": "nvidia-tesla-a100", "gpuPartitionSize": "2g.10gb"}
    bad = {**good, "gpuPartitionSize": "3g.40gb"}
    a2 = {"machineType": "a2-highgpu-1g", "labels": {"gpupools.io/gpu": "A100-40GB", "gpupools.io/pool": "train"}}
    assert resource_violations("gpu-sharing-sane", GKE, gke_node_pool(good, **a2)) == []
    (message,) = resource_violations("gpu-sharing-sane", GKE, gke_node_pool(bad, **a2))
    assert "3g.40gb" in message and "A100-40GB" in message


def _bottlerocket(toml: str) -> dict:
    return launch_template(userData=base64.b64encode(toml.encode()).decode())


def test_bottlerocket_settings_are_read_from_user_data():
    ok = '[settings.kubelet-device-plugins.nvidia]\ndevice-sharing-strategy = "time-slicing"\n\n' \
         '[settings.kubelet-device-plugins.nvidia.time-slicing]\nreplicas = 4\n'
    assert resource_violations("gpu-sharing-sane", LT, _bottlerocket(ok)) == []
    assert resource_violations("gpu-sharing-sane", LT, _bottlerocket(ok.replace("replicas = 4", "replicas = 30")))
    mig = '[settings.kubelet-device-plugins.nvidia]\ndevice-partitioning-strategy = "mig"\n\n' \
          '[settings.kubelet-device-plugins.nvidia.mig.profile]\n"a100.80gb" = "3g.40gb"\n'
    assert resource_violations("gpu-sharing-sane", LT, _bottlerocket(mig)) == []
    (message,) = resource_violations("gpu-sharing-sane", LT, _bottlerocket(mig.replace("3g.40gb", "3g.20gb")))
    assert "3g.20gb" in message


# --------------------------------------------------------------------------------------------------------------------
# helm-release-pinned


def test_official_pinned_release_passes():
    assert resource_violations("helm-release-pinned", RELEASE, helm_release()) == []


@pytest.mark.parametrize("version", [None, "", "^26.0.0", "26.x", ">=1.0.0", "latest"])
def test_unpinned_versions_fail(version):
    props = helm_release(version=version) if version is not None else {k: v for k, v in helm_release().items() if k != "version"}
    (message,) = resource_violations("helm-release-pinned", RELEASE, props)
    assert "version" in message


def test_known_chart_from_another_repository_fails():
    (message,) = resource_violations("helm-release-pinned", RELEASE, helm_release(repositoryOpts={"repo": "https://charts.example.com/nvidia"}))
    assert "https://helm.ngc.nvidia.com/nvidia" in message


def test_unknown_chart_needs_an_https_repository():
    other = helm_release(chart="my-app", repositoryOpts={"repo": "http://charts.example.com"})
    assert resource_violations("helm-release-pinned", RELEASE, other)
    assert resource_violations("helm-release-pinned", RELEASE, helm_release(chart="my-app", repositoryOpts={"repo": "https://charts.example.com"})) == []


def test_every_gpupools_chart_is_in_the_official_repository_table():
    """One table of official repositories; every Chart gpupools installs must agree with it."""
    charts = []
    for module_name in ("gpupools.pools.software", "gpupools.monitoring.plan", "gpupools.fabric.software", "gpupools.fabric.computedomain"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        charts += [v for v in vars(module).values() if isinstance(v, Chart)]
    assert {"gpu-operator", "nvidia-device-plugin", "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"} <= {c.chart for c in charts}
    for chart in charts:
        if chart.chart.startswith("oci://"):  # an OCI chart is its whole address, with no separate repository
            registry, _, name = chart.chart.rpartition("/")
            assert OFFICIAL_REPOSITORIES.get(name) == registry and chart.repo == "", chart
        else:
            assert OFFICIAL_REPOSITORIES.get(chart.chart) == chart.repo, chart


# --------------------------------------------------------------------------------------------------------------------
# no-public-ssh


def test_node_groups_without_ssh_pass():
    assert resource_violations("no-public-ssh", EKS, eks_node_group()) == []
    assert resource_violations("no-public-ssh", AKS, aks_agent_pool()) == []


def test_eks_remote_access_open_to_the_world_fails():
    assert resource_violations("no-public-ssh", EKS, eks_node_group(remoteAccess={"ec2SshKey": "ops"}))
    limited = eks_node_group(remoteAccess={"ec2SshKey": "ops", "sourceSecurityGroupIds": ["sg-0bastion"]})
    assert resource_violations("no-public-ssh", EKS, limited) == []


def test_aks_node_public_ip_fails():
    assert resource_violations("no-public-ssh", AKS, aks_agent_pool(enableNodePublicIP=True))


def test_security_group_and_firewall_rules_open_to_the_world_fail():
    sg = {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["10.0.0.0/8"]}]}
    assert resource_violations("no-public-ssh", "aws:ec2/securityGroup:SecurityGroup", sg) == []
    sg["ingress"][0]["cidrBlocks"] = ["0.0.0.0/0"]
    assert resource_violations("no-public-ssh", "aws:ec2/securityGroup:SecurityGroup", sg)
    fw = {"direction": "INGRESS", "sourceRanges": ["0.0.0.0/0"], "allows": [{"protocol": "tcp", "ports": ["443"]}]}
    assert resource_violations("no-public-ssh", "gcp:compute/firewall:Firewall", fw) == []
    fw["allows"][0]["ports"] = ["20-25"]
    assert resource_violations("no-public-ssh", "gcp:compute/firewall:Firewall", fw)


# --------------------------------------------------------------------------------------------------------------------
# eks-imdsv2


def test_imdsv2_happy_path():
    assert resource_violations("eks-imdsv2", LT, launch_template()) == []
    assert resource_violations("eks-imdsv2", EKS, eks_node_group()) == []


def test_launch_template_allowing_imdsv1_fails():
    assert resource_violations("eks-imdsv2", LT, launch_template(metadataOptions={"httpTokens": "optional"}))
    assert resource_violations("eks-imdsv2", LT, {k: v for k, v in launch_template().items() if k != "metadataOptions"})


def test_gpu_node_group_without_launch_template_fails():
    props = {k: v for k, v in eks_node_group().items() if k != "launchTemplate"}
    assert resource_violations("eks-imdsv2", EKS, props)
    cpu = {**props, "amiType": "AL2023_x86_64_STANDARD", "instanceTypes": ["t3.large"]}
    assert resource_violations("eks-imdsv2", EKS, cpu)  # every node group by default, the system group too
    assert resource_violations("eks-imdsv2", EKS, cpu, config={"allNodeGroups": False}) == []


# --------------------------------------------------------------------------------------------------------------------
# gke-metadata-server, gke-shielded-nodes


def test_gke_hardening_happy_path():
    assert resource_violations("gke-metadata-server", GKE, gke_node_pool()) == []
    assert resource_violations("gke-shielded-nodes", GKE, gke_node_pool()) == []


def test_gke_pool_exposing_node_metadata_fails():
    assert resource_violations("gke-metadata-server", GKE, gke_node_pool(workloadMetadataConfig={"mode": "GCE_METADATA"}))


def test_gke_pool_without_secure_boot_fails():
    off = {"enableIntegrityMonitoring": True, "enableSecureBoot": False}
    assert resource_violations("gke-shielded-nodes", GKE, gke_node_pool(shieldedInstanceConfig=off))


def test_operator_driver_pools_are_exempt_from_secure_boot_unless_configured():
    off = {"enableIntegrityMonitoring": True, "enableSecureBoot": False}
    accelerator = {"count": 1, "type": "nvidia-l4", "gpuDriverInstallationConfig": {"gpuDriverVersion": "INSTALLATION_DISABLED"}}
    props = gke_node_pool(accelerator, shieldedInstanceConfig=off)
    assert resource_violations("gke-shielded-nodes", GKE, props) == []
    assert resource_violations("gke-shielded-nodes", GKE, props, config={"allowOperatorDriverPools": False})


# --------------------------------------------------------------------------------------------------------------------
# no-plaintext-secrets (judged where secrets are visible: `gpupools check`)


@pytest.fixture
def secrets_visible():
    from gpupools.policies.security import SECRETS_VISIBLE

    token = SECRETS_VISIBLE.set(True)
    yield
    SECRETS_VISIBLE.reset(token)


def grafana_release(password) -> dict:
    return helm_release(chart="kube-prometheus-stack", repositoryOpts={"repo": "https://prometheus-community.github.io/helm-charts"},
                        version="88.5.3", values={"grafana": {"adminPassword": password, "admin": {"passwordKey": "admin-password"}}})


def test_secret_grafana_password_passes(secrets_visible):
    assert resource_violations("no-plaintext-secrets", RELEASE, grafana_release("[secret]")) == []


def test_plain_grafana_password_fails(secrets_visible):
    (message,) = resource_violations("no-plaintext-secrets", RELEASE, grafana_release("hunter2"))
    assert "values.grafana.adminPassword" in message


def test_kubernetes_secret_with_plain_credential_fails(secrets_visible):
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "grafana-admin"},
              "stringData": {"admin-user": "admin", "admin-password": "[secret]"}}
    assert resource_violations("no-plaintext-secrets", "kubernetes:core/v1:Secret", secret) == []
    secret["stringData"]["admin-password"] = "hunter2"
    (message,) = resource_violations("no-plaintext-secrets", "kubernetes:core/v1:Secret", secret)
    assert "admin-password" in message


def test_secrets_policy_is_not_applicable_where_secrets_are_decrypted():
    """Under `pulumi preview` pulumi_policy hands validators decrypted secrets; the policy must not guess."""
    assert resource_violations("no-plaintext-secrets", RELEASE, grafana_release("hunter2")) == []


# --------------------------------------------------------------------------------------------------------------------
# gpu-workloads


def deployment(limits: dict | None = None, tolerations: list | None = None) -> dict:
    pod = {"containers": [{"name": "serve", "image": "nvcr.io/nvidia/tritonserver:25.01-py3",
                           "resources": {"limits": limits if limits is not None else {"nvidia.com/gpu": 1}}}],
           "nodeSelector": {"gpupools.io/pool": "infer"},
           "tolerations": tolerations if tolerations is not None else [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "serve"}, "spec": {"template": {"spec": pod}}}


DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def test_gpu_workload_happy_path():
    assert resource_violations("gpu-workloads", DEPLOYMENT, deployment()) == []
    assert resource_violations("gpu-workloads", DEPLOYMENT, deployment({"cpu": "500m"}, tolerations=[])) == []  # no GPU, no rule


def test_fractional_gpu_request_fails():
    (message,) = resource_violations("gpu-workloads", DEPLOYMENT, deployment({"nvidia.com/gpu": "0.5"}))
    assert "0.5" in message


def test_gpu_workload_without_toleration_fails():
    (message,) = resource_violations("gpu-workloads", DEPLOYMENT, deployment(tolerations=[]))
    assert "tolerate" in message


def test_cronjob_pod_spec_is_found():
    job = {"spec": {"jobTemplate": {"spec": {"template": {"spec": deployment(tolerations=[])["spec"]["template"]["spec"]}}}}}
    assert resource_violations("gpu-workloads", "kubernetes:batch/v1:CronJob", job)


# --------------------------------------------------------------------------------------------------------------------
# kubernetes-version-supported

VERSIONED = [("aws:eks/cluster:Cluster", "version"), ("aws:eks/nodeGroup:NodeGroup", "version"),
             ("azure-native:containerservice:ManagedCluster", "kubernetesVersion"), ("azure-native:containerservice:AgentPool", "orchestratorVersion"),
             ("gcp:container/cluster:Cluster", "minMasterVersion"), ("gcp:container/nodePool:NodePool", "version")]
AS_OF = {"asOf": "2026-11-23"}


@pytest.mark.parametrize("typ, field", VERSIONED)
def test_current_versions_pass(typ, field):
    assert resource_violations("kubernetes-version-supported", typ, {field: "1.35"}, AS_OF) == []
    assert resource_violations("kubernetes-version-supported", typ, {}, AS_OF) == []  # the service's default


@pytest.mark.parametrize("typ, field", VERSIONED)
def test_version_past_standard_support_is_flagged(typ, field):
    (message,) = resource_violations("kubernetes-version-supported", typ, {field: "1.33"}, AS_OF, name="c")
    assert "'c' runs Kubernetes 1.33, past" in message and "standard support since 2026-0" in message


def test_patch_and_vendor_suffixes_count_by_minor_and_unknown_minors_are_named():
    assert resource_violations("kubernetes-version-supported", "aws:eks/nodeGroup:NodeGroup", {"version": "1.36.1-eks-abc"}, AS_OF) == []
    assert resource_violations("kubernetes-version-supported", "gcp:container/cluster:Cluster", {"minMasterVersion": "1.35.2-gke.1000"}, AS_OF) == []
    (message,) = resource_violations("kubernetes-version-supported", "aws:eks/cluster:Cluster", {"version": "1.27"}, AS_OF)
    assert "does not list as supported" in message


def test_extended_support_end_is_reported_and_the_date_moves_the_verdict():
    (message,) = resource_violations("kubernetes-version-supported", "aws:eks/cluster:Cluster", {"version": "1.34"}, {"asOf": "2026-12-03"})
    assert "extended support, billed extra, ends 2027-12-02" in message
    assert resource_violations("kubernetes-version-supported", "aws:eks/cluster:Cluster", {"version": "1.34"}, {"asOf": "2026-12-01"}) == []


@pytest.mark.parametrize("chart, repo, version, floor", [
    ("gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "v1.0.0", "v25.3.1"),
    ("gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "v22.9.0", "v25.3.1"),
    ("gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "v24.6.2", "v25.3.1"),  # fixed CVE-2024-0132, not CVE-2025-23266
    ("gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "v25.3.0", "v25.3.1"),
    ("gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "v25.3.1-rc.1", "v25.3.1"),
    ("nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", "0.1.0", "0.15.0"),
    ("nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", "0.14.5", "0.15.0"),
])
def test_releases_older_than_their_advisories_allow_fail(chart, repo, version, floor):
    (message,) = resource_violations("helm-release-pinned", RELEASE, helm_release(chart=chart, version=version, repositoryOpts={"repo": repo}))
    assert f"is older than {floor}" in message


@pytest.mark.parametrize("chart, repo, version", [
    ("gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "v25.3.1"), ("gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "v26.7.0"),
    ("nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", "0.15.0"),
    ("nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", "0.20.0"),
])
def test_releases_at_or_above_the_minimum_pass(chart, repo, version):
    assert resource_violations("helm-release-pinned", RELEASE, helm_release(chart=chart, version=version, repositoryOpts={"repo": repo})) == []


def test_gpupools_defaults_meet_the_minimums():
    from gpupools.policies.helm import MINIMUM_VERSIONS, version_key
    from gpupools.pools.software import DEVICE_PLUGIN, GPU_OPERATOR

    for chart in (GPU_OPERATOR, DEVICE_PLUGIN):
        assert version_key(chart.default_version) >= version_key(MINIMUM_VERSIONS[chart.chart][0])

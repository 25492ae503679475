"""Ready before taking work: the four ways pools misbehaved on real clusters, each against the upstream code it relies
on, and the readiness gate (startup taint, Node Readiness Controller, reporter) against the pinned chart and CRD."""

from __future__ import annotations

import pytest
import yaml

from conftest import has_path, needs_reference, plan_of, stack_config, value_paths
from gpupools.autoscaling import cluster_autoscaler as ca
from gpupools.autoscaling import karpenter
from gpupools.autoscaling.choice import decide, requested_extended, why_not
from gpupools.autoscaling.scaleup import scale_ups
from gpupools.landing.jobs import job_manifest
from gpupools.clouds import aws
from gpupools.core.pools import NodeTemplate, Taint, toleration
from gpupools.core.sharing import DEPLOY_OPERANDS_LABEL, GPU_RESOURCE
from gpupools.health import readiness
from gpupools.pools.pods import gpu_limits, pod_spec
from gpupools.pools.planning import plan_pools
from gpupools.pools.software import GPU_OPERATOR, HAMI_CHART, NODE_READINESS_CHART, software_plan
from gpupools.validation.stack import validate_stack

RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
VGPU = {"mode": "vgpu", "replicas": 4}


def tolerates_gate(pod_tolerations: list[dict]) -> bool:
    """Whether a pod would ignore the gate (a workload must not: it would land on a node whose GPUs are not ready)."""
    return toleration(readiness.READINESS_TAINT) in pod_tolerations or any(
        t.get("operator") == "Exists" and t.get("key") in (None, "", readiness.READINESS_TAINT.key) for t in pod_tolerations)


def plans_of(config: dict):
    stack = validate_stack(config)
    return stack, plan_pools(stack)


# --------------------------------------------------------------------------------------------------------------------
# 1. Karpenter vGPU pools: no node that can never initialize


def registered(plan) -> dict[str, int]:
    """What the node's kubelet reports allocatable once HAMi's device plugin runs: the one resource it registers
    (Project-HAMi/HAMi pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go, Register:
    `RegisterRequest{ResourceName: plugin.rm.Resource()}`, the chart's resourceName nvidia.com/gpu)."""
    return {GPU_RESOURCE: plan.hardware.gpus_per_node * plan.mechanism.units_per_gpu}


def initialization_blocker(nodeclaim_requests: dict[str, int], allocatable: dict[str, int]) -> str | None:
    """kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/initialization.go, RequestedResourcesRegistered:
    every non-zero request of the NodeClaim must be non-zero in the node's allocatable, with no timeout."""
    for name, quantity in nodeclaim_requests.items():
        if quantity and not allocatable.get(name):
            return f"Resource {name!r} was requested but not registered"
    return None


def vgpu_pods(stack, plan) -> list[dict]:
    """The Job `gpupools workload` prints, and the shapes users add: a memory share, an amount, a compute share."""
    return [pod_spec(stack, plan, {GPU_RESOURCE: 1}, "img")] + [pod_spec(stack, plan, gpu_limits(plan, 1, **kw), "img") for kw in
            ({}, {"gpu_memory": "25%"}, {"gpu_memory": "8Gi"}, {"gpu_cores": 30}, {"gpu_memory": "4Gi", "gpu_cores": 50})]


@pytest.mark.parametrize("pool", [{}, {"minNodes": 1, "sharing": {**VGPU, "memoryPerPod": "6Gi"}}])
def test_every_node_karpenter_starts_for_a_vgpu_pod_can_initialize(pool):
    """A pod Karpenter would start a node for (it fits the NodePool + NodeOverlay picture) asks only for what the node
    will register; otherwise the NodeClaim stays uninitialized and the node is never consolidated
    (pkg/controllers/state/statenode.go ValidateNodeDisruptable: "node isn't initialized")."""
    config = stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.12xlarge", "maxNodes": 3, "sharing": VGPU, **pool}])
    stack, (plan,) = plans_of(config)
    template = karpenter.node_template(plan)
    pods = vgpu_pods(stack, plan)
    launched = [pod for pod in pods if why_not(template, pod) is None]
    assert pods[0] in launched, "a pod asking for vGPUs only must still make Karpenter start a node"
    for pod in launched:
        assert initialization_blocker(requested_extended(pod), registered(plan)) is None, pod["containers"][0]["resources"]
    # The scale-up check holds for the pool's own Job; one that names memory (memoryPerPod) is judged honestly: it
    # wakes nothing, so validation asks such a pool to keep a node.
    assert scale_ups(stack)[0].from_zero == (plan.sharing.memory_per_pod is None)


def test_the_check_fails_for_an_overlay_that_advertises_hamis_resources():
    """The model above catches the earlier overlay, which also advertised nvidia.com/gpumem and nvidia.com/gpucores."""
    stack, (plan,) = plans_of(stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.12xlarge", "maxNodes": 3, "sharing": VGPU}]))
    template = karpenter.node_template(plan)
    wider = NodeTemplate(template.autoscaler, template.source, template.labels, template.taints, plan.autoscaler_resources)
    blocked = [initialization_blocker(requested_extended(pod), registered(plan)) for pod in vgpu_pods(stack, plan) if why_not(wider, pod) is None]
    assert any(b and "gpumem" in b for b in blocked)


# --------------------------------------------------------------------------------------------------------------------
# 2. GKE + GPU Operator + HAMi: system-node-critical pods need a quota in HAMi's namespace


def test_gke_hami_namespace_gets_the_critical_pods_quota():
    """HAMi hard-codes priorityClassName system-node-critical (charts/hami/templates/scheduler/deployment.yaml,
    device-plugin/daemonsetnvidia.yaml); no values key sets it, so the namespace needs the quota GKE asks for."""
    stack, plans = plans_of(stack_config("gcp", gpuSoftware={"installer": "gpu-operator"},
                                         pools=[{"name": "infer", "instanceType": "g2-standard-8", "maxNodes": 2, "sharing": VGPU}]))
    objects = software_plan(stack, plans).objects
    quotas = {o["metadata"]["namespace"]: o for o in objects if o["kind"] == "ResourceQuota"}
    assert set(quotas) == {GPU_OPERATOR.namespace, HAMI_CHART.namespace}
    scope = quotas[HAMI_CHART.namespace]["spec"]["scopeSelector"]["matchExpressions"][0]
    assert scope["scopeName"] == "PriorityClass" and "system-node-critical" in scope["values"]
    # Before the namespace's workloads: the quota is an object, applied before any release.
    assert [o["kind"] for o in objects].index("ResourceQuota") < len(objects)
    hami = yaml.safe_load((needs_reference() / "hami" / "values.yaml").read_text())
    assert not has_path(hami, ("devicePlugin", "priorityClassName")) and not has_path(hami, ("scheduler", "priorityClassName"))


def test_other_clouds_get_no_quota():
    for cloud, keys in (("aws", {}), ("azure", {})):
        stack, plans = plans_of(stack_config(cloud, pools=[{"name": "infer", "instanceType": {"aws": "g5.2xlarge", "azure": "Standard_NC8as_T4_v3"}[cloud],
                                                             "maxNodes": 2, "sharing": VGPU}], **keys))
        assert not [o for o in software_plan(stack, plans).objects if o["kind"] == "ResourceQuota"]


# --------------------------------------------------------------------------------------------------------------------
# 3. cluster-autoscaler MIG pools: the node counts as starting until MIG is set up, so no second node starts


MIG_CA = stack_config("aws", autoscaler="cluster-autoscaler", pools=[
    {"name": "train", "instanceType": "p4de.24xlarge", "maxNodes": 2, "sharing": {"mode": "mig", "migProfile": "1g.10gb"}}])


def ca_filters_out(node_taints: list[Taint], flagged: tuple[str, ...]) -> bool:
    """kubernetes/autoscaler cluster-autoscaler/utils/taints/taints.go FilterOutNodesWithStartupTaints: a Ready node
    carrying a startup taint is treated as unready (upcoming while younger than max-node-startup-time), so pending pods
    are simulated on it instead of on a new node."""
    return any(ca.is_startup_taint(t.key, flagged) for t in node_taints)


def test_a_mig_node_counts_as_starting_until_its_gpu_stack_is_validated():
    stack, (plan,) = plans_of(MIG_CA)
    assert plan.startup_taints == (readiness.READINESS_TAINT,)
    # The node group registers its nodes with the taint (EKS node-group taints reach the kubelet).
    args = aws.node_group_args(plan, "c", "r", ["s"], "lt", "1", None, ca.node_labels(plan))
    assert {"key": readiness.READINESS_TAINT.key, "value": "pending", "effect": "NO_SCHEDULE"} in args["taints"]
    # The autoscaler is told the key, exactly as the chart turns extraArgs into flags.
    values = plan_of(MIG_CA).get(RELEASE, "cluster-autoscaler").inputs["values"]
    flagged = tuple(v for k, v in values["extraArgs"].items() if k.split("_")[0] == "startup-taint")
    assert flagged == (readiness.READINESS_TAINT.key,)
    node = list(plan.taints) + [readiness.READINESS_TAINT]
    assert ca_filters_out(node, flagged)
    # Without the flag the node, Ready but without the pending pods' nvidia.com/mig-1g.10gb yet, would look full.
    assert not ca_filters_out(node, ())


def test_scale_up_check_holds_with_the_startup_taint_on_the_template():
    """The template carries the node group's taints (aws_manager.go appends DescribeNodegroup's), and SanitizeTaints
    drops the startup one: the pod need not tolerate it. Without the flag it would stay, and no pod would fit."""
    stack, (plan,) = plans_of(MIG_CA)
    template = ca.node_template(plan)
    assert readiness.READINESS_TAINT in template.startup_taints and readiness.READINESS_TAINT not in template.taints
    pod = pod_spec(stack, plan, gpu_limits(plan, 1), "img")
    assert not tolerates_gate(pod["tolerations"])
    assert decide(plan.name, template, pod, plan.mechanism.resource, plan.units_per_node).from_zero
    kept, _ = ca.sanitize_taints(list(plan.taints + plan.startup_taints), ())
    unflagged = NodeTemplate(template.autoscaler, template.source, template.labels, kept, template.allocatable)
    assert "does not tolerate the taint readiness.k8s.io/" in (why_not(unflagged, pod) or "")


def test_karpenter_lists_the_taint_as_a_startup_taint_and_still_scales_from_zero():
    jsonschema = pytest.importorskip("jsonschema")
    from test_autoscaling import crd_schema

    config = stack_config("aws", pools=[{"name": "train", "instanceType": "p4de.24xlarge", "maxNodes": 2,
                                         "sharing": {"mode": "mig", "migProfile": "1g.10gb"}}])
    stack, (plan,) = plans_of(config)
    obj = plan_of(config).get(NODE_POOL, "nodepool-gpupools-train").inputs
    body = {k: obj[k] for k in ("apiVersion", "kind", "metadata", "spec")}
    schema = crd_schema(needs_reference(), "karpenter.sh_nodepools.yaml", "v1")
    jsonschema.validate(body, schema)
    assert obj["spec"]["template"]["spec"]["startupTaints"] == [{"key": readiness.READINESS_TAINT.key, "value": "pending", "effect": "NoSchedule"}]
    # pkg/scheduling/taints.go: readiness.k8s.io/ keys are known-ephemeral too, so Karpenter never waits on a node
    # for a pod to tolerate them.
    assert readiness.READINESS_TAINT.key.startswith("readiness.k8s.io/")
    template = karpenter.node_template(plan)
    assert template.startup_taints == (readiness.READINESS_TAINT,) and readiness.READINESS_TAINT not in template.taints
    assert scale_ups(stack)[0].from_zero


# --------------------------------------------------------------------------------------------------------------------
# 4. Bottlerocket: no GPU Operator operand at all


def test_bottlerocket_nodes_turn_every_operand_off():
    """NVIDIA/gpu-operator controllers/state_manager.go: hasOperandsDisabled is true only for the value "false", and
    then updateGPUStateLabels removes every nvidia.com/gpu.deploy.* label, so no operand DaemonSet selects the node."""
    stack, plans = plans_of(stack_config("aws", pools=[
        {"name": "br", "instanceType": "g6.xlarge", "maxNodes": 2, "os": "bottlerocket"},
        {"name": "al", "instanceType": "g6.xlarge", "maxNodes": 2}]))
    br, al = plans
    assert br.labels[DEPLOY_OPERANDS_LABEL] == "false" and DEPLOY_OPERANDS_LABEL not in al.labels
    # No readiness gate there: nothing would ever validate those nodes, and the rule's selector skips them.
    assert br.startup_taints == () and al.startup_taints == (readiness.READINESS_TAINT,)
    assert {"key": DEPLOY_OPERANDS_LABEL, "operator": "NotIn", "values": ["false"]} in readiness.NODE_SELECTOR["matchExpressions"]


def test_the_plan_names_each_pools_gpu_metrics_exporter():
    from typer.testing import CliRunner
    from gpupools.cli.main import app

    result = CliRunner().invoke(app, ["plan", "--stack", "dev-aws"])
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    batch = text.split("pool batch creates", 1)[1].split(" price ", 1)[0]
    assert ("GPU metrics dcgm-exporter chart 4.8.2 (release dcgm-exporter): the GPU Operator's operands, its exporter included, "
            "stay off these nodes") in batch
    infer = text.split("pool infer creates", 1)[1].split(" price ", 1)[0]
    assert "GPU metrics the GPU Operator's dcgm-exporter" in infer and f"starts with taint {readiness.READINESS_TAINT.key}" in infer


# --------------------------------------------------------------------------------------------------------------------
# The gate itself


def cel_failures(obj, schema: dict, path: str = "") -> list[str]:
    """`crd_rule_failures` with the Kubernetes CEL string library's split(), which the NodeReadinessRule CRD uses and
    cel-python lacks (transition rules, needing the old object, skipped)."""
    celpy = pytest.importorskip("celpy")
    from celpy import celtypes

    def split(text, sep):
        return celtypes.ListType([celtypes.StringType(p) for p in str(text).split(str(sep))])

    import sys

    limit = sys.getrecursionlimit()
    env = celpy.Environment()  # raises the interpreter's recursion limit for good; put it back for the tests after this one
    sys.setrecursionlimit(limit)
    failures = []
    for rule in schema.get("x-kubernetes-validations", []):
        if "oldSelf" in rule["rule"]:
            continue
        program = env.program(env.compile(rule["rule"]), functions={"split": split})
        if not bool(program.evaluate({"self": celpy.json_to_cel(obj)})):
            failures.append(f"{path or '/'}: {rule.get('message', rule['rule'])}")
    if isinstance(obj, dict):
        for key, value in obj.items():
            sub = schema.get("properties", {}).get(key)
            if sub:
                failures += cel_failures(value, sub, f"{path}/{key}")
    elif isinstance(obj, list) and "items" in schema:
        for i, value in enumerate(obj):
            failures += cel_failures(value, schema["items"], f"{path}/{i}")
    return failures


def test_node_readiness_rule_against_the_pinned_crd():
    jsonschema = pytest.importorskip("jsonschema")
    crd = yaml.safe_load((needs_reference() / "node-readiness-controller" / "crds" / "nodereadinessrules.readiness.node.x-k8s.io.yaml").read_text())
    schema = next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    rule = readiness.readiness_rule()
    # The chart's templates/nodereadinessrules.yaml: name -> metadata.name, the rest -> spec.
    obj = {"apiVersion": "readiness.node.x-k8s.io/v1alpha1", "kind": "NodeReadinessRule", "metadata": {"name": rule["name"]},
           "spec": {k: v for k, v in rule.items() if k != "name"}}
    jsonschema.validate(obj, schema)
    assert cel_failures(obj, schema) == []
    # The cluster-autoscaler prefix cannot be used: the controller manages readiness.k8s.io/ keys only.
    bad = {**obj, "spec": {**obj["spec"], "taint": {"key": "startup-taint.cluster-autoscaler.kubernetes.io/gpu", "effect": "NoSchedule"}}}
    assert any("readiness.k8s.io/" in f for f in cel_failures(bad, schema))


def test_node_readiness_controller_values_exist_in_the_pinned_chart():
    upstream = yaml.safe_load((needs_reference() / "node-readiness-controller" / "values.yaml").read_text())
    for create in (True, False):
        values = readiness.controller_values(create)
        missing = [".".join(p) for p in value_paths(values, ("nodeSelector",)) if not has_path(upstream, p)]
        assert missing == []
    # The chart fails to render a rule without a nodeSelector (templates/nodereadinessrules.yaml).
    assert all(r.get("nodeSelector") for r in readiness.controller_values(True)["nodeReadinessRules"])


def test_gated_eks_stack_installs_controller_reporter_and_tolerations():
    stack, plans = plans_of(stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3},
                                                         {"name": "v", "instanceType": "g5.12xlarge", "maxNodes": 2, "sharing": VGPU}]))
    software = software_plan(stack, plans)
    releases = {r.name: r for r in software.releases}
    assert releases[NODE_READINESS_CHART.release].chart.chart == readiness.CHART_REF and releases[NODE_READINESS_CHART.release].version == "0.5.0"
    gate = readiness.tolerations()[0]
    operator = releases[GPU_OPERATOR.release].values
    assert gate in operator["daemonsets"]["tolerations"] and gate in operator["node-feature-discovery"]["worker"]["tolerations"]
    assert gate in releases[HAMI_CHART.release].values["devicePlugin"]["tolerations"]
    gpu_operator = yaml.safe_load((needs_reference() / "gpu-operator" / "values.yaml").read_text())
    assert has_path(gpu_operator, ("validator", "plugin", "env"))
    assert operator["validator"]["plugin"]["env"] == [{"name": "WITH_WORKLOAD", "value": "false"}]
    (ds,) = [o for o in software.objects if o["kind"] == "DaemonSet"]
    spec = ds["spec"]["template"]["spec"]
    assert gate in spec["tolerations"]
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    # The validator's status file (NVIDIA/gpu-operator cmd/nvidia-validator/main.go: pluginStatusFile = "plugin-ready"
    # under /run/nvidia/validations), served by the file server beside the reporter.
    assert env["CHECK_ENDPOINT"].endswith("/plugin-ready") and env["CONDITION_TYPE"] == readiness.readiness_rule()["conditions"][0]["type"]
    assert spec["volumes"][0]["hostPath"]["path"] == "/run/nvidia/validations"
    # Workloads never tolerate the gate.
    for plan in plans:
        job = job_manifest(stack, plan, "img")["spec"]["template"]["spec"]
        assert not tolerates_gate(job["tolerations"])
        assert toleration(readiness.READINESS_TAINT) not in job["tolerations"]


@pytest.mark.parametrize("config", [
    stack_config("azure"), stack_config("gcp"), stack_config("gcp", gpuSoftware={"installer": "gpu-operator"}),
    stack_config("aws", gpuSoftware={"installer": "device-plugin"}), stack_config("aws", health={"readinessGate": False}),
])
def test_no_gate_where_nothing_validates_or_the_autoscaler_cannot_know_the_taint(config):
    stack, plans = plans_of(config)
    assert all(p.startup_taints == () for p in plans)
    assert NODE_READINESS_CHART.release not in {r.name for r in software_plan(stack, plans).releases}
    # AKS and GKE templates keep the pool's own taints only, so the check is unchanged there.
    for verdict in scale_ups(stack, plans):
        assert verdict.from_zero


def test_the_eks_node_group_with_the_startup_taint_is_what_the_api_takes():
    botocore = pytest.importorskip("botocore.session")
    from botocore.validate import ParamValidator

    stack, (plan,) = plans_of(MIG_CA)
    args = aws.node_group_args(plan, "c", "arn:aws:iam::1:role/r", ["s"], "lt", "1", None, ca.node_labels(plan))
    shape = botocore.get_session().get_service_model("eks").operation_model("CreateNodegroup").input_shape
    params = {"clusterName": "c", "nodegroupName": args["node_group_name"], "nodeRole": "r", "subnets": ["s"], "taints": args["taints"]}
    report = ParamValidator().validate(params, shape)
    assert not report.has_errors(), report.generate_report()
    assert all(t["effect"] in shape.members["taints"].member.members["effect"].enum for t in args["taints"])

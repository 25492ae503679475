"""Changing a pool's sharing must not replace its nodes where the cloud updates labels in place.

Two plans are compared: the node pool's inputs may differ only in labels; the device-plugin config differs.
"""

from __future__ import annotations

import pytest

from conftest import POOL_RESOURCE, plan_of, stack_config

INSTANCE = {"aws": "g5.2xlarge", "azure": "Standard_NC8as_T4_v3", "gcp": "g2-standard-8"}
LABELS_FIELD = {"aws": ("labels",), "azure": ("nodeLabels",), "gcp": ("nodeConfig", "labels")}


def pool_inputs(cloud: str, sharing: dict, **keys) -> tuple[dict, dict]:
    plan = plan_of(stack_config(cloud, pools=[{"name": "infer", "instanceType": INSTANCE[cloud], "maxNodes": 3, "sharing": sharing}], **keys))
    inputs = plan.get(POOL_RESOURCE[cloud], "infer").inputs
    configmaps = {r.name: r.inputs.get("data") for r in plan.of_type("kubernetes:core/v1:ConfigMap")}
    return inputs, configmaps


def without_labels(cloud: str, inputs: dict) -> dict:
    import copy

    out = copy.deepcopy(inputs)
    node = out
    *parents, last = LABELS_FIELD[cloud]
    for key in parents:
        node = node[key]
    node.pop(last)
    return out


CHANGES = [
    ({"mode": "time-slicing", "replicas": 4}, {"mode": "time-slicing", "replicas": 8}),
    ({"mode": "time-slicing", "replicas": 4}, {"mode": "mps", "replicas": 4}),
    ({"mode": "none"}, {"mode": "mps", "replicas": 2}),
]


@pytest.mark.parametrize("cloud, keys", [("aws", {"autoscaler": "cluster-autoscaler"}), ("azure", {}), ("gcp", {"gpuSoftware": {"installer": "gpu-operator"}})])
@pytest.mark.parametrize("before, after", CHANGES)
def test_sharing_change_touches_only_labels_and_the_config_map(cloud, keys, before, after):
    old, old_cm = pool_inputs(cloud, before, **keys)
    new, new_cm = pool_inputs(cloud, after, **keys)
    assert without_labels(cloud, old) == without_labels(cloud, new)
    assert old != new  # the label that selects the device-plugin config moved
    assert old_cm != new_cm


def test_gke_own_sharing_is_a_pool_setting_and_changes_the_accelerator():
    """GKE's gpuSharingConfig is immutable: docs/sharing.md warns that such a change replaces the pool."""
    old, _ = pool_inputs("gcp", {"mode": "time-slicing", "replicas": 4})
    new, _ = pool_inputs("gcp", {"mode": "time-slicing", "replicas": 8})
    assert old["nodeConfig"]["guestAccelerators"] != new["nodeConfig"]["guestAccelerators"]


def test_karpenter_sharing_change_moves_only_nodepool_labels_and_overlay():
    """Under Karpenter the same change edits the NodePool's template labels and the NodeOverlay; Karpenter then
    replaces the pool's nodes gracefully (drift), which docs/autoscaling.md states."""
    def objects(sharing: dict) -> tuple[dict, dict]:
        plan = plan_of(stack_config("aws", pools=[{"name": "infer", "instanceType": "g5.2xlarge", "maxNodes": 3, "sharing": sharing}]))
        pool = plan.get("kubernetes:karpenter.sh/v1:NodePool", "nodepool-gpupools-infer").inputs
        overlay = plan.get("kubernetes:karpenter.sh/v1alpha1:NodeOverlay", "nodeoverlay-gpupools-infer").inputs
        return pool, overlay

    old_pool, old_overlay = objects({"mode": "time-slicing", "replicas": 4})
    new_pool, new_overlay = objects({"mode": "time-slicing", "replicas": 8})
    assert old_overlay["spec"]["capacity"] == {"nvidia.com/gpu": "4"} and new_overlay["spec"]["capacity"] == {"nvidia.com/gpu": "8"}
    old_labels, new_labels = old_pool["spec"]["template"].pop("metadata"), new_pool["spec"]["template"].pop("metadata")
    assert old_pool == new_pool
    assert old_labels["labels"]["nvidia.com/device-plugin.config"] == "time-slicing-4"
    assert new_labels["labels"]["nvidia.com/device-plugin.config"] == "time-slicing-8"

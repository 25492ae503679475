"""A pool's own taints and the tolerations a team declares for them, as Kubernetes validates them.

Below gpupools.stack.config, which nests these models in `Pool.taints` and `Team.tolerations` and takes the label
key and value forms from here (a Kubernetes label key is a qualified name, as a taint's key is).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

# A node taint as Kubernetes validates one (kubernetes pkg/apis/core/validation/validation.go, validateNodeTaints): the
# key a qualified name (ValidateLabelName), the value a label value (IsValidLabelValue), the effect one of three
# (validateTaintEffect). A qualified name's prefix is a DNS subdomain of at most 253 characters, its name at most 63.
QUALIFIED_NAME = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
LABEL_VALUE_FORM = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"
PATTERNS = {QUALIFIED_NAME: "a Kubernetes qualified name such as example.com/dedicated ([prefix/]name, name at most 63 characters)",
            LABEL_VALUE_FORM: "a label value (at most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric)"}
QualifiedName = Annotated[str, StringConstraints(pattern=QUALIFIED_NAME, min_length=1, max_length=253 + 1 + 63)]
LabelValue = Annotated[str, StringConstraints(pattern=LABEL_VALUE_FORM, max_length=63)]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
# Taints per pool beside the GPU taint: a Kueue ResourceFlavor carries them as spec.nodeTaints, which holds at most 8
# (kueue v0.19.2 config/components/crd/bases/kueue.x-k8s.io_resourceflavors.yaml, nodeTaints maxItems: 8).
MAX_POOL_TAINTS = 8


class Model(BaseModel):
    # The settings of every stack model (gpupools.stack.config.Model, which sits above this module; a test keeps the two
    # equal): strict, no unknown keys, camelCase aliases, built when first used.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, strict=True,
                              allow_inf_nan=False, defer_build=True)


class PoolTaint(Model):
    """A taint a pool's nodes carry beside the GPU taint: only pods that tolerate it land there (a team's `tolerations`)."""

    key: QualifiedName
    value: LabelValue = ""
    effect: TaintEffect


def distinct_taint_keys(values: list[PoolTaint]) -> list[PoolTaint]:
    # Kubernetes refuses two taints of one key and effect; gpupools one key twice at all: Gcore's pool taints are a map
    # of key to "value:Effect" (gcore SDK 0.59.0 PoolCreateParams.taints: Dict[str, str]), and cluster-autoscaler's
    # node-template tags hold one value per key (k8s.io/cluster-autoscaler/node-template/taint/<key>).
    keys = [t.key for t in values]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise PydanticCustomError("taints", "lists the key {names} more than once; a pool takes one taint per key", {"names": ", ".join(twice)})
    return values


class Toleration(Model):
    """A team's toleration of a pool's taint, as Kubernetes takes it (k8s.io/api core/v1 Toleration; kubernetes
    pkg/apis/core/validation/validation.go, ValidateTolerations: `Exists` takes no value, an empty effect matches every
    effect). The key is required: a toleration of every taint would also tolerate gpupools' readiness gate."""

    key: QualifiedName
    operator: Literal["Equal", "Exists"] = "Equal"
    value: LabelValue | None = None
    effect: TaintEffect | None = None

    @model_validator(mode="after")
    def _exists_has_no_value(self) -> "Toleration":
        if self.operator == "Exists" and self.value is not None:
            raise PydanticCustomError("toleration", "operator Exists takes no value (it tolerates every value of the key); drop value")
        return self

    def as_kubernetes(self) -> dict:
        out: dict = {"key": self.key, "operator": self.operator}
        if self.operator == "Equal":
            out["value"] = self.value or ""
        if self.effect is not None:
            out["effect"] = self.effect
        return out

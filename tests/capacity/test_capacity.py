"""Where pools' nodes come from: the capacity list checked per cloud and autoscaler, Karpenter's objects and the
Kueue objects it adds against the pinned CRDs and their CEL rules, quotas per flavor, and what the plan says."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import ROOT, crd_rule_failures, needs_reference, plan_of, stack_config
from gpupools.capacity import sources as capacity
from gpupools.pools.planning import capacity_report, plan_pools
from gpupools.queues import kueue
from gpupools.queues.engine import quota_plan
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
CRG = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-capacity/providers/Microsoft.Compute/capacityReservationGroups/crg-a100"


def pool(cloud: str = "aws", **fields) -> dict:
    instance = {"aws": "p4d.24xlarge", "gcp": "a3-highgpu-8g", "azure": "Standard_NC24ads_A100_v4"}[cloud]
    return {"name": "big", "instanceType": instance, "maxNodes": 4, **fields}


def reservation(**fields) -> dict:
    return {"reservation": {"nodes": 2, **fields}}


BLOCK = reservation(id="cr-0123456789abcdef0", kind="capacity-block", zones=["eu-central-1a"])
ODCR = reservation(id="cr-0fedcba9876543210", zones=["eu-central-1b"])


# --------------------------------------------------------------------------------------------------------------------
# Bad input: one line naming the field


BAD = [
    # shape, on every cloud
    (stack_config("aws", pools=[pool(capacity=["cheap"])]), "pools[0].capacity[0]", "input should be 'on-demand'"),
    (stack_config("aws", pools=[pool(capacity=[{"reservation": {"id": "cr-1"}}])]), "pools[0].capacity[0].reservation.nodes", "required"),
    (stack_config("aws", pools=[pool(capacity=[{"flexStart": {}, "queued": {}}])]), "pools[0].capacity[0]", "exactly one of"),
    (stack_config("aws", pools=[pool(capacity=[{"spare": {}}])]), "pools[0].capacity[0].spare", "allowed keys: reservation, flexStart, queued"),
    (stack_config("aws", pools=[pool(spot=True, capacity=["spot"])]), "pools[0].spot", "list spot in capacity instead"),
    (stack_config("aws", pools=[pool(capacity=["on-demand", "on-demand"])]), "pools[0].capacity[1]", "listed twice"),
    (stack_config("aws", pools=[pool(capacity=["on-demand", BLOCK])]), "pools[0].capacity[1]", "would never be used"),
    (stack_config("aws", pools=[pool(zones=["eu-central-1b"], capacity=[BLOCK, "on-demand"])]), "pools[0].capacity[0].reservation.zones[0]",
     "not one of the pool's zones"),
    # EKS
    (stack_config("aws", pools=[pool(capacity=[reservation(id="odcr-1"), "on-demand"])]), "pools[0].capacity[0].reservation.id",
     "not an EC2 capacity reservation id"),
    (stack_config("aws", pools=[pool(capacity=[reservation(id="cr-1", tags={"a": "b"})])]), "pools[0].capacity[0].reservation.id",
     "id selects one reservation by itself"),
    (stack_config("aws", pools=[pool(capacity=[reservation()])]), "pools[0].capacity[0].reservation", "names no reservation"),
    (stack_config("aws", pools=[pool(capacity=["on-demand", "spot"])]), "pools[0].capacity", "Karpenter always tries reserved, then spot"),
    (stack_config("aws", pools=[pool(capacity=["flex-start"])]), "pools[0].capacity[0]", "GKE capacity kind"),
    (stack_config("aws", pools=[pool(minNodes=1, capacity=[BLOCK])]), "pools[0].minNodes", "Capacity Block runs only between"),
    (stack_config("aws", autoscaler="cluster-autoscaler", pools=[pool(capacity=[BLOCK, "on-demand"])]), "pools[0].capacity",
     "Capacity Block node group runs on the block only"),
    (stack_config("aws", autoscaler="cluster-autoscaler", pools=[pool(capacity=[reservation(id="cr-1", kind="capacity-block")])]),
     "pools[0].capacity[0].reservation.zones", "subnets in the block's zone"),
    (stack_config("aws", autoscaler="cluster-autoscaler", pools=[pool(capacity=[reservation(tags={"team": "ml"})])]),
     "pools[0].capacity[0].reservation.tags", "need the reservation's id"),
    (stack_config("aws", autoscaler="cluster-autoscaler", pools=[pool(capacity=[ODCR, "spot"])]), "pools[0].capacity", "spot capacity cannot fall back"),
    (stack_config("aws", autoscaler="cluster-autoscaler", pools=[pool(capacity=["spot", "on-demand"])]), "pools[0].capacity", "one capacity type"),
    # GKE
    (stack_config("gcp", pools=[pool("gcp", capacity=[reservation(id="Res_1", zones=["us-central1-a"])])]), "pools[0].capacity[0].reservation.id",
     "not a GKE reservation name"),
    (stack_config("gcp", pools=[pool("gcp", capacity=[reservation(id="res-1")])]), "pools[0].capacity[0].reservation.zones", "zonal"),
    (stack_config("gcp", pools=[pool("gcp", capacity=[reservation(id="res-1", zones=["us-central1-a"]), "on-demand"])]), "pools[0].capacity",
     "consumes one named reservation"),
    (stack_config("gcp", pools=[pool("gcp", capacity=["any-reservation"])]), "pools[0].capacity", "[any-reservation, on-demand]"),
    (stack_config("gcp", pools=[pool("gcp", capacity=["flex-start", "spot"])]), "pools[0].capacity[0]", "pool of its own"),
    (stack_config("gcp", pools=[pool("gcp", minNodes=1, capacity=["flex-start"])]), "pools[0].minNodes", "starts the pool at zero"),
    (stack_config("gcp", pools=[pool("gcp", capacity=[{"flexStart": {"maxRunDuration": "8d"}}])]),
     "pools[0].capacity[0].flexStart.maxRunDuration", "at most 7d"),
    (stack_config("gcp", pools=[pool("gcp", capacity=[{"flexStart": {"maxRunDuration": "1w"}}])]),
     "pools[0].capacity[0].flexStart.maxRunDuration", "a duration such as 3600s"),
    (stack_config("gcp", cluster={"name": "c", "location": "us-central1", "kubernetesVersion": "1.32"}, pools=[pool("gcp", capacity=["flex-start"])]),
     "cluster.kubernetesVersion", "needs GKE 1.33"),
    (stack_config("gcp", pools=[pool("gcp", capacity=["queued"])]), "pools[0].capacity", "Kueue's ProvisioningRequest admission check"),
    (stack_config("gcp", quotas="resourcequota", teams=[{"name": "ml", "gpus": 8}], pools=[pool("gcp", capacity=["queued"])]), "pools[0].capacity",
     "set gpupools:quotas: kueue"),
    (stack_config("gcp", pools=[pool("gcp", capacity=[reservation(id="res-1", zones=["us-central1-a"], kind="odcr")])]),
     "pools[0].capacity[0].reservation.kind", "EKS reservations only"),
    # AKS
    (stack_config("azure", pools=[pool("azure", capacity=[reservation(id="crg-a100"), "on-demand"])]), "pools[0].capacity[0].reservation.id",
     "not a capacity reservation group resource ID"),
    (stack_config("azure", pools=[pool("azure", capacity=[reservation(id=CRG), "spot"])]), "pools[0].capacity", "do not take Spot VMs"),
    (stack_config("azure", pools=[pool("azure", capacity=[reservation(id=CRG)])]), "pools[0].capacity", "then on-demand"),
    (stack_config("azure", pools=[pool("azure", instanceType="Standard_ND96isr_H100_v5", capacity=[reservation(id=CRG), "on-demand"])]),
     "pools[0].instanceType", "do not support ND-series"),
    (stack_config("azure", pools=[pool("azure", zones=["1"], capacity=[reservation(id=CRG), "on-demand"])]), "pools[0].zones",
     "regional group are deployed without zones"),
    (stack_config("azure", pools=[pool("azure", capacity=["spot", "on-demand"])]), "pools[0].capacity", "one priority"),
]


@pytest.mark.parametrize("config, path, words", BAD)
def test_bad_capacity_is_one_line_naming_the_field(config, path, words):
    with pytest.raises(ConfigError) as caught:
        validate_stack(config)
    assert any(p.path == path and words in p.message for p in caught.value.problems), caught.value.problems
    assert all("\n" not in str(p) for p in caught.value.problems)


def test_cli_exits_2_with_one_line(stack_file):
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    path = stack_file(stack_config("aws", pools=[pool(capacity=[reservation(id="odcr-1"), "on-demand"])]))
    result = CliRunner().invoke(app, ["plan", "--config", str(path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == ["error: pools[0].capacity[0].reservation.id: 'odcr-1' is not an EC2 capacity reservation id such as cr-0123456789abcdef0"]


GOOD = [
    stack_config("aws", pools=[pool(capacity=[BLOCK, "on-demand"])]),
    stack_config("aws", pools=[pool(capacity=[reservation(tags={"team": "ml"}, ownerId="123456789012"), ODCR, "spot", "on-demand"])]),
    stack_config("aws", autoscaler="cluster-autoscaler", pools=[pool(capacity=[BLOCK])]),
    stack_config("aws", autoscaler="cluster-autoscaler", pools=[pool(capacity=[ODCR, "on-demand"]),
                                                                 pool(name="only", capacity=[reservation(id="cr-0aaaaaaaaaaaaaaaa", zones=["eu-central-1b"])])]),
    stack_config("gcp", pools=[pool("gcp", zones=["us-central1-a"], capacity=[reservation(id="res-1", zones=["us-central1-a"])])]),
    stack_config("gcp", pools=[pool("gcp", capacity=["any-reservation", "on-demand"]), pool("gcp", name="flex", capacity=[{"flexStart": {"maxRunDuration": "6h"}}])]),
    stack_config("azure", pools=[pool("azure", capacity=[reservation(id=CRG, zones=["1", "2"]), "on-demand"])]),
    stack_config("azure", pools=[pool("azure", capacity=["spot"])]),
]


@pytest.mark.parametrize("config", GOOD)
def test_supported_lists_are_accepted(config):
    validate_stack(config)


def test_capacity_spot_means_what_spot_true_means():
    one = plan_of(stack_config("azure", pools=[pool("azure", capacity=["spot"])]))
    two = plan_of(stack_config("azure", pools=[pool("azure", spot=True)]))
    pool_type = "azure-native:containerservice:AgentPool"
    assert one.get(pool_type, "big").inputs == two.get(pool_type, "big").inputs
    assert one.get(pool_type, "big").inputs["scaleSetPriority"] == "Spot"


# --------------------------------------------------------------------------------------------------------------------
# EKS with Karpenter: EC2NodeClass and NodePool against the pinned CRDs and CEL rules


def karpenter_schema(filename: str) -> dict:
    crd = yaml.safe_load((needs_reference() / "karpenter" / filename).read_text())
    return next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == "v1")


def term_rule_failures(obj: dict, schema: dict) -> list[str]:
    """The CEL rules of capacityReservationSelectorTerms (other rules of the CRD use CEL functions cel-python lacks)."""
    terms = schema["properties"]["spec"]["properties"]["capacityReservationSelectorTerms"]
    assert terms.get("x-kubernetes-validations")
    return crd_rule_failures(obj["spec"].get("capacityReservationSelectorTerms", []), terms)


def manifest(resource) -> dict:
    return {k: resource.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}


@pytest.mark.parametrize("config", GOOD[:2])
def test_karpenter_objects_with_reservations_pass_the_pinned_crds(config):
    jsonschema = pytest.importorskip("jsonschema")
    plan = plan_of(config)
    for kind, filename in ((NODE_POOL, "karpenter.sh_nodepools.yaml"), (NODE_CLASS, "karpenter.k8s.aws_ec2nodeclasses.yaml")):
        schema = karpenter_schema(filename)
        objs = [manifest(r) for r in plan.of_type(kind)]
        assert objs
        for obj in objs:
            jsonschema.validate(obj, schema)
            if kind == NODE_CLASS:
                assert term_rule_failures(obj, schema) == []


def test_karpenter_selects_the_reservations_and_allows_reserved_first():
    plan = plan_of(GOOD[1])
    spec = plan.get(NODE_POOL, "nodepool-gpupools-big").inputs["spec"]["template"]["spec"]
    reqs = {r["key"]: r["values"] for r in spec["requirements"]}
    assert reqs["karpenter.sh/capacity-type"] == ["reserved", "spot", "on-demand"]
    assert reqs["topology.kubernetes.io/zone"] == ["eu-central-1b"]
    (node_class,) = [r for r in plan.of_type(NODE_CLASS) if r.name.endswith("reserved-big")]
    assert node_class.inputs["spec"]["capacityReservationSelectorTerms"] == [{"tags": {"team": "ml"}, "ownerID": "123456789012"},
                                                                            {"id": "cr-0fedcba9876543210"}]
    assert spec["nodeClassRef"]["name"] == node_class.inputs["metadata"]["name"]


def test_the_cel_rules_catch_an_id_beside_other_fields():
    """The EC2NodeClass rule refuses a term mixing id with tags when every term does: what gpupools refuses first."""
    schema = karpenter_schema("karpenter.k8s.aws_ec2nodeclasses.yaml")
    obj = manifest(plan_of(GOOD[0]).of_type(NODE_CLASS)[-1])
    assert obj["spec"]["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]
    obj["spec"]["capacityReservationSelectorTerms"] = [{"id": "cr-0123456789abcdef0", "tags": {"a": "b"}}]
    assert any("mutually exclusive" in f for f in term_rule_failures(obj, schema))
    obj["spec"]["capacityReservationSelectorTerms"] = [{"ownerID": "123456789012"}]
    assert any("expected at least one" in f for f in term_rule_failures(obj, schema))
    obj["spec"]["capacityReservationSelectorTerms"] = [{"tags": {"a": ""}}]
    assert any("empty tag keys or values" in f for f in term_rule_failures(obj, schema))


def test_default_pools_keep_their_capacity_type():
    plan = plan_of(stack_config("aws", pools=[{"name": "s", "instanceType": "g5.2xlarge", "maxNodes": 2, "spot": True}]))
    reqs = {r["key"]: r["values"] for r in plan.get(NODE_POOL, "nodepool-gpupools-s").inputs["spec"]["template"]["spec"]["requirements"]}
    assert reqs["karpenter.sh/capacity-type"] == ["spot"]
    assert all("capacityReservationSelectorTerms" not in r.inputs["spec"] for r in plan.of_type(NODE_CLASS))


# --------------------------------------------------------------------------------------------------------------------
# Team queues: flavors in capacity order, quotas per flavor; the provisioning admission check


def kueue_schema(plural: str) -> dict:
    crd = yaml.safe_load((needs_reference() / "kueue" / f"kueue.x-k8s.io_{plural}.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == kueue.API_VERSION.split("/")[1]]
    # Go's regexp takes a flag group after `^`; Python's wants it first. Same language either way.
    return json.loads(json.dumps(version["schema"]["openAPIV3Schema"]).replace('"^(?i)', '"(?i)^'))


PLURALS = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues", "AdmissionCheck": "admissionchecks",
           "ProvisioningRequestConfig": "provisioningrequestconfigs", "LocalQueue": "localqueues", "Cohort": "cohorts",
           "WorkloadPriorityClass": "workloadpriorityclasses", "Topology": "topologies"}


def kueue_objects(name: str, autoscaler: str) -> list[dict]:
    stack = validate_stack(yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())["config"])
    return quota_plan(stack, plan_pools(stack), None, autoscaler).objects


@pytest.mark.parametrize("name, autoscaler", [("dev-aws-reserved", "karpenter"), ("dev-gcp-dws", "cloud")])
def test_kueue_objects_pass_the_pinned_crds_and_rules(name, autoscaler):
    jsonschema = pytest.importorskip("jsonschema")
    kinds = set()
    for obj in kueue_objects(name, autoscaler):
        if obj["apiVersion"] == kueue.API_VERSION:
            schema = kueue_schema(PLURALS[obj["kind"]])
            jsonschema.validate(obj, schema)
            assert crd_rule_failures(obj, schema) == []
            kinds.add(obj["kind"])
    if name == "dev-gcp-dws":
        assert {"AdmissionCheck", "ProvisioningRequestConfig"} <= kinds


def of(objs: list[dict], kind: str, name: str) -> dict:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def test_reserved_flavor_comes_first_and_holds_the_reserved_share():
    objs = kueue_objects("dev-aws-reserved", "karpenter")
    assert of(objs, "ResourceFlavor", "h100-reserved")["spec"]["nodeLabels"] == {"gpupools.io/pool": "h100",
                                                                                  "karpenter.sh/capacity-type": "reserved"}
    assert of(objs, "ResourceFlavor", "h100-on-demand")["spec"]["nodeLabels"]["karpenter.sh/capacity-type"] == "on-demand"
    flavors = [f for g in of(objs, "ClusterQueue", "research")["spec"]["resourceGroups"] for f in g["flavors"]]
    names = [f["name"] for f in flavors]
    assert names.index("h100-reserved") + 1 == names.index("h100-on-demand")
    quota = {f["name"]: f["resources"][0]["nominalQuota"] for f in flavors}
    # 24 units on h100: the block covers 1 of maxNodes 2, so half (12) would go to the reserved flavor, capped at the
    # block's one node (8); the total is unchanged, and 16 on-demand hold a two-node job.
    assert (quota["h100-reserved"], quota["h100-on-demand"]) == (8, 16)


def test_without_karpenter_a_pool_is_one_flavor():
    objs = kueue_objects("dev-aws-reserved", "cluster-autoscaler")
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "ResourceFlavor"] == ["h100", "infer"]


def test_queued_pool_gets_its_admission_check_on_its_flavor():
    objs = kueue_objects("dev-gcp-dws", "cloud")
    config = of(objs, "ProvisioningRequestConfig", "h100-provisioning")["spec"]
    assert config == {"provisioningClassName": "queued-provisioning.gke.io", "managedResources": ["nvidia.com/gpu"],
                      "parameters": {"maxRunDurationSeconds": "86400"}}
    check = of(objs, "AdmissionCheck", "h100-provisioning")["spec"]
    assert check["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    assert check["parameters"] == {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "h100-provisioning"}
    strategy = of(objs, "ClusterQueue", "research")["spec"]["admissionChecksStrategy"]
    assert strategy == {"admissionChecks": [{"name": "h100-provisioning", "onFlavors": ["h100"]}]}


def test_a_wrong_provisioning_config_is_caught():
    jsonschema = pytest.importorskip("jsonschema")
    obj = json.loads(json.dumps(of(kueue_objects("dev-gcp-dws", "cloud"), "ProvisioningRequestConfig", "h100-provisioning")))
    del obj["spec"]["provisioningClassName"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, kueue_schema("provisioningrequestconfigs"))


@pytest.mark.parametrize("units, expected", [(16, (8, 8)), (1, (1, 0)), (0, (0, 0)), (7, (4, 3))])
def test_flavor_shares_add_up_and_round_toward_the_reservation(units, expected):
    stack = validate_stack(GOOD[0])
    plan = plan_pools(stack)[0]
    flavors = [capacity.Flavor("r", "reserved", {}), capacity.Flavor("o", "on-demand", {})]
    shares = capacity.flavor_shares(plan, units, flavors)
    assert (shares["r"], shares["o"]) == expected
    assert sum(shares.values()) == units


def test_the_reserved_flavor_never_holds_more_than_the_reserved_nodes_offer():
    """Quota on the reserved flavor beyond its nodes would admit a job that waits for reserved nodes that do not exist."""
    stack = validate_stack(GOOD[0])
    plan = plan_pools(stack)[0]
    cover = capacity.coverage(plan.pool)
    flavors = [capacity.Flavor("r", "reserved", {}), capacity.Flavor("o", "on-demand", {})]
    units = 3 * plan.max_units
    shares = capacity.flavor_shares(plan, units, flavors)
    assert shares["r"] == cover.usable * plan.units_per_node and shares["o"] == units - shares["r"]


# --------------------------------------------------------------------------------------------------------------------
# The plan: order, coverage, what happens at the end


def test_plan_json_says_where_nodes_come_from():
    plan = plan_of(yaml.safe_load((ROOT / "stacks" / "Pulumi.dev-aws-reserved.yaml").read_text())["config"], "dev-aws-reserved")
    pools = {p["name"]: p for p in plan.outputs["pools"]}
    h100 = pools["h100"]["capacitySources"]
    assert h100["order"] == ["reservation Capacity Block cr-0123456789abcdef0 (1 node)", "on-demand"]
    assert (h100["reservedNodes"], h100["maxNodes"]) == (1, 2)
    assert h100["coverage"] == "1 of maxNodes 2 reserved (50%)"
    assert any("40 minutes before its end time" in line for line in h100["details"])
    assert h100["reservedCostPerHour"] == pytest.approx(55.04)
    assert pools["infer"]["capacitySources"]["order"] == ["spot"]


def test_plan_text_for_flex_start_says_when_nodes_go():
    stack = validate_stack(GOOD[5])
    report = capacity_report(stack, plan_pools(stack)[1], "cloud")
    assert report["order"] == ["flex-start (nodes live at most 6h)"]
    assert "when the run ends: GKE removes the nodes after 6h, whatever runs on them" in report["details"]


def test_reservation_beyond_max_nodes_is_reported():
    stack = validate_stack(stack_config("aws", pools=[pool(maxNodes=1, capacity=[BLOCK, "on-demand"])]))
    assert capacity.coverage(stack.pools[0]).text == "1 of maxNodes 1 reserved (100%); 1 reserved node beyond maxNodes are never used by this pool"


def test_moving_a_gke_pool_to_queued_provisioning_replaces_it(tmp_path):
    """Flex-start, maxRunDuration and queued provisioning are fixed when GKE creates a node pool (ForceNew in the
    Terraform Google provider's node_config.go and resource_container_node_pool.go)."""
    from typer.testing import CliRunner

    from conftest import write_stack
    from gpupools.cli.main import app

    before = stack_config("gcp", pools=[{"name": "h100", "instanceType": "a3-highgpu-8g", "maxNodes": 1}],
                          teams=[{"name": "ml", "gpus": 8}])
    after = stack_config("gcp", pools=[{"name": "h100", "instanceType": "a3-highgpu-8g", "maxNodes": 1, "capacity": ["queued"]}],
                         teams=[{"name": "ml", "gpus": 8}])
    runner = CliRunner()
    old = tmp_path / "old.json"
    (tmp_path / "before").mkdir()
    first = runner.invoke(app, ["plan", "--config", str(write_stack(tmp_path / "before", before, "test")), "--json"])
    assert first.exit_code == 0, first.output
    old.write_text(first.stdout)
    second = runner.invoke(app, ["plan", "--config", str(write_stack(tmp_path, after, "test")), "--json", "--against", str(old)])
    assert second.exit_code == 0, second.output
    (change,) = [c for c in json.loads(second.stdout)["changes"] if c["name"] == "h100" and c["type"].endswith("NodePool")]
    assert change["action"] == "replace"
    assert {"queuedProvisioning", "nodeConfig.flexStart", "nodeConfig.reservationAffinity"} <= set(change["fields"])


@pytest.mark.parametrize("config, path, words", [
    (stack_config("aws", pools=[pool(capacity=[reservation(id="cr-1", zones=["us-east-2a"]), "on-demand"])]),
     "pools[0].capacity[0].reservation.zones[0]", "not a zone of region eu-central-1"),
    (stack_config("gcp", pools=[pool("gcp", instanceType="a3-ultragpu-8g", capacity=[reservation(id="res-1", zones=["us-central1-a"])])]),
     "pools[0].capacity[0].reservation.zones[0]", "does not offer nvidia-h200-141gb"),
])
def test_reservation_zones_belong_to_the_region_and_offer_the_gpu(config, path, words):
    with pytest.raises(ConfigError) as caught:
        validate_stack(config)
    assert any(p.path == path and words in p.message for p in caught.value.problems), caught.value.problems

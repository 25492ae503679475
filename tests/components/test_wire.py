"""Resources and invokes registered by type token (components/wire.py) send exactly what the providers' own generated
classes and functions send: each is registered both ways under the mock engine and the requests compared."""

from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT, plan_of, stack_config
from gpupools.cli import planrun
from gpupools.cli.planrun import run_program
from gpupools.deploy.wire import provider_inputs
from gpupools.stack.values import read_stack_file

# type token -> (SDK module, class)
SDK_CLASSES = {
    "aws:ec2/vpc:Vpc": ("ec2", "Vpc"),
    "aws:ec2/internetGateway:InternetGateway": ("ec2", "InternetGateway"),
    "aws:ec2/routeTable:RouteTable": ("ec2", "RouteTable"),
    "aws:ec2/subnet:Subnet": ("ec2", "Subnet"),
    "aws:ec2/eip:Eip": ("ec2", "Eip"),
    "aws:ec2/natGateway:NatGateway": ("ec2", "NatGateway"),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": ("ec2", "RouteTableAssociation"),
    "aws:ec2/launchTemplate:LaunchTemplate": ("ec2", "LaunchTemplate"),
    "aws:iam/role:Role": ("iam", "Role"),
    "aws:iam/rolePolicy:RolePolicy": ("iam", "RolePolicy"),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("iam", "RolePolicyAttachment"),
    "aws:sqs/queue:Queue": ("sqs", "Queue"),
    "aws:sqs/queuePolicy:QueuePolicy": ("sqs", "QueuePolicy"),
    "aws:cloudwatch/eventRule:EventRule": ("cloudwatch", "EventRule"),
    "aws:cloudwatch/eventTarget:EventTarget": ("cloudwatch", "EventTarget"),
    "aws:autoscaling/tag:Tag": ("autoscaling", "Tag"),
    "aws:eks/addon:Addon": ("eks", "Addon"),
    "aws:kms/key:Key": ("kms", "Key"),
    "aws:cloudwatch/logGroup:LogGroup": ("cloudwatch", "LogGroup"),
    "aws:eks/accessEntry:AccessEntry": ("eks", "AccessEntry"),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": ("eks", "PodIdentityAssociation"),
    "aws:eks/cluster:Cluster": ("eks", "Cluster"),
    "aws:eks/nodeGroup:NodeGroup": ("eks", "NodeGroup"),
    "gcp:compute/router:Router": ("compute", "Router"),
    "gcp:compute/routerNat:RouterNat": ("compute", "RouterNat"),
    "gcp:serviceaccount/account:Account": ("serviceaccount", "Account"),
    "gcp:projects/iAMMember:IAMMember": ("projects", "IAMMember"),
    "gcp:container/cluster:Cluster": ("container", "Cluster"),
    "gcp:container/nodePool:NodePool": ("container", "NodePool"),
    "azure-native:containerservice:ManagedCluster": ("containerservice", "ManagedCluster"),
    "azure-native:containerservice:AgentPool": ("containerservice", "AgentPool"),
    "azure-native:authorization:RoleAssignment": ("authorization", "RoleAssignment"),
    "azure-native:managedidentity:UserAssignedIdentity": ("managedidentity", "UserAssignedIdentity"),
    "random:index/randomPassword:RandomPassword": (None, "RandomPassword"),
}
MAPS = ("tags", "labels", "nodeLabels", "resourceLabels", "metadata", "addonProfiles")  # user-keyed maps: their keys are data
SDK_PACKAGES = {"aws": "pulumi_aws", "gcp": "pulumi_gcp", "azure-native": "pulumi_azure_native", "random": "pulumi_random"}
EXAMPLES = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.dev-*.yaml"))


def snake(name: str) -> str:
    """The SDK's Python name of a provider name: a run of capitals is one word (authorizedIPRanges: authorized_ip_ranges)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def to_sdk_args(value, in_map: bool = False):
    if isinstance(value, dict):
        return {(k if in_map else snake(k)): to_sdk_args(v, k in MAPS and not in_map) for k, v in value.items()}
    if isinstance(value, list):
        return [to_sdk_args(v) for v in value]
    return value


def sdk(token: str):
    import importlib

    return importlib.import_module(SDK_PACKAGES[token.split(":", 1)[0]])


def register_with_sdk_classes(resources) -> None:
    for resource in resources:
        module, cls = SDK_CLASSES[resource.type]
        kwargs = to_sdk_args(resource.inputs)
        if resource.type.startswith("azure-native:") and "resource_name" in kwargs:
            kwargs["resource_name_"] = kwargs.pop("resource_name")  # the SDK's spelling beside the resource's own name
        package = sdk(resource.type)
        getattr(getattr(package, module) if module else package, cls)(resource.name, **kwargs)


def recording_requests(monkeypatch) -> tuple[dict, list]:
    """Every RegisterResource request by (plan, type, name), and every invoke as (token, args), of the plans run after this."""
    requests: dict = {}
    invokes: list = []
    make_monitor, answer = planrun._make_monitor, planrun._invoke_result

    def monitor(plan, region, *facts):
        made = make_monitor(plan, region, *facts)
        register = made.RegisterResource

        def RegisterResource(request):
            requests[(id(plan), request.type, request.name)] = request
            return register(request)

        made.RegisterResource = RegisterResource
        return made

    def invoke_result(token, args, region, *facts):
        invokes.append((token, args))
        return answer(token, args, region, *facts)

    monkeypatch.setenv("GOOGLE_PROJECT", "proj-env")
    monkeypatch.setattr(planrun, "_make_monitor", monitor)
    monkeypatch.setattr(planrun, "_invoke_result", invoke_result)
    return requests, invokes


VARIANTS = [
    stack_config("aws", pools=[{"name": "a", "instanceType": "g5.2xlarge", "maxNodes": 2, "sharing": {"mode": "mps", "replicas": 2}}]),
    stack_config("aws", autoscaler="cluster-autoscaler"),
    stack_config("gcp"),
    stack_config("azure"),
    # A pool in a capacity reservation group: the cluster's own identity and its role on the group.
    stack_config("azure", pools=[{"name": "a100", "instanceType": "Standard_NC24ads_A100_v4", "maxNodes": 2, "diskSizeGb": 256, "capacity": [
        {"reservation": {"id": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-capacity/providers/Microsoft.Compute/"
                                "capacityReservationGroups/crg-a100", "zones": ["1"], "nodes": 1}}, "on-demand"]}]),
    {k: v for k, v in stack_config("gcp").items() if k != "gcp:project"},  # the provider's own project (GOOGLE_PROJECT): getClientConfig
    {**stack_config("gcp"), "gpupools:cluster": {**stack_config("gcp")["gpupools:cluster"], "create": False}},  # an existing GKE cluster
    {**stack_config("azure"), "gpupools:cluster": {**stack_config("azure")["gpupools:cluster"], "create": False}},  # and AKS cluster
]


def wire_plans() -> list:
    return [run_program(read_stack_file(ROOT / "stacks" / f"Pulumi.{name}.yaml"), name) for name in EXAMPLES] + [plan_of(c) for c in VARIANTS]


@pytest.fixture(scope="module")
def recorded_wire_plans():
    """wire_plans(), with every RegisterResource request and invoke they made (recording_requests), run once for the
    two tests below that compare them with the SDKs'. Only the plans run under the recording: the tests record their
    own runs again."""
    with pytest.MonkeyPatch.context() as patched:
        requests, invokes = recording_requests(patched)
        plans = wire_plans()
    return plans, requests, invokes


def compared(request) -> tuple:
    """What a registration sends that the class decides: inputs, provider version, outputs it marks secret."""
    return (request.object, request.version, sorted(request.additionalSecretOutputs))


def test_every_type_token_registration_matches_the_sdk_class(monkeypatch, recorded_wire_plans):
    requests, _ = recording_requests(monkeypatch)
    plans, wire_requests, _ = recorded_wire_plans
    samples: dict = {}
    for plan in plans:
        for resource in plan.resources:
            if resource.type in SDK_CLASSES:
                samples.setdefault((resource.type, resource.name, repr(resource.inputs)), (resource, wire_requests[(id(plan), resource.type, resource.name)]))
    assert {t for t, _, _ in samples} == set(SDK_CLASSES)  # every wire-registered type is covered
    # Registered by the SDK classes many to a program (a program run costs more than a registration), each (type, name)
    # once in a program, as Pulumi allows; a registration's request holds its own inputs only.
    batches: list[dict] = []
    for resource, wire in samples.values():
        batch = next((b for b in batches if (resource.type, resource.name) not in b), None)
        if batch is None:
            batches.append(batch := {})
        batch[(resource.type, resource.name)] = (resource, wire)
    for batch in batches:
        plan = run_program({"aws:region": "eu-central-1"}, "typed", lambda b=batch: register_with_sdk_classes([r for r, _ in b.values()]))
        for resource, wire in batch.values():
            typed = requests[(id(plan), resource.type, resource.name)]
            assert compared(typed) == compared(wire), (resource.type, resource.name)
            assert wire.version != ""


INVOKES = {  # token -> (SDK module or None for the package itself, function)
    "aws:index/getAvailabilityZones:getAvailabilityZones": (None, "get_availability_zones_output"),
    "aws:index/getCallerIdentity:getCallerIdentity": (None, "get_caller_identity_output"),
    "aws:index/getPartition:getPartition": (None, "get_partition_output"),
    "aws:index/getRegion:getRegion": (None, "get_region_output"),
    "aws:eks/getAddonVersion:getAddonVersion": ("eks", "get_addon_version_output"),
    "azure-native:authorization:getClientConfig": ("authorization", "get_client_config_output"),
    "azure-native:containerservice:listManagedClusterUserCredentials": ("containerservice", "list_managed_cluster_user_credentials_output"),
    "gcp:organizations/getClientConfig:getClientConfig": ("organizations", "get_client_config_output"),
    "aws:eks/getCluster:getCluster": ("eks", "get_cluster_output"),
    "aws:eks/getAddon:getAddon": ("eks", "get_addon_output"),
    "gcp:container/getCluster:getCluster": ("container", "get_cluster_output"),
    "azure-native:containerservice:getManagedCluster": ("containerservice", "get_managed_cluster_output"),
}


def test_every_invoke_by_token_sends_what_the_sdk_function_sends(monkeypatch, recorded_wire_plans):
    _, invokes = recording_requests(monkeypatch)
    wired = {}
    for token, args in recorded_wire_plans[2]:
        wired.setdefault(token, args)
    assert set(INVOKES) <= set(wired)
    for token, args in wired.items():
        if token not in INVOKES:
            continue
        module, function = INVOKES[token]
        package = sdk(token)
        invokes.clear()
        run_program({"aws:region": "eu-central-1"}, "typed",
                    lambda: getattr(getattr(package, module) if module else package, function)(**to_sdk_args(args)))
        assert invokes == [(token, args)], token


# The classes whose keyword arguments (gpupools.clouds' snake_case) the components turn into inputs (wire.provider_inputs).
FROM_SNAKE_CASE = ("aws:eks/cluster:Cluster", "aws:eks/nodeGroup:NodeGroup", "gcp:container/cluster:Cluster", "gcp:container/nodePool:NodePool",
                   "azure-native:containerservice:ManagedCluster", "azure-native:containerservice:AgentPool",
                   "azure-native:authorization:RoleAssignment", "azure-native:managedidentity:UserAssignedIdentity")


def test_every_name_the_sdks_spell_otherwise_is_known():
    """Each input name of the classes registered by token (and of the blocks they take) that is not the camelCase of its
    Python name, read from the installed SDKs' generated sources."""
    import importlib.util
    from pathlib import Path

    from gpupools.deploy.wire import PROVIDER_NAMES, _provider_name

    found: dict[str, set[str]] = {}
    files = {(SDK_PACKAGES[t.split(":", 1)[0]], *SDK_CLASSES[t]) for t in FROM_SNAKE_CASE}
    files = {(package, module, name) for package, module, cls in files for name in ("_inputs", snake(cls))}
    for package, module, name in sorted(files):
        path = Path(next(iter(importlib.util.find_spec(package).submodule_search_locations))) / module / f"{name}.py"
        if name == "_inputs" and not path.exists():  # a module whose resources take no blocks
            continue
        for wire, python in re.findall(r'@pulumi\.getter\(name="([A-Za-z0-9]+)"\)\s*\n\s*def ([a-z0-9_]+)\(', path.read_text()):
            found.setdefault(python, set()).add(wire)
    assert len(found) > 500  # the whole modules were read
    wrong = {python: wires for python, wires in found.items() if python != "tenant_id" and _provider_name(python) not in wires}
    assert wrong == {}
    assert {python: found.get(python) for python in PROVIDER_NAMES if found.get(python) != {PROVIDER_NAMES[python]}} == {}
    assert found["tenant_id"] == {"tenantId", "tenantID"} and "tenant_id" not in PROVIDER_NAMES


def test_provider_inputs_keeps_map_keys_and_spells_acronyms_as_the_provider():
    args = {"node_labels": {"team_name": "a"}, "tags": {"cost_center": "b"}, "node_config": {"disk_size_gb": 1, "labels": {"x_y": "z"}},
            "os_sku": "Ubuntu", "resource_name_": "c", "api_server_access_profile": {"authorized_ip_ranges": ["10.0.0.0/8"]},
            "addon_profiles": {"azure_policy": {"enabled": True}}, "taints": [{"key": "k", "effect": "NO_SCHEDULE"}]}
    assert provider_inputs(args) == {"nodeLabels": {"team_name": "a"}, "tags": {"cost_center": "b"},
                                     "nodeConfig": {"diskSizeGb": 1, "labels": {"x_y": "z"}}, "osSKU": "Ubuntu", "resourceName": "c",
                                     "apiServerAccessProfile": {"authorizedIPRanges": ["10.0.0.0/8"]},
                                     "addonProfiles": {"azure_policy": {"enabled": True}}, "taints": [{"key": "k", "effect": "NO_SCHEDULE"}]}


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_the_kubeconfig_is_made_of_the_clusters_answers(cloud, monkeypatch):
    """The kubeconfig is a secret, so the plan shows none of it: what it is made of is read where it is made."""
    import importlib

    decide = importlib.import_module(f"gpupools.clouds.{cloud}")
    made: list = []
    if cloud == "azure":
        monkeypatch.setattr(decide, "exec_kubeconfig", lambda text: made.append(text) or text)
    else:
        build = decide.kubeconfig
        monkeypatch.setattr(decide, "kubeconfig", lambda *args: made.append(args) or build(*args))
    plan_of(stack_config(cloud))
    assert len(made) == 1
    ca = planrun._MOCK_CA
    if cloud == "azure":
        cluster = json.loads(made[0])["clusters"][0]["cluster"]  # as AKS answered listClusterUserCredentials
        assert cluster == {"server": "https://ml-test.hcp.westeurope.azmk8s.io:443", "certificate-authority-data": ca}
    elif cloud == "gcp":
        assert made[0] == ("ml-test", "203.0.113.10", ca)
    else:
        name, endpoint, data, region = made[0]
        assert (name, data, region) == ("ml-test", ca, "eu-central-1") and endpoint.endswith(".gr7.eu-central-1.eks.amazonaws.com")


# What the components read of an existing cluster, as paths in the SDK's Python names.
CLUSTER_READS = {
    ("aws:eks/getCluster:getCluster", "eks", "get_cluster_output", (("name", "ml"),)): [
        ("name",), ("endpoint",), ("version",), ("certificate_authorities", 0, "data"), ("vpc_config", "subnet_ids"),
        ("vpc_config", "cluster_security_group_id"), ("vpc_config", "vpc_id"), ("vpc_config", "endpoint_public_access"),
        ("vpc_config", "public_access_cidrs"), ("enabled_cluster_log_types",), ("access_configs", 0, "authentication_mode"),
        ("compute_configs", 0, "enabled"), ("compute_configs", 0, "node_role_arn")],
    ("gcp:container/getCluster:getCluster", "container", "get_cluster_output", (("name", "ml"), ("location", "europe-west4"), ("project", "p"))): [
        ("name",), ("endpoint",), ("master_auths", 0, "cluster_ca_certificate"), ("workload_identity_configs", 0, "workload_pool"),
        ("enable_autopilot",), ("private_cluster_configs", 0, "enable_private_endpoint"), ("private_cluster_configs", 0, "enable_private_nodes"),
        ("master_authorized_networks_configs", 0, "cidr_blocks", 0, "cidr_block"),
        ("master_authorized_networks_configs", 0, "gcp_public_cidrs_access_enabled"), ("enable_shielded_nodes",), ("datapath_provider",),
        ("network_policies", 0, "enabled"), ("release_channels", 0, "channel"), ("resource_labels",)],
    ("azure-native:containerservice:getManagedCluster", "containerservice", "get_managed_cluster_output",
     (("resource_group_name", "rg"), ("resource_name", "ml"))): [
        ("name",), ("identity", "type"), ("api_server_access_profile", "authorized_ip_ranges"),
        ("api_server_access_profile", "enable_private_cluster"), ("disable_local_accounts",), ("aad_profile", "managed"),
        ("aad_profile", "enable_azure_rbac"), ("network_profile", "network_policy"),
        ("network_profile", "load_balancer_profile", "managed_outbound_ips", "count"), ("tags",)],
}
# Beyond the mocks' usual answer: every block the components read, and a map of data whose keys must stay as written.
CLUSTER_FACTS = {"aws": {"computeConfigs": [{"enabled": True, "nodeRoleArn": "arn:aws:iam::123456789012:role/auto-nodes"}]},
                 "gcp": {"masterAuthorizedNetworksConfigs": [{"cidrBlocks": [{"cidrBlock": "10.0.0.0/8", "displayName": "office"}],
                                                              "gcpPublicCidrsAccessEnabled": False}],
                         "networkPolicies": [{"enabled": True, "provider": "CALICO"}],
                         "resourceLabels": {"costCenter": "ml", "team_name": "research"}},
                 "azure-native": {"identity": {"type": "UserAssigned"}, "tags": {"costCenter": "ml"},
                                  "apiServerAccessProfile": {"authorizedIPRanges": ["10.0.0.0/8"], "enablePrivateCluster": False},
                                  "aadProfile": {"managed": True, "enableAzureRBAC": True},
                                  "networkProfile": {"networkPolicy": "cilium", "loadBalancerProfile": {"managedOutboundIPs": {"count": 2}}}}}


@pytest.mark.parametrize("read", list(CLUSTER_READS), ids=lambda r: r[0])
def test_an_existing_cluster_read_by_token_answers_what_the_sdks_typed_result_says(read, monkeypatch):
    """The components read an existing cluster by token, the answer given the SDK's Python names (wire.python_names):
    every field they read has the value the SDK's typed result gives it."""
    import importlib

    import pulumi

    from gpupools.deploy.wire import invoke, python_names

    token, module, function, args = read
    cloud = token.split(":", 1)[0]
    seen = {}

    def walk(value, path):
        for step in path:
            value = value[step] if isinstance(step, int) or isinstance(value, dict) else getattr(value, step)
        return value

    def program():
        parent = pulumi.ComponentResource("t:x:Reader", "reader")
        typed = getattr(getattr(importlib.import_module(SDK_PACKAGES[cloud]), module), function)(**dict(args))
        wired = invoke(token, provider_inputs(dict(args)), parent).apply(python_names)
        pulumi.Output.all(typed, wired).apply(lambda both: seen.update(typed=both[0], wired=both[1]))

    facts = CLUSTER_FACTS[cloud]
    answer = planrun._invoke_result
    monkeypatch.setattr(planrun, "_invoke_result", lambda t, a, region, *f: {**answer(t, a, region), **(facts if t == token else {})})
    run_program({"aws:region": "eu-central-1"}, "read", program)
    for path in CLUSTER_READS[read]:
        assert walk(seen["wired"], path) == walk(seen["typed"], path) is not None, path
    assert walk(seen["wired"], CLUSTER_READS[read][0]) == "ml"
    if cloud == "gcp":
        assert seen["wired"]["resource_labels"] == {"costCenter": "ml", "team_name": "research"}  # a map's keys as written
    if cloud == "azure-native":
        assert seen["wired"]["tags"] == {"costCenter": "ml"}

"""`gpupools plan`: run the real Pulumi program in-process under Pulumi's mock engine and record what it creates.

No cloud account, no Pulumi CLI, no network. Each registration is recorded as the engine would see it
(type token, logical name, parent, camelCase inputs); the mocks answer with plausible outputs (IDs, ARNs,
endpoints) so that dependent resources get concrete inputs. Invokes such as "find the existing cluster"
get plausible answers too.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import hashlib
import json
import math
import runpy
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gpupools.stack.values import to_pulumi_values
from gpupools.clouds.registry import MODULES

PROJECT = "gpupools"
SECRET = "[secret]"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
_SIG_KEY = "4dabf18193072939515e22adb298388d"
_RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
PROGRAM = Path(__file__).resolve().parent.parent / "__main__.py"


@dataclass
class PlannedResource:
    type: str
    name: str
    parent: str | None
    inputs: dict[str, Any]
    custom: bool
    parent_type: str | None = None
    version: str = ""  # the provider plugin version the registration asked for
    depends_on: tuple[tuple[str, str], ...] = ()  # (type, name) of every explicit dependency

    def depends(self, type_token: str, name: str | None = None) -> bool:
        return any(t == type_token and (name is None or n == name) for t, n in self.depends_on)

    def as_json(self) -> dict:
        return {"type": self.type, "name": self.name, "parent": self.parent, "inputs": self.inputs}


@dataclass
class Plan:
    stack: str
    cloud: str | None
    resources: list[PlannedResource] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    # Warnings the program logs, from the mocks' answers: kept for tests, never shown as findings about real clouds.
    warnings: list[str] = field(default_factory=list)

    def of_type(self, type_token: str) -> list[PlannedResource]:
        return [r for r in self.resources if r.type == type_token]

    def get(self, type_token: str, name: str) -> PlannedResource:
        for r in self.resources:
            if r.type == type_token and r.name == name:
                return r
        raise KeyError(f"{type_token} {name}")

    def children(self, parent_type: str, parent_name: str) -> list[PlannedResource]:
        return [r for r in self.resources if r.parent == parent_name and r.parent_type == parent_type]

    def as_json(self) -> dict:
        return {
            "project": PROJECT,
            "stack": self.stack,
            "cloud": self.cloud,
            "resources": [r.as_json() for r in sorted(self.resources, key=lambda r: (r.type, r.name))],
            "outputs": self.outputs,
            # Whether each team's job lands (gpupools.landing.check), as the program exported it.
            "landing": self.outputs.get("landing", []),
        }

    def to_json(self) -> str:
        return json.dumps(self.as_json(), indent=2, sort_keys=True)


def _struct_dict(struct) -> dict[str, Any]:
    """A google.protobuf.Struct as `json_format.MessageToDict` makes it (protobuf 5.29, json_format.py,
    `_StructMessageToJsonObject` and `_ValueMessageToJsonObject`): keys in the Struct's order, a number a float as
    stored, null or an unset value None, and ValueError for infinity or NaN. Theirs goes through the generic printer
    (a descriptor lookup and type dispatch per value) and was most of our monitor's time at every registration; this
    reads each Value's one field directly. tests/cli/test_plan_runner.py compares the two on many Structs."""
    return {key: _value(value) for key, value in struct.fields.items()}


def _value(value) -> Any:
    kind = value.WhichOneof("kind")  # the most frequent kinds in a plan's inputs first
    if kind == "string_value":
        return value.string_value
    if kind == "struct_value":
        return _struct_dict(value.struct_value)
    if kind == "list_value":
        return [_value(item) for item in value.list_value.values]
    if kind == "bool_value":
        return value.bool_value
    if kind == "number_value":
        number = value.number_value
        if math.isinf(number):
            raise ValueError("Fail to serialize Infinity for Value.number_value, which would parse as string_value")
        if math.isnan(number):
            raise ValueError("Fail to serialize NaN for Value.number_value, which would parse as string_value")
        return number
    return None  # null_value, or no kind set


def _plain(value: Any) -> Any:
    """Struct values as JSON: secrets masked, resource references as URNs, whole floats as ints."""
    if isinstance(value, dict):
        sig = value.get(_SIG_KEY)
        if sig == _SECRET_SIG:
            return SECRET
        if sig == _RESOURCE_SIG:
            return value.get("urn")
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _urn_name(urn: str) -> str | None:
    return urn.rsplit("::", 1)[-1] if urn else None


def _fake_id(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:12]


_MOCK_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nmock\n-----END CERTIFICATE-----\n").decode()


# EC2 IDs carry a type prefix that other APIs check (Karpenter's CRDs require `subnet-...`, `sg-...`).
_EC2_ID_PREFIX = {"aws:ec2/subnet:Subnet": "subnet", "aws:ec2/vpc:Vpc": "vpc", "aws:ec2/securityGroup:SecurityGroup": "sg",
                  "aws:ec2/launchTemplate:LaunchTemplate": "lt", "aws:ec2/natGateway:NatGateway": "nat", "aws:ec2/eip:Eip": "eipalloc",
                  "aws:ec2/internetGateway:InternetGateway": "igw", "aws:ec2/routeTable:RouteTable": "rtb"}


def _resource_id(typ: str, name: str, inputs: dict | None = None) -> str:
    if typ == "azure-native:containerservice:ManagedCluster" and inputs:
        return (f"/subscriptions/33333333-3333-3333-3333-333333333333/resourceGroups/{inputs.get('resourceGroupName')}"
                f"/providers/Microsoft.ContainerService/managedClusters/{inputs.get('resourceName', name)}")
    prefix = _EC2_ID_PREFIX.get(typ)
    rid = _fake_id(typ, name)
    return f"{prefix}-0{rid[:16]}" if prefix else f"{name}-{rid}"


def _resource_outputs(typ: str, name: str, inputs: dict, region: str) -> dict:
    """Outputs the real providers would compute, shaped like theirs, so downstream inputs are concrete."""
    rid = _fake_id(typ, name)
    out = dict(inputs)
    if typ == "aws:eks/cluster:Cluster":
        out.update(endpoint=f"https://{rid.upper()}.gr7.{region}.eks.amazonaws.com", certificateAuthority={"data": _MOCK_CA},
                   arn=f"arn:aws:eks:{region}:123456789012:cluster/{inputs.get('name', name)}",
                   vpcConfig={**inputs.get("vpcConfig", {}), "clusterSecurityGroupId": f"sg-{rid[:17]}"})
    elif typ == "aws:eks/nodeGroup:NodeGroup":
        out.update(resources=[{"autoscalingGroups": [{"name": f"eks-{inputs.get('nodeGroupName', name)}-{rid}"}]}],
                   arn=f"arn:aws:eks:{region}:123456789012:nodegroup/{inputs.get('clusterName')}/{inputs.get('nodeGroupName', name)}/{rid}")
    elif typ == "aws:sqs/queue:Queue":
        queue = inputs.get("name", name)
        out.update(arn=f"arn:aws:sqs:{region}:123456789012:{queue}", url=f"https://sqs.{region}.amazonaws.com/123456789012/{queue}")
    elif typ == "aws:cloudwatch/eventRule:EventRule":
        out.update(name=f"{name}-{rid[:7]}", arn=f"arn:aws:events:{region}:123456789012:rule/{name}-{rid[:7]}")

    elif typ == "aws:iam/role:Role":
        out.update(arn=f"arn:aws:iam::123456789012:role/{name}-{rid[:7]}", name=f"{name}-{rid[:7]}")
    elif typ == "aws:kms/key:Key":
        key_id = f"{rid[:8]}-{rid[8:12]}-4{rid[:3]}-8{rid[3:6]}-{rid}"
        out.update(keyId=key_id, arn=f"arn:aws:kms:{region}:123456789012:key/{key_id}")
    elif typ == "aws:ec2/launchTemplate:LaunchTemplate":
        out.update(latestVersion=1, arn=f"arn:aws:ec2:{region}:123456789012:launch-template/lt-{rid}")
    elif typ == "azure-native:containerservice:ManagedCluster":
        out.update(name=inputs.get("resourceName", name), fqdn=f"{name}-{rid[:8]}.hcp.westeurope.azmk8s.io")
        identity = inputs.get("identity") or {}
        if isinstance(identity.get("userAssignedIdentities"), list):
            # Azure answers with a map of identity ID to its principal and client IDs.
            out["identity"] = {**identity, "userAssignedIdentities": {i: {"principalId": rid, "clientId": rid} for i in identity["userAssignedIdentities"]}}
    elif typ == "azure-native:managedidentity:UserAssignedIdentity":
        out.update(principalId=f"{rid[:8]}-0000-4000-8000-{rid[:12]}", clientId=f"{rid[:8]}-1111-4000-8000-{rid[:12]}")
    elif typ == "gcp:serviceaccount/account:Account":
        email = f"{inputs.get('accountId', name)}@{inputs.get('project', 'mock-project')}.iam.gserviceaccount.com"
        out.update(email=email, member=f"serviceAccount:{email}", uniqueId=str(int(rid[:15], 16)))
    elif typ == "gcp:container/cluster:Cluster":
        out.update(endpoint="203.0.113.10", masterAuth={"clusterCaCertificate": _MOCK_CA})
    elif typ == "pulumi:pulumi:StackReference":
        # A fleet worker's stack as `pulumi up` left it: its service-account kubeconfig, a secret output.
        out.update(outputs={"multikueueKubeconfig": _mock_worker_kubeconfig(inputs.get("name", name))}, secretOutputNames=["multikueueKubeconfig"])
    elif typ.startswith("random:index/randomPassword"):
        out.update(result="mock-password-" + rid)
    return out


def _mock_worker_kubeconfig(stack: str) -> str:
    """A token kubeconfig shaped as a fleet worker exports one (gpupools.fleet.credentials.token_kubeconfig)."""
    host = _fake_id("worker", stack)
    return json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "worker",
                       "clusters": [{"name": "worker", "cluster": {"server": f"https://{host}.workers.example", "certificate-authority-data": _MOCK_CA}}],
                       "contexts": [{"name": "worker", "context": {"cluster": "worker", "user": "worker"}}],
                       "users": [{"name": "worker", "user": {"token": SECRET}}]})


_MOCK_ADDON_VERSIONS = {"vpc-cni": "v1.20.4-eksbuild.1", "coredns": "v1.12.4-eksbuild.1", "eks-pod-identity-agent": "v1.3.8-eksbuild.2"}


def _invoke_result(token: str, args: dict, region: str, cluster_facts: dict | None = None) -> dict:
    if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
        return {"names": [f"{region}{z}" for z in "abc"], "zoneIds": [f"euc1-az{i}" for i in (1, 2, 3)], "id": region}
    if token == "aws:eks/getCluster:getCluster":
        name = args.get("name", "cluster")
        return {"name": name, "endpoint": f"https://{_fake_id(name).upper()}.gr7.{region}.eks.amazonaws.com",
                "certificateAuthorities": [{"data": _MOCK_CA}], "arn": f"arn:aws:eks:{region}:123456789012:cluster/{name}",
                "vpcConfig": {"subnetIds": ["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60002"], "vpcId": "vpc-0a1b2c3d4e5f60000",
                              "clusterSecurityGroupId": "sg-0a1b2c3d4e5f60000",
                              # What EKS gives a cluster created without saying otherwise.
                              "endpointPublicAccess": True, "endpointPrivateAccess": False, "publicAccessCidrs": ["0.0.0.0/0"]},
                "enabledClusterLogTypes": [], "accessConfigs": [{"authenticationMode": "CONFIG_MAP"}],
                "version": "1.35", "status": "ACTIVE", **(cluster_facts or {})}
    if token == "aws:eks/getAddon:getAddon":
        return {"addonName": args.get("addonName"), "clusterName": args.get("clusterName"), "addonVersion": "v1.3.8-eksbuild.2", "id": "addon"}
    if token == "aws:eks/getAddonVersion:getAddonVersion":
        # A version string shaped like EKS's (v<version>-eksbuild.<n>); the real one is resolved at deploy time.
        addon, minor = args.get("addonName", "addon"), args.get("kubernetesVersion", "1.35")
        version = f"v{minor}.0-eksbuild.1" if addon == "kube-proxy" else _MOCK_ADDON_VERSIONS.get(addon, "v1.0.0-eksbuild.1")
        return {"addonName": addon, "kubernetesVersion": minor, "mostRecent": args.get("mostRecent", False), "version": version, "id": addon}
    if token == "aws:ec2/getSubnets:getSubnets":
        # Existing subnets: the mock puts the first one in each zone asked for, in order.
        filters = {f["name"]: f["values"] for f in args.get("filters", [])}
        ids, zones = filters.get("subnet-id", []), filters.get("availability-zone", [])
        return {"ids": ids[:len(zones)] or ids[:1], "id": region}
    if token == "aws:index/getCallerIdentity:getCallerIdentity":
        return {"accountId": "123456789012", "arn": "arn:aws:iam::123456789012:user/planner", "userId": "AIDAPLANNER", "id": "123456789012"}
    if token == "aws:index/getPartition:getPartition":
        return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}
    if token == "aws:index/getRegion:getRegion":
        return {"name": region, "region": region, "endpoint": f"ec2.{region}.amazonaws.com", "id": region}
    if token == "azure-native:containerservice:getManagedCluster":
        # What AKS gave a cluster created without saying otherwise: public API server, local accounts, no network policy.
        return {"name": args.get("resourceName"), "location": "westeurope", "kubernetesVersion": "1.33", "disableLocalAccounts": False,
                "networkProfile": {"networkPlugin": "kubenet", "networkPolicy": "none"}}
    if token == "azure-native:containerservice:listManagedClusterUserCredentials":
        # As AKS answers for an Entra ID cluster with format exec: a kubelogin user that logs in by device code.
        cluster = args.get("resourceName", "cluster")
        kubeconfig = json.dumps({"apiVersion": "v1", "kind": "Config", "clusters": [{"name": cluster, "cluster": {
            "server": f"https://{cluster}.hcp.westeurope.azmk8s.io:443", "certificate-authority-data": _MOCK_CA}}],
            "users": [{"name": f"clusterUser_{cluster}", "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "kubelogin",
                "args": ["get-token", "--login", "devicecode", "--server-id", "6dae42f8-4368-4678-94ff-3960e28e3630",
                         "--client-id", "80faf920-1908-4b52-b5ef-a8e7bedfc67a", "--tenant-id", "00000000-0000-0000-0000-000000000000",
                         "--environment", "AzurePublicCloud"]}}}]})
        return {"kubeconfigs": [{"name": "clusterUser", "value": base64.b64encode(kubeconfig.encode()).decode()}]}
    if token == "azure-native:authorization:getClientConfig":
        return {"clientId": "11111111-1111-1111-1111-111111111111", "objectId": "22222222-2222-2222-2222-222222222222",
                "subscriptionId": "33333333-3333-3333-3333-333333333333", "tenantId": "00000000-0000-0000-0000-000000000000"}
    if token == "gcp:container/getCluster:getCluster":
        project = args.get("project") or "mock-project"
        return {"name": args.get("name"), "location": args.get("location"), "endpoint": "203.0.113.20",
                "masterAuths": [{"clusterCaCertificate": _MOCK_CA}], "workloadIdentityConfigs": [{"workloadPool": f"{project}.svc.id.goog"}],
                # A public standard cluster on the Regular channel, as GKE creates one by default.
                "privateClusterConfigs": [{"enablePrivateNodes": False, "enablePrivateEndpoint": False}], "masterAuthorizedNetworksConfigs": [],
                "enableShieldedNodes": True, "datapathProvider": "LEGACY_DATAPATH", "networkPolicies": [], "releaseChannels": [{"channel": "REGULAR"}],
                "enableAutopilot": False, **(cluster_facts or {})}
    if token == "gcp:organizations/getClientConfig:getClientConfig":
        return {"project": "mock-project", "region": "us-central1", "zone": "us-central1-a", "accessToken": "[secret]", "id": "client"}
    return {}


def _make_monitor(plan: Plan, region: str, cluster_facts: dict | None = None):
    from pulumi.runtime import mocks

    class Recorder(mocks.Mocks):
        def new_resource(self, args: mocks.MockResourceArgs):
            return _resource_id(args.typ, args.name, args.inputs), _resource_outputs(args.typ, args.name, args.inputs, region)

        def call(self, args: mocks.MockCallArgs):
            return _invoke_result(args.token, args.args, region, cluster_facts)

    class RecordingMonitor(mocks.MockMonitor):
        def RegisterResource(self, request):
            if request.type == "pulumi:pulumi:Stack":
                return super().RegisterResource(request)
            raw = _struct_dict(request.object)
            parent_type = request.parent.split("::")[2].split("$")[-1] if request.parent else None
            # The implicit stack resource is not part of the plan: top-level resources have no parent.
            parent = None if parent_type in (None, "pulumi:pulumi:Stack") else _urn_name(request.parent)
            depends_on = tuple((urn.split("::")[2].split("$")[-1], urn.split("::")[3]) for urn in request.dependencies)
            plan.resources.append(PlannedResource(request.type, request.name, parent, _plain(raw), bool(request.custom),
                                                  parent_type if parent else None, request.version, depends_on))
            return super().RegisterResource(request) if SDK_ANSWERS else _answer(self, request, raw, region)

        def Invoke(self, request):
            if SDK_ANSWERS:
                return super().Invoke(request)
            return _answer_invoke(self, request, region, cluster_facts)

        def RegisterResourceOutputs(self, request):
            if request.urn.split("::")[2] == "pulumi:pulumi:Stack":
                plan.outputs = _plain(_struct_dict(request.outputs))
            return super().RegisterResourceOutputs(request)

    return RecordingMonitor(Recorder())


def _struct(values: dict):
    """A Struct of plain values as the SDK's `rpc.serialize_properties` makes one: a property that is None is left out
    (pulumi/runtime/rpc.py lines 240-246), a None further in is a null."""
    from google.protobuf import struct_pb2

    made = struct_pb2.Struct()
    made.update({k: v for k, v in values.items() if v is not None})
    return made


def _answer(monitor, request, raw: dict, region: str):
    """What `MockMonitor.RegisterResource` (pulumi/runtime/mocks.py, pulumi 3.272.0, lines 308-333) answers, without its
    round trip. Theirs turns the inputs into Python values (`rpc.deserialize_properties`, which resource references need
    an event loop for), hands them to the mocks, and turns the state back into a Struct by running the SDK's async
    serializer to completion on an event loop of the calling thread; for a plan that was a tenth of its wall time. The
    state here is the inputs as they came (`raw`, their JSON form: secrets and resource references still in their wire
    form) and the outputs the mocks add, made a Struct directly. The SDK reads the answer with `deserialize_properties`,
    which lifts a secret to the list or map holding it whether or not the mock did that first, so the outputs the
    program sees are the same; a test plans example stacks both ways and compares what each registration answered."""
    from pulumi.runtime import mocks
    from pulumi.runtime.proto import resource_pb2

    urn = monitor.make_urn(request.parent, request.type, request.name)
    id_ = _resource_id(request.type, request.name, raw)
    state = _resource_outputs(request.type, request.name, raw, region)
    monitor.resources[urn] = mocks.MockMonitor.ResourceRegistration(urn, id_, state)
    # The inputs as they came (a copy of their Struct, made in C), then what the mocks add or change.
    answer = resource_pb2.RegisterResourceResponse(urn=urn, id=id_)
    answer.object.CopyFrom(request.object)
    answer.object.update({k: v for k, v in state.items() if v is not None and (k not in raw or v is not raw[k])})
    return answer


def _answer_invoke(monitor, request, region: str, cluster_facts: dict | None):
    """What `MockMonitor.Invoke` (pulumi/runtime/mocks.py, lines 240-273) answers, the same way: the arguments in their
    JSON form, the answer made a Struct directly. `pulumi:pulumi:getResource` (a registered resource by URN) answers
    its registration."""
    from pulumi.runtime.proto import resource_pb2

    args = _struct_dict(request.args)
    if request.tok == "pulumi:pulumi:getResource":
        registered = monitor.resources.get(args.get("urn"))
        if registered is None:
            raise Exception(f"unknown resource {args.get('urn')}")
        answer = registered._asdict()
    else:
        answer = _invoke_result(request.tok, args, region, cluster_facts)
    return resource_pb2.ResourceInvokeResponse(failures=None, **{"return": _struct(answer)})


class _InPlace(ThreadPoolExecutor):
    """The loop's default executor, running each call where it is submitted. The SDK hands every monitor call to the
    loop's executor (`run_in_executor`, pulumi/runtime/resource.py and invoke.py) so that a real engine's gRPC call
    does not block the loop; the mock monitor's answers above take microseconds, and sending each to a worker thread
    and its result back cost a twentieth of a plan in thread switches.

    Submitted from the loop's own thread (as `run_in_executor` does), the answer is an asyncio future of that loop,
    which `run_in_executor` hands on as it is (asyncio/futures.py, `wrap_future`, CPython 3.11). It gets its result
    from a callback queued at once, where a done concurrent future would have queued the same callback through
    `call_soon_threadsafe` (`_chain_future`): the program's tasks run in the same order, without that call's write to
    the loop's self-pipe and the wake-up read after it at every registration and invoke."""

    def submit(self, fn, /, *args, **kwargs) -> Future | asyncio.Future:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on a running loop's thread: a done concurrent future, as any executor gives
            loop = None
        done = loop.create_future() if loop is not None else Future()
        try:
            outcome, settle = fn(*args, **kwargs), _set_result
        except BaseException as exc:  # noqa: BLE001 - the caller awaits the future and sees the exception there
            outcome, settle = exc, _set_exception
        if loop is None:
            settle(done, outcome)
        else:
            loop.call_soon(settle, done, outcome)
        return done


def _set_result(future, result) -> None:
    if not future.cancelled():  # a task cancelled while the callback waited no longer awaits it (asyncio `_set_state`)
        future.set_result(result)


def _set_exception(future, exc: BaseException) -> None:
    if not future.cancelled():
        future.set_exception(exc)


# How the mock monitor answers: its own answers above on the loop's thread (a plan), or the SDK's MockMonitor on
# worker threads as the SDK runs it (tests plan both ways and compare).
SDK_ANSWERS = False


def _collector(plan: Plan) -> "logging.Logger":
    """A logger that keeps the program's warnings in the plan instead of printing them. It is a Logger of its own,
    not one from `logging.getLogger`: the logging module keeps every logger it hands out for the life of the process
    (its manager's `loggerDict`), so a logger named per plan kept each plan, and its handler, alive after the run, and
    every later `setLevel` anywhere walked all of them (`Manager._clear_cache`). A process that plans many stacks (a
    fleet, the tests) grew with each."""
    import logging

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                plan.warnings.append(record.getMessage())

    logger = logging.Logger("gpupools.cli.planrun")
    logger.handlers[:] = [Keep()]
    logger.propagate = False
    logger.setLevel(logging.WARNING)
    return logger


async def _wait_for_quiescence(await_all_outstanding_tasks: bool = True) -> None:
    """Pulumi's `wait_for_rpcs`, waiting on each batch of outstanding outputs at once.

    The SDK's loop waits with FIRST_COMPLETED and re-arms a callback on every pending output each time, which
    is quadratic in the number of outputs; a plan of hundreds of pools spent most of its time there. Waiting
    for the whole batch gives the same end state (every RPC and output settled, the first error re-raised).
    """
    from pulumi.runtime.settings import SETTINGS, _get_rpc_manager

    rpc_manager = _get_rpc_manager()
    while True:
        while rpc_manager.rpcs:
            await asyncio.sleep(0)
            await rpc_manager.rpcs.pop()
        if rpc_manager.unhandled_exception is not None:
            raise rpc_manager.unhandled_exception.with_traceback(rpc_manager.exception_traceback)
        while await_all_outstanding_tasks:
            with SETTINGS.lock:
                pending = list(SETTINGS.outputs)
                SETTINGS.outputs.clear()
            if not pending:
                break
            await asyncio.wait(pending)
            for task in pending:
                await task
        if not rpc_manager.rpcs:
            break


def _no_stack_trace():
    """The stack trace a plan's registrations carry: none. The engine reads one (with the source position taken from it)
    only to point its diagnostics at a line of the program, and under the mock engine nothing reads it: the SDK's mock
    monitor and ours read type, name, parent, inputs and dependencies. Taking it cost a tenth of a plan's time (the
    SDK's `_get_stack_trace`, pulumi/runtime/resource.py lines 741-778, walks and describes every frame at every
    registration)."""
    from pulumi.runtime.proto import source_pb2

    return source_pb2.StackTrace()


def _urns_of_strings(sdk_create_urn):
    """Pulumi's `create_urn` (pulumi/runtime/resource.py, pulumi 3.272.0, lines 527-560), without its chain of outputs
    where everything is already a string. The SDK's `register_resource` computes a URN this way at every registration,
    for the answer it makes up when there is no monitor (`mock_urn`, line 1327), and awaits it even where a monitor
    answers, as ours does: three applied outputs and their tasks per resource. Here a name, type and parent URN that
    are strings give the same URN, as an output known, not secret and of no resource, as the SDK's would be; anything
    else (an output, a resource, the project or stack an alias names) goes to the SDK's own."""

    def create_urn(name, type_, parent=None, project=None, stack=None):
        from pulumi import Output
        from pulumi.runtime import settings

        if not (isinstance(name, str) and isinstance(type_, str) and (parent is None or isinstance(parent, str))
                and project is None and stack is None):
            return sdk_create_urn(name, type_, parent, project, stack)
        if parent is None:
            prefix = "urn:pulumi:" + settings.get_stack() + "::" + settings.get_project() + "::"
        else:
            prefix = parent[0:parent.rfind("::")] + "$"
        return Output.from_input(prefix + type_ + "::" + name)

    return create_urn


def run_program(config: dict[str, Any], stack: str, program: Callable[[], None] | None = None) -> Plan:
    """Run `program` (default: the project's `__main__.py`) with the given stack config under mocks."""
    from pulumi.runtime import mocks, settings
    from pulumi.runtime.config import set_all_config
    from pulumi.runtime.stack import run_in_stack

    cloud = config.get("gpupools:cloud")
    plan = Plan(stack=stack, cloud=cloud if isinstance(cloud, str) else None)
    # The region the mocks answer with: the stack's, or the one the AWS provider would take from the environment.
    module = MODULES.get(cloud) if isinstance(cloud, str) else None
    region = str((module.mock_region(config) if module is not None else None) or config.get("gcp:region") or "eu-central-1")
    # A provider credential kept encrypted reaches the program as Pulumi hands it over: a string in a key marked
    # secret (offline the string is a placeholder, since nothing here can decrypt it).
    config = {k: SECRET if k.partition(":")[0] != "gpupools" and isinstance(v, dict) and set(v) == {"secure"} else v
              for k, v in config.items()}
    secret_keys = [k for k, v in config.items() if v == SECRET]
    set_all_config(to_pulumi_values(config), secret_keys)
    # What an existing cluster reads as beyond the service's defaults, where the stack says so (the cloud's answer).
    facts = getattr(module, "mock_cluster_facts", None)
    monitor = _make_monitor(plan, region, facts(config) if facts is not None else None)
    settings.ROOT.set(None)
    settings.configure(mocks.MockSettings(
        monitor=monitor,
        monitor_features=set(monitor.GetDeploymentInfo(None).supportedFeatures),
        engine=mocks.MockEngine(_collector(plan)),
        project=PROJECT,
        stack=stack,
        dry_run=False,
        organization="organization",
        callbacks=None,
    ))

    def default_program() -> None:
        if PROGRAM.exists():
            runpy.run_path(str(PROGRAM), run_name="__main__")
        else:  # installed without the project checkout: the same program, from the package
            from gpupools.program import main

            main()

    from pulumi.runtime import resource as engine_resource, stack as engine_stack

    sdk_wait, sdk_trace, sdk_urn = engine_stack.wait_for_rpcs, engine_resource._get_stack_trace, engine_resource.create_urn
    engine_stack.wait_for_rpcs = _wait_for_quiescence
    engine_resource._get_stack_trace = _no_stack_trace
    engine_resource.create_urn = _urns_of_strings(sdk_urn)
    loop = asyncio.new_event_loop()
    # The SDK calls the monitor from the loop's default executor: ours answers in place. Where the SDK's MockMonitor
    # answers (SDK_ANSWERS), it runs on worker threads, and in each the mocks make an event loop of their own
    # (pulumi/runtime/sync_await.py `_ensure_event_loop`) that nothing closes; at interpreter exit their finalizers then
    # fail on already-closed sockets and print "Exception ignored in BaseEventLoop.__del__". Each worker gets its loop
    # from us instead, and every one is closed when the plan ends.
    worker_loops: list[asyncio.AbstractEventLoop] = []

    def own_loop() -> None:
        worker_loops.append(asyncio.new_event_loop())
        asyncio.set_event_loop(worker_loops[-1])

    executor = ThreadPoolExecutor(initializer=own_loop) if SDK_ANSWERS else _InPlace()
    loop.set_default_executor(executor)
    # Everything a plan makes (resources, their outputs and the tasks behind them) lives until the plan ends, so the
    # cyclic garbage collector's passes free little, and each pass walks the whole heap: they were a third of a
    # 100-pool plan's time, and made the time per pool grow with the pools. Off while the program runs (a 500-pool
    # plan then holds about 7% more memory), back as it was afterwards.
    collecting = gc.isenabled()
    gc.disable()
    try:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(run_in_stack(program or default_program))
    finally:
        if collecting:
            gc.enable()
        engine_stack.wait_for_rpcs = sdk_wait
        engine_resource._get_stack_trace = sdk_trace
        engine_resource.create_urn = sdk_urn
        asyncio.set_event_loop(None)
        executor.shutdown(wait=True)
        loop.close()
        for worker_loop in worker_loops:
            worker_loop.close()
        settings.ROOT.set(None)
    return plan

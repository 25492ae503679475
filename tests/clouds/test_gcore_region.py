"""`gcore:regionId`: a positive integer always; against facts_gcore.yaml offline where one is installed (gpupools ships
none: only Gcore's authenticated API lists its regions), a plan warning where it was not checked, and against the
API's own list before `pulumi up` creates anything. Each refusal is one line naming the field and regions that work."""

from __future__ import annotations

import json
import sys
import traceback

import pytest
from typer.testing import CliRunner

from gpupools.cli.main import app
from gpupools.clouds import gcore as decide
from gpupools.clouds.gcore import provider as gcore_provider
from gpupools.core.facts import GcoreRegion, GcoreRegions, gcore_regions, load_facts
from gpupools.stack.errors import ConfigError
from gpupools.validation.stack import validate_stack

from conftest import stack_config, write_stack

# A permanent token in Gcore's form, <id>$<secret> (as tests/clouds/test_gcore_api.py).
KEY = "7711$eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9-s3cr3t"
# A listing as the API could answer it (region 76 is the ID Gcore's SDK examples use); the names are made up for the
# tests, not a claim about Gcore's regions.
LISTED = [{"id": 76, "display_name": "Region-A", "state": "ACTIVE", "has_k8s": True, "has_ai_gpu": True},
          {"id": 38, "display_name": "Region-B", "state": "ACTIVE", "has_k8s": True, "has_ai_gpu": False},
          {"id": 8, "display_name": "Edge-C", "state": "ACTIVE", "has_k8s": False, "has_ai_gpu": False},
          {"id": 77, "display_name": "Old-D", "state": "DELETED", "has_k8s": True, "has_ai_gpu": True}]
API = "Gcore's API, GET /cloud/v1/regions"
FACTS = "facts_gcore.yaml, Gcore's GET /cloud/v1/regions of 2026-11-29"


def listing(source: str = API, rows: list[dict] = LISTED) -> GcoreRegions:
    return GcoreRegions({r["id"]: GcoreRegion(r["id"], r["display_name"], r["state"], r.get("has_k8s"), r.get("has_ai_gpu")) for r in rows},
                        source)


# --------------------------------------------------------------------------------------------------------------------
# The decision


def test_an_unknown_region_names_the_closest_regions_with_managed_kubernetes():
    assert decide.region_refusal(99999, listing()) == (f"99999 is not a Gcore region ID ({API}); closest with Managed Kubernetes: "
                                                       f"76 (Region-A), 38 (Region-B)")
    # A typo of a known ID first (difflib), then the numerically nearest.
    assert decide.region_refusal(767, listing()).endswith("closest with Managed Kubernetes: 76 (Region-A), 38 (Region-B)")
    assert decide.region_refusal(39, listing()).endswith("closest with Managed Kubernetes: 38 (Region-B), 76 (Region-A)")


def test_a_listed_region_with_managed_kubernetes_passes_and_one_without_it_does_not():
    assert decide.region_refusal(76, listing()) is None and decide.region_refusal(38, listing()) is None
    assert decide.region_refusal(8, listing()) == (f"region 8 (Edge-C) offers no Managed Kubernetes ({API}); closest with Managed "
                                                   f"Kubernetes: 38 (Region-B), 76 (Region-A)")
    assert decide.region_refusal(77, listing()).startswith(f"region 77 (Old-D) is deleted ({API}); closest with Managed Kubernetes: 76")
    # A listing that does not say whether a region has Managed Kubernetes does not refuse it.
    assert decide.region_refusal(8, listing(rows=[{**LISTED[2], "has_k8s": None}])) is None
    assert decide.region_refusal(5, listing(rows=[LISTED[2]])) == f"5 is not a Gcore region ID ({API}), and it names no region with Managed Kubernetes"


def test_a_long_listing_is_cut_to_a_readable_line():
    rows = [{"id": i, "display_name": f"R{i}", "state": "ACTIVE", "has_k8s": True} for i in range(1, 21)]
    line = decide.region_refusal(99999, listing(rows=rows))
    assert line.endswith("closest with Managed Kubernetes: 20 (R20), 19 (R19), 18 (R18); other regions with Managed Kubernetes: "
                         "1 (R1), 2 (R2), 3 (R3), 4 (R4), 5 (R5), 6 (R6), 7 (R7), 8 (R8) and 9 more"), line


# --------------------------------------------------------------------------------------------------------------------
# Offline: the plan


def problems(config: dict, environ: dict | None = None) -> list[str]:
    try:
        validate_stack(config, environ={} if environ is None else environ)
    except ConfigError as exc:
        return [str(p) for p in exc.problems]
    return []


def gcore(region: str | None = "76") -> dict:
    config = stack_config("gcore")
    if region is None:
        del config["gcore:regionId"]
    else:
        config["gcore:regionId"] = region
    return config


class Facts:
    def __init__(self, regions):
        self.gcore_regions = regions


@pytest.fixture
def with_facts(monkeypatch):
    monkeypatch.setattr(gcore_provider, "load_facts", lambda: Facts(listing(FACTS)))


def test_gpupools_ships_no_region_list_of_its_own():
    assert load_facts().gcore_regions is None
    assert decide.region_problems({"gcore:regionId": "99999"}) == []


def test_with_a_facts_file_an_unknown_region_is_one_error(with_facts):
    assert problems(gcore("99999")) == [f"error: gcore:regionId: 99999 is not a Gcore region ID ({FACTS}); closest with Managed "
                                        f"Kubernetes: 76 (Region-A), 38 (Region-B)"]
    assert problems(gcore("8"))[0].startswith("error: gcore:regionId: region 8 (Edge-C) offers no Managed Kubernetes")
    assert problems(gcore("76")) == []


@pytest.mark.parametrize("value, shown", [("0", "a string of 1 character"), ("-76", "a string of 3 characters"),
                                          ("76.5", "a string of 4 characters"), ("abc", "a string of 3 characters")])
def test_a_region_id_is_a_positive_integer_in_the_stack_and_in_the_environment(value, shown):
    assert problems(gcore(value)) == [f"error: gcore:regionId: {shown} is not a Gcore cloud region ID (a number, such as 76)"]
    # Left to the environment, it is read by gpupools' own program as an integer (deploy.gcore.location): checked too.
    assert problems(gcore(None), {"GCORE_CLOUD_REGION_ID": value}) == [
        f"error: gcore:regionId: not set in the stack, and $GCORE_CLOUD_REGION_ID ({shown}) is not a Gcore cloud region ID (a number, "
        f"such as 76)"]
    assert problems(gcore(None), {"GCORE_CLOUD_REGION_ID": "76"}) == []


runner = CliRunner()


def test_the_cli_ends_an_unknown_region_in_one_line_and_exit_2_with_a_facts_file(with_facts, tmp_path):
    result = runner.invoke(app, ["plan", "--config", str(write_stack(tmp_path, gcore("99999")))])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"error: gcore:regionId: 99999 is not a Gcore region ID ({FACTS}); closest with Managed "
                                          f"Kubernetes: 76 (Region-A), 38 (Region-B)"]


NOT_CHECKED = ("gcore:regionId {} was not checked offline: gpupools ships no list of Gcore's regions (only Gcore's authenticated API "
               "lists them; `tools/refresh_cloud_facts.py gcore` writes gpupools/core/facts_gcore.yaml from it); `pulumi up` checks it "
               "against Gcore's region list before it creates anything")


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """One `plan --json` of a stack with region 99999 and no facts file (as gpupools ships): it plans, and says so."""
    path = write_stack(tmp_path_factory.mktemp("gcore-region"), gcore("99999"))
    return runner.invoke(app, ["plan", "--config", str(path), "--json"])


def test_without_a_facts_file_the_plan_warns_that_the_region_was_not_checked(planned):
    assert planned.exit_code == 0, planned.stderr
    assert json.loads(planned.stdout)["warnings"][0] == NOT_CHECKED.format(99999)
    assert f"warning: {NOT_CHECKED.format(99999)}" in planned.stderr.splitlines()


def test_the_warning_goes_where_the_region_was_checked(with_facts, monkeypatch):
    from gpupools.cli.planreport import plan_warnings

    stack = validate_stack(gcore("76"), environ={})
    assert [w for w in plan_warnings(stack) if "gcore:regionId" in w] == []
    monkeypatch.setenv("GCORE_CLOUD_REGION_ID", "38")
    assert decide.region_warnings({}) == ["gcore:regionId 38 was not checked offline: it comes from $GCORE_CLOUD_REGION_ID, which the plan's "
                                          "checks do not read; `pulumi up` checks it against Gcore's region list before it creates anything"]
    monkeypatch.setattr(gcore_provider, "load_facts", lambda: Facts(None))
    assert decide.region_warnings({"gcore:regionId": "76"}) == [NOT_CHECKED.format(76)]


# --------------------------------------------------------------------------------------------------------------------
# At `pulumi up`: the providers ask the API first, through the same bounded client


component = pytest.importorskip("gpupools.deploy.gcore")  # needs the SDK
httpx = pytest.importorskip("httpx")

POOL = {"name": "infer", "flavor_id": "g3-ai-32-192-1500-l40s-48-1", "min_node_count": 1, "max_node_count": 3, "labels": {},
        "taints": {"nvidia.com/gpu": "present:NoSchedule"}, "auto_healing_enabled": True, "is_public_ipv4": False,
        "servergroup_policy": "soft-anti-affinity", "boot_volume_type": "ssd_hiiops", "boot_volume_size": 50}
REGIONS = "GET /cloud/v1/regions"


class FakeApi:
    """Gcore's API as an httpx mock transport: the region listing in pages of two, anything else as `self.other`."""

    def __init__(self, rows=LISTED):
        self.rows = rows
        self.requests: list[str] = []
        self.other = lambda request: httpx.Response(400, json={"message": "stop here"})
        self.regions = None  # an exception to raise instead of listing

    def __call__(self, request):
        self.requests.append(f"{request.method} {request.url.path}")
        assert request.headers["authorization"] == f"APIKey {KEY}"
        if request.url.path == "/cloud/v1/regions":
            if self.regions is not None:
                raise self.regions
            offset = int(request.url.params.get("offset", 0))
            return httpx.Response(200, json={"count": len(self.rows), "results": self.rows[offset:offset + 2]})
        return self.other(request)

    def provider(self, kind, retries: int = 0):
        return kind(http_client=httpx.Client(transport=httpx.MockTransport(self)), timeout=0.3, max_retries=retries)


@pytest.fixture
def api(monkeypatch):
    monkeypatch.setenv("GCORE_API_KEY", KEY)
    return FakeApi()


def pool_props(region) -> dict:
    return {"project_id": 1234567, "region_id": region, "cluster_name": "ml-test", "pool": POOL}


def cluster_props(region) -> dict:
    return {"project_id": 1234567, "region_id": region, "adopt": False,
            "cluster": {"name": "ml-test", "keypair": "k", "version": "1.36", "pools": []}}


def refused(call) -> str:
    with pytest.raises(component.GcoreInputError) as exc:
        call()
    line = str(exc.value)
    assert "\n" not in line and KEY not in line and KEY.split("$")[1] not in line
    assert exc.value.__cause__ is None and exc.value.__context__ is None
    return line


UNKNOWN = f"gcore:regionId: 99999 is not a Gcore region ID ({API}); closest with Managed Kubernetes: 76 (Region-A), 38 (Region-B)"


def test_an_unknown_region_stops_a_pool_before_anything_is_created(api):
    assert refused(lambda: api.provider(component.PoolProvider).create(pool_props(99999))) == UNKNOWN
    # Both pages of the listing read, nothing else asked.
    assert api.requests == [REGIONS, REGIONS]


def test_an_unknown_region_stops_a_cluster_before_anything_is_created(api):
    # As the engine hands the number over: a float.
    assert refused(lambda: api.provider(component.ClusterProvider).create(cluster_props(99999.0))) == UNKNOWN
    assert api.requests == [REGIONS, REGIONS]
    api.requests.clear()
    assert refused(lambda: api.provider(component.ClusterProvider).create(cluster_props(8))).startswith(
        "gcore:regionId: region 8 (Edge-C) offers no Managed Kubernetes")


def test_a_known_region_goes_on_to_the_quota_and_the_create(api):
    with pytest.raises(component.GcoreApiError) as exc:
        api.provider(component.PoolProvider).create(pool_props(76))
    assert api.requests == [REGIONS, REGIONS, "POST /cloud/v2/k8s/clusters/1234567/76/pools/check_limits"]
    assert str(exc.value).endswith("with HTTP 400: stop here")
    api.requests.clear()
    with pytest.raises(component.GcoreApiError):
        api.provider(component.ClusterProvider).create(cluster_props(38))
    assert api.requests == [REGIONS, REGIONS, "GET /cloud/v2/k8s/1234567/38/create_versions"]


def test_a_move_to_an_unknown_region_is_refused_before_the_old_pool_or_cluster_is_deleted(api):
    pools = api.provider(component.PoolProvider)
    assert refused(lambda: pools.diff("ml-test/infer", pool_props(76), pool_props(99999))) == UNKNOWN
    clusters = api.provider(component.ClusterProvider)
    assert refused(lambda: clusters.diff("ml-test", cluster_props(76), cluster_props(99999))) == UNKNOWN
    # Where the region stays, the diff does not ask for it (a replaced pool's quota only).
    api.requests.clear()
    assert clusters.diff("ml-test", cluster_props(76), cluster_props(76)).changes is False
    api.other = lambda request: httpx.Response(200, json={})
    other_flavor = {**pool_props(76), "pool": {**POOL, "flavor_id": "g3-ai-64-384-3000-l40s-48-2"}}
    assert pools.diff("ml-test/infer", pool_props(76), other_flavor).replaces == ["pool.flavor_id"]
    assert api.requests == ["POST /cloud/v2/k8s/clusters/1234567/76/pools/check_limits"]


def test_a_region_listing_that_times_out_is_the_usual_timeout_line(api):
    api.regions = httpx.ReadTimeout("timed out")
    with pytest.raises(component.GcoreApiError) as exc:
        api.provider(component.PoolProvider, retries=1).create(pool_props(76))
    assert str(exc.value) == "creating Gcore pool ml-test/infer: Gcore's API did not answer GET /cloud/v1/regions within 0.3 s after 2 attempts"
    assert api.requests == [REGIONS, REGIONS]


def test_region_names_from_the_api_are_cleaned_and_bounded(api):
    api.rows = [{"id": 76, "display_name": f"\x1b[31mRegion\x1b[0m\n{KEY}" + "x" * 80, "state": "ACTIVE", "has_k8s": True}]
    line = refused(lambda: api.provider(component.PoolProvider).create(pool_props(5)))
    assert line == f"gcore:regionId: 5 is not a Gcore region ID ({API}); closest with Managed Kubernetes: 76 (Region [redacted]{'x' * 23})"


def test_the_engine_is_told_the_line_alone(api, monkeypatch):
    """In the provider process the engine reads traceback.format_exc() of the failure (pulumi/dynamic/__main__.py
    _abort_with_traceback): with the refusal, that is the line and nothing above it."""
    monkeypatch.setattr(component, "_in_provider_process", lambda: True)
    monkeypatch.setattr(sys, "tracebacklimit", 1000, raising=False)
    with pytest.raises(component.GcoreInputError) as exc:
        api.provider(component.PoolProvider).create(pool_props(99999))
    assert "".join(traceback.format_exception(exc.value)) == f"gpupools.deploy.gcore.GcoreInputError: {UNKNOWN}\n"
    component._full_traceback()
    assert sys.tracebacklimit == 1000


# --------------------------------------------------------------------------------------------------------------------
# The facts file: what tools/refresh_cloud_facts.py gcore writes, read back by gpupools


def test_the_facts_file_reads_back_as_the_listing():
    section = {"source": {"api": "GET /cloud/v1/regions", "read": "2026-11-29"},
               "ids": {76: {"name": "Region-A", "state": "ACTIVE", "managedKubernetes": True, "gpu": True},
                       8: {"name": "Edge-C", "state": "ACTIVE", "managedKubernetes": False},
                       9: {"name": "Quiet", "state": "NEW"}}}
    got = gcore_regions(section)
    assert got.source == FACTS
    assert got.regions == {76: GcoreRegion(76, "Region-A", "ACTIVE", True, True), 8: GcoreRegion(8, "Edge-C", "ACTIVE", False, None),
                           9: GcoreRegion(9, "Quiet", "NEW", None, None)}


def test_an_installed_facts_file_is_what_the_plan_reads(monkeypatch):
    from gpupools.core import facts

    section = {"source": {"api": "GET /cloud/v1/regions", "read": "2026-11-29"},
               "ids": {76: {"name": "Region-A", "state": "ACTIVE", "managedKubernetes": True}}}
    monkeypatch.setattr(facts, "_shipped", lambda cloud: cloud == "gcore")
    monkeypatch.setattr(facts, "_read", lambda cloud: {"regions": section})
    assert facts.CloudFacts().gcore_regions == gcore_regions(section)
    monkeypatch.setattr(facts, "_shipped", lambda cloud: False)
    assert facts.CloudFacts().gcore_regions is None


def test_a_listing_whose_count_never_ends_stops_after_a_few_pages(api):
    endless = api.__call__

    def answer(request):
        if request.url.path == "/cloud/v1/regions":
            api.requests.append(f"{request.method} {request.url.path}")
            return httpx.Response(200, json={"count": 10**9, "results": LISTED[:2]})
        return endless(request)

    provider = component.PoolProvider(http_client=httpx.Client(transport=httpx.MockTransport(answer)), timeout=0.3, max_retries=0)
    assert refused(lambda: provider.create(pool_props(99999))) == UNKNOWN
    assert api.requests == [REGIONS] * component.REGION_PAGES

"""tools/refresh_cloud_facts.py reads each upstream format as it is, and the committed facts are what it writes."""

from __future__ import annotations

import importlib.util
import os
import textwrap

import pytest
import yaml

from conftest import ROOT

spec = importlib.util.spec_from_file_location("refresh_cloud_facts", ROOT / "tools" / "refresh_cloud_facts.py")
refresh = importlib.util.module_from_spec(spec)
spec.loader.exec_module(refresh)

# Rows as catalogs/v8/aws/vms.csv has them (GpuInfo shortened), a Local Zone row among them.
VMS_CSV = """InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch
g4dn.12xlarge,T4,4.0,48.0,192.0,"{'Gpus': [{'Name': 'T4'}]}",3.912,1.665800,us-west-2,usw2-az1,x86_64
g4dn.12xlarge,T4,4.0,48.0,192.0,"{'Gpus': [{'Name': 'T4'}]}",3.912,0.469400,us-west-2,usw2-lax1-az1,x86_64
g4dn.12xlarge,T4,4.0,48.0,192.0,"{'Gpus': [{'Name': 'T4'}]}",4.89,1.634900,eu-central-1,euc1-az3,x86_64
g4dn.12xlarge,T4,4.0,48.0,192.0,"{'Gpus': [{'Name': 'T4'}]}",4.89,1.583400,eu-central-1,euc1-az1,x86_64
g4ad.xlarge,Radeon Pro V520,1.0,4.0,16.0,"{'Gpus': []}",0.37853,0.174000,us-west-2,usw2-az3,x86_64
"""


def test_aws_offerings_by_zone_id_without_local_zones(tmp_path):
    path = tmp_path / "vms.csv"
    path.write_text(VMS_CSV)
    got = refresh.aws_offerings(path, "abc", ["g4dn.12xlarge", "p5.48xlarge"])
    assert got["types"] == {"g4dn.12xlarge": {"eu-central-1": ["euc1-az1", "euc1-az3"], "us-west-2": ["usw2-az1"]}, "p5.48xlarge": {}}
    assert got["source"]["commit"] == "abc"


def test_go_map_keeps_comment_groups():
    text = textwrap.dedent('''\
        var partitionSizeMaxCount = map[string]int{
        	//nvidia-tesla-a100
        	"1g.5gb":  7,
        	"4g.20gb": 1,
        	//nvidia-a100-80gb, nvidia-h100-80gb
        	"1g.10gb": 7,
        }
        ''')
    assert refresh.go_map(text, "partitionSizeMaxCount") == [
        ("nvidia-tesla-a100", "1g.5gb", "7"), ("nvidia-tesla-a100", "4g.20gb", "1"), ("nvidia-a100-80gb, nvidia-h100-80gb", "1g.10gb", "7")]


@pytest.mark.parametrize("variable, option", [("GKE_ACCELERATORS_CHECKOUT", "--gke-accelerators"),
                                              ("KARPENTER_AZURE_CHECKOUT", "--karpenter-azure")])
def test_committed_facts_are_what_the_tool_writes_from_the_source(variable, option, tmp_path, monkeypatch):
    """With a git checkout of the source named in $variable (docs/cloud-facts.md), regenerating changes nothing."""
    if not os.environ.get(variable):
        pytest.skip(f"set {variable} to a git checkout of the source to compare")
    checkout = os.environ[variable]
    cloud = "gcp" if "gke" in option else "azure"
    committed = yaml.safe_load((ROOT / "gpupools" / "core" / f"facts_{cloud}.yaml").read_text())
    monkeypatch.setattr(refresh, "CORE", tmp_path)
    monkeypatch.setattr(refresh, "TEST_DATA", tmp_path)
    (tmp_path / "catalog.yaml").write_text((ROOT / "gpupools" / "core" / "catalog.yaml").read_text())
    (tmp_path / f"facts_{cloud}.yaml").write_text((ROOT / "gpupools" / "core" / f"facts_{cloud}.yaml").read_text())
    assert refresh.main([option, str(checkout)]) == 0
    assert yaml.safe_load((tmp_path / f"facts_{cloud}.yaml").read_text()) == committed
    if cloud == "azure":  # and the tests' price reference
        assert (tmp_path / refresh.AZURE_PRICES).read_text() == (ROOT / "tests" / "core" / "data" / refresh.AZURE_PRICES).read_text()


def test_aws_regions_are_botocores():
    pytest.importorskip("botocore")
    import botocore

    committed = yaml.safe_load((ROOT / "gpupools" / "core" / "facts_aws.yaml").read_text())["regions"]
    if botocore.__version__ not in committed["source"]:
        pytest.skip(f"facts_aws.yaml was written with another botocore ({committed['source']})")
    assert committed == refresh.aws_regions()


KARPENTER_DOC = """## p6-b200 Family
### `p6-b200.48xlarge`
#### Labels
 | Label | Value |
 |--|--|
 |karpenter.k8s.aws/instance-cpu|192|
 |karpenter.k8s.aws/instance-gpu-count|8|
 |karpenter.k8s.aws/instance-gpu-manufacturer|nvidia|
 |karpenter.k8s.aws/instance-gpu-memory|183359|
 |karpenter.k8s.aws/instance-gpu-name|b200|
 |karpenter.k8s.aws/instance-local-nvme|30400|
 |karpenter.k8s.aws/instance-memory|2097152|
 |kubernetes.io/arch|amd64|
#### Resources
 | Resource | Quantity |
 |--|--|
 |nvidia.com/gpu|8|
 |vpc.amazonaws.com/efa|8|
## r3 Family
### `r3.large`
#### Labels
 | Label | Value |
 |--|--|
 |karpenter.k8s.aws/instance-cpu|2|
"""


def test_karpenter_reference_keeps_nvidia_types_with_labels_and_resources():
    found = refresh.karpenter_gpu_types(KARPENTER_DOC)
    assert list(found) == ["p6-b200.48xlarge"]
    row = found["p6-b200.48xlarge"]
    assert (row["karpenter.k8s.aws/instance-gpu-memory"], row["vpc.amazonaws.com/efa"], row["kubernetes.io/arch"]) == ("183359", "8", "amd64")
    prices = refresh.karpenter_us_east_1_prices('\t"us-east-1": {\n\t\t// p6-b200 family\n\t\t"p6-b200.48xlarge": 113.932800,\n\t},\n')
    assert prices == {"p6-b200.48xlarge": "113.932800"}


def test_committed_karpenter_tables_are_what_the_tool_writes(tmp_path):
    """With KARPENTER_AWS_CHECKOUT, a git checkout of aws/karpenter-provider-aws at v1.14.1, both TSVs come out unchanged."""
    checkout = os.environ.get("KARPENTER_AWS_CHECKOUT")
    if not checkout:
        pytest.skip("set KARPENTER_AWS_CHECKOUT to a git checkout of aws/karpenter-provider-aws at v1.14.1 to compare")
    for name, text in refresh.karpenter_tables(refresh.Path(checkout), "v1.14.1").items():
        assert (ROOT / "tests" / "core" / "data" / name).read_text() == text, name


def test_azure_prices_read_every_region_block():
    text = textwrap.dedent('''\
        func init() {
        	initialOnDemandPrices["eastus"] = map[string]float64{
        		"Standard_NC4as_T4_v3": 0.526000,
        		"Standard_ND96isr_H100_v5": 98.320000,
        	}
        	initialOnDemandPrices["eastus2"] = map[string]float64{
        		"Standard_ND96isr_H200_v5": 84.800000,
        	}
        }
        ''')
    assert refresh.azure_prices(text) == {"eastus": {"Standard_NC4as_T4_v3": 0.526, "Standard_ND96isr_H100_v5": 98.32},
                                          "eastus2": {"Standard_ND96isr_H200_v5": 84.8}}


# --- Gcore: the region listing of Gcore's API, through an httpx mock transport ---------------------------------------

GCORE_KEY = "7711$eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9-s3cr3t"
# As GET /cloud/v1/regions could answer (gcore 0.59.0 types/cloud/region.py Region), in pages of two; made-up names.
GCORE_ROWS = [{"id": 76, "display_name": "Region-A", "state": "ACTIVE", "has_k8s": True, "has_ai_gpu": True},
              {"id": 8, "display_name": "Edge\x1b[31m-C\n", "state": "ACTIVE", "has_k8s": False, "has_ai_gpu": False},
              {"id": 38, "display_name": "Region-B", "state": "MAINTENANCE"}]


def gcore_client(monkeypatch, answer):
    import httpx

    monkeypatch.setenv("GCORE_API_KEY", GCORE_KEY)
    monkeypatch.delenv("GCORE_BASE_URL", raising=False)
    seen = []

    def handler(request):
        seen.append(str(request.url))
        return answer(request)

    return refresh.gcore_client(httpx.Client(transport=httpx.MockTransport(handler))), seen


def gcore_pages(request):
    import httpx

    offset = int(request.url.params.get("offset", 0))
    return httpx.Response(200, json={"count": len(GCORE_ROWS), "results": GCORE_ROWS[offset:offset + 2]})


def test_gcore_regions_are_what_the_api_lists_with_the_call_and_the_day(monkeypatch, tmp_path):
    pytest.importorskip("gcore")
    import datetime

    from gpupools.clouds import gcore as decide
    from gpupools.core.facts import GcoreRegion, gcore_regions

    client, seen = gcore_client(monkeypatch, gcore_pages)
    monkeypatch.setattr(refresh, "gcore_client", lambda: client)
    monkeypatch.setattr(refresh, "CORE", tmp_path)
    assert refresh.main(["gcore"]) == 0
    assert seen == ["https://api.gcore.com/cloud/v1/regions?limit=1000", "https://api.gcore.com/cloud/v1/regions?limit=1000&offset=2"]
    written = (tmp_path / "facts_gcore.yaml").read_text()
    assert written.startswith(refresh.HEADER) and GCORE_KEY not in written and "\x1b" not in written
    import gcore

    today = datetime.date.today().isoformat()
    assert yaml.safe_load(written) == {"regions": {
        "source": {"api": "GET /cloud/v1/regions", "sdk": f"gcore {gcore.__version__} client.cloud.regions.list()",
                   "baseUrl": "https://api.gcore.com", "read": today},
        "ids": {8: {"name": "Edge-C", "state": "ACTIVE", "managedKubernetes": False, "gpu": False},
                38: {"name": "Region-B", "state": "MAINTENANCE"},
                76: {"name": "Region-A", "state": "ACTIVE", "managedKubernetes": True, "gpu": True}}}}
    # What gpupools reads of it, and decides with it.
    listing = gcore_regions(yaml.safe_load(written)["regions"])
    assert listing.regions[76] == GcoreRegion(76, "Region-A", "ACTIVE", True, True)
    assert decide.region_refusal(99999, listing) == (f"99999 is not a Gcore region ID (facts_gcore.yaml, Gcore's GET /cloud/v1/regions of "
                                                     f"{today}); closest with Managed Kubernetes: 76 (Region-A), 38 (Region-B)")


@pytest.mark.parametrize("answer, line", [
    (lambda r: __import__("httpx").Response(401, json={"message": f"bad token APIKey {GCORE_KEY}"}),
     "error: gcore: Gcore's API answered GET /cloud/v1/regions with HTTP 401; check GCORE_API_KEY"),
    (lambda r: __import__("httpx").Response(302, headers={"location": f"https://elsewhere.test/?k={GCORE_KEY}"}),
     "error: gcore: Gcore's API answered GET /cloud/v1/regions with HTTP 302; check GCORE_BASE_URL"),
    (lambda r: (_ for _ in ()).throw(__import__("httpx").ReadTimeout("timed out")),
     "error: gcore: Gcore's API did not answer GET /cloud/v1/regions within 30 s"),
])
def test_a_failed_gcore_listing_is_one_line_without_the_key_and_writes_nothing(monkeypatch, tmp_path, capsys, answer, line):
    pytest.importorskip("gcore")
    client, seen = gcore_client(monkeypatch, answer)
    monkeypatch.setattr(refresh, "gcore_client", lambda: client.with_options(max_retries=0))
    monkeypatch.setattr(refresh, "CORE", tmp_path)
    assert refresh.main(["gcore"]) == 2
    assert capsys.readouterr().err == line + "\n"
    assert len(seen) == 1 and not (tmp_path / "facts_gcore.yaml").exists()  # a redirect is not followed


def test_gcore_needs_its_key_and_is_the_only_named_source(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("GCORE_API_KEY", raising=False)
    monkeypatch.setattr(refresh, "CORE", tmp_path)
    assert refresh.main(["gcore"]) == 2
    assert capsys.readouterr().err == ("error: gcore: GCORE_API_KEY is not set: Gcore lists its regions only to an authenticated "
                                       "caller\n")
    with pytest.raises(SystemExit) as exc:
        refresh.main(["gcp"])
    assert exc.value.code == 2 and "unknown source 'gcp'; the only one named so is gcore" in capsys.readouterr().err

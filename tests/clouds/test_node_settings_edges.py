"""The `node:` pass-through checker and merger on a small synthetic node API: each type, enum, map and list rule,
owned and replacing fields (a prefix covers what is under it), the merge order (gpupools wins except at its defaults),
and the plan lines (a value that may be a credential is described, never shown). Pure, no plan."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

MODEL = {"type": "object", "fields": {
    "count": {"type": "integer"}, "ratio": {"type": "number"}, "name": {"type": "string"}, "spot": {"type": "boolean"},
    "size": {"type": "int-or-string"}, "mode": {"type": "string", "enum": ["User", "System"]},
    "zones": {"type": "array", "items": {"type": "string"}}, "tags": {"type": "map", "values": {"type": "string"}},
    "kubelet": {"type": "object", "fields": {"maxPods": {"type": "integer"}, "imageGc": {"type": "integer"}}},
    "labels": {"type": "map", "values": {"type": "string"}}, "osDisk": {"type": "object", "fields": {"sizeGb": {"type": "integer"}}},
}}


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    from gpupools.clouds.node_settings import NodeApi

    path = tmp_path_factory.mktemp("node") / "node_api.json"
    path.write_text(json.dumps({"model": MODEL}))
    return NodeApi("AKS", "AgentPool", path, owned={("labels",): "set pools[].labels", ("kubelet", "maxPods"): "set pools[].maxPods"},
                   replaces={("osDisk",): "replaces the pool's nodes", ("zones",): "replaces the pool"}, defaults=frozenset({("osDisk", "sizeGb")}))


def lines(api, node):
    from gpupools.clouds.node_settings import node_problems

    return [f"{p.path}: {p.message}" for p in node_problems(api, node, "pools[0].node")]


@pytest.mark.parametrize("field, good, bad", [
    ("count", 3, True), ("count", 3, 2.5), ("ratio", 0.5, True), ("ratio", 2, "x"), ("name", "a", 1), ("spot", False, 0),
    ("size", "10Gi", True), ("size", 10, 1.5), ("zones", ["1"], "1"), ("tags", {"a": "b"}, ["a"]), ("kubelet", {"imageGc": 80}, "x"),
])
def test_each_type_takes_its_own_values_only(api, field, good, bad):
    """Protects the cloud API call: a wrongly typed `node:` value is refused at check time, not by the cloud at `up`
    (a boolean is no integer or number, as in Python's bool subclass)."""
    assert lines(api, {field: good}) == []
    (line,) = lines(api, {field: bad})
    assert line.startswith(f"pools[0].node.{field}: expected ")


@pytest.mark.parametrize("field, bad, words", [
    ("count", "x", "an integer"), ("ratio", "x", "a number"), ("name", 1, "a string"), ("spot", "yes", "true or false"),
    ("size", 1.5, "a number or a string"), ("zones", "1", "a list"), ("tags", "x", "a mapping"), ("kubelet", "x", "a mapping"),
])
def test_a_wrong_type_says_what_the_field_takes(api, field, bad, words):
    (line,) = lines(api, {field: bad})
    assert line.startswith(f"pools[0].node.{field}: expected {words}, got ")


def test_enum_values_and_nested_items_are_checked(api):
    assert lines(api, {"mode": "User"}) == []
    assert lines(api, {"mode": "Spot"}) == ["pools[0].node.mode: not a value AKS takes here; allowed: User, System"]
    assert lines(api, {"mode": 3}) == ["pools[0].node.mode: expected one of User, System, got a number of 1 digit"]
    assert lines(api, {"zones": ["1", 2]}) == ["pools[0].node.zones[1]: expected a string, got a number of 1 digit"]
    assert lines(api, {"tags": {"team": 1}}) == ["pools[0].node.tags.team: expected a string, got a number of 1 digit"]
    assert lines(api, {"tags": {1: "x"}})[0].startswith("pools[0].node.tags: keys are strings")
    assert lines(api, {1: "x"})[0].startswith("pools[0].node: keys are field names")
    assert lines(api, {"kubelet": {"imageGc": "x"}})[0].startswith("pools[0].node.kubelet.imageGc: expected an integer, got ")
    assert lines(api, None) == []
    assert lines(api, ["x"])[0].startswith("pools[0].node: expected a mapping of AKS AgentPool fields")


def test_owned_fields_say_where_to_set_them_and_unknown_ones_the_closest(api):
    """Protects gpupools' own settings (labels, maxPods) from being overridden through `node:`."""
    assert lines(api, {"labels": {"a": "b"}}) == ["pools[0].node.labels: gpupools sets this itself; set pools[].labels"]
    assert lines(api, {"kubelet": {"maxPods": 30}}) == ["pools[0].node.kubelet.maxPods: gpupools sets this itself; set pools[].maxPods"]
    (unknown,) = lines(api, {"cont": 1})
    assert unknown == "pools[0].node.cont: not a field of AKS's AgentPool; closest: count"
    (nested,) = lines(api, {"kubelet": {"maxPod": 1}})
    # The owned maxPods is not offered as the closest name.
    assert nested.startswith("pools[0].node.kubelet.maxPod: not a field of AKS's kubelet; ") and "maxPods" not in nested.split(";")[1]
    (case,) = lines(api, {"COUNT": 1})
    assert case.endswith("closest: count")


def test_an_unknown_field_without_a_close_name_lists_the_fields_cut_at_twelve(api, tmp_path):
    """A key that is not name-like (it may be a secret pasted in the wrong place) is described, not spelled, and gets the
    list of fields rather than a guess; a long list is cut at twelve names."""
    from gpupools.clouds.node_settings import NodeApi

    (short,) = lines(api, {"zzzzzzzz": 1})
    assert short == ("pools[0].node.zzzzzzzz: not a field of AKS's AgentPool; fields: count, kubelet, mode, name, osDisk, ratio, "
                     "size, spot, tags, zones")
    path = tmp_path / "node_api.json"
    path.write_text(json.dumps({"model": {"type": "object", "fields": {f"f{i:02}": {"type": "string"} for i in range(13)}}}))
    (long,) = lines(NodeApi("GKE", "NodePool", path, owned={}), {"zzzzzzzz": 1})
    assert long.endswith("fields: f00, f01, f02, f03, f04, f05, f06, f07, f08, f09, f10, f11, ...")
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    (hidden,) = lines(api, {secret: 1})
    assert secret not in hidden and hidden.startswith("pools[0].node.<")


def test_paths_replacements_and_plan_lines(api):
    from gpupools.clouds.node_settings import node_lines, paths_set, replacement

    node = {"zones": ["1", "2"], "osDisk": {"sizeGb": 200}, "kubelet": {"imageGc": 80}, "unknown": 1}
    assert paths_set(node, api) == [("zones",), ("osDisk", "sizeGb"), ("kubelet", "imageGc")]
    assert paths_set(None, api) == []
    assert replacement(api, ("osDisk", "sizeGb")) == "replaces the pool's nodes"
    assert replacement(api, ("kubelet", "imageGc")) is None
    assert node_lines(api, node) == ["zones: [1, 2] (warning: replaces the pool)", "osDisk.sizeGb: 200 (warning: replaces the pool's nodes)",
                                     "kubelet.imageGc: 80"]
    assert node_lines(None, node) == [] and node_lines(api, {}) == []


def test_plan_lines_show_names_and_numbers_but_describe_secrets(api):
    from gpupools.clouds.node_settings import _value_text

    assert _value_text(True) == "true" and _value_text(False) == "false" and _value_text(2.5) == "2.5"
    assert _value_text({"team": "ml", "n": 2}) == "{team: ml, n: 2}"
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    assert secret not in _value_text(secret) and secret not in _value_text({"token": secret}) and secret not in _value_text([secret])


def test_merge_keeps_gpupools_values_except_its_defaults():
    """Protects what makes the pool work (gpupools' inputs win) while letting `node:` replace gpupools' defaults."""
    from gpupools.clouds.node_settings import merged

    ours = {"count": 2, "osDisk": {"sizeGb": 100, "type": "Managed"}, "kubelet": {"maxPods": 30}}
    node = {"count": 9, "osDisk": {"sizeGb": 500}, "kubelet": {"imageGc": 80}, "spot": True}
    out = merged(ours, node, frozenset({("osDisk", "sizeGb")}))
    assert out == {"count": 2, "osDisk": {"sizeGb": 500, "type": "Managed"}, "kubelet": {"imageGc": 80, "maxPods": 30}, "spot": True}
    assert node == {"count": 9, "osDisk": {"sizeGb": 500}, "kubelet": {"imageGc": 80}, "spot": True}  # not changed
    assert merged(ours, None) is ours
    # Without the default, gpupools' size wins; a scalar of ours replaces a mapping of theirs.
    assert merged(ours, node)["osDisk"]["sizeGb"] == 100
    assert merged({"kubelet": 1}, {"kubelet": {"a": 1}}) == {"kubelet": 1}


def test_stack_and_system_pool_checks_name_what_is_not_taken(api):
    from gpupools.clouds.node_settings import stack_node_problems, system_node_problems

    pool = SimpleNamespace(node={"count": "x"})
    bare = SimpleNamespace(SERVICE="Gcore")
    assert [p.path for p in stack_node_problems(bare, pool, "pools[0]", "karpenter")] == ["pools[0].node"]
    assert stack_node_problems(bare, SimpleNamespace(node=None), "pools[0]", "karpenter") == []
    extra = SimpleNamespace(SERVICE="AKS", NODE_API=api, node_setting_problems=lambda *a: ["extra"])
    assert [p.path for p in stack_node_problems(extra, pool, "pools[0]", "karpenter")] == ["pools[0].node.count"]
    assert stack_node_problems(extra, SimpleNamespace(node={"count": 1}), "pools[0]", "karpenter") == ["extra"]

    def cluster(create, node):
        return SimpleNamespace(create=create, system_pool=SimpleNamespace(node=node))

    cloud = SimpleNamespace(SERVICE="AKS", SYSTEM_NODE_API=api)
    assert system_node_problems(cloud, cluster(True, {"count": 1})) == []
    assert [p.path for p in system_node_problems(cloud, cluster(True, {"count": "x"}))] == ["cluster.systemPool.node.count"]
    (existing,) = system_node_problems(cloud, cluster(False, {"count": 1}))
    assert "the cluster exists already" in existing.message
    (none,) = system_node_problems(SimpleNamespace(SERVICE="Gcore"), cluster(True, {"count": 1}))
    assert "Gcore takes none here" in none.message
    assert system_node_problems(cloud, cluster(True, None)) == []
    assert system_node_problems(cloud, SimpleNamespace(create=True, system_pool=None)) == []

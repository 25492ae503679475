"""tests/conftest.py parses long YAML texts with LibYAML's CSafeLoader: it must give what PyYAML's SafeLoader gives."""

from __future__ import annotations

import math

import pytest
import yaml

import conftest
from conftest import ROOT

TRICKY = """\
base: &base {name: a, replicas: 2, tolerations: [{key: nvidia.com/gpu, operator: Exists}]}
merged:
  <<: *base
  replicas: 3
shared: [*base, *base]
when: 2026-11-29T05:27:35Z
day: 2026-11-29
octal: 0o17
old_octal: 017
sexagesimal: 1:20
bools: [yes, No, on, OFF, true]
nulls: [~, null, ]
floats: [.inf, -.Inf, .nan, 1e3, 6.02e+23]
binary: !!binary aGVsbG8=
folded: >
  one
  two
literal: |-
  keep
    this
quoted: ["a\\tb", 'it''s', "\\u00e9"]
"""


# Forty documents' worth under one mapping (each with its own anchor): long enough for the kept path.
LONG = "\n".join(f"doc{i}:\n" + "\n".join("  " + line.replace("&base", f"&base{i}").replace("*base", f"*base{i}")
                                           for line in TRICKY.splitlines()) for i in range(40))


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _long_texts(count: int) -> list:
    """The shortest `count` YAML files of the checkout that conftest's loader takes (parsing them all in Python would
    take many seconds; these cover CRDs, chart values and stacks)."""
    found = [p for p in ROOT.glob("tests/reference/**/*.y*ml") if p.stat().st_size >= conftest._KEPT_FROM]
    return sorted(found, key=lambda p: (p.stat().st_size, p.as_posix()))[:count]


@pytest.mark.parametrize("path", _long_texts(12), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_long_files_parse_to_the_same_data(path):
    text = path.read_text()
    assert _same(list(yaml.load_all(text, Loader=conftest.LONG_TEXT_LOADER)), list(yaml.load_all(text, Loader=yaml.SafeLoader)))


def test_anchors_merges_and_implicit_types_parse_alike():
    text = LONG
    assert len(text) >= conftest._KEPT_FROM
    c, python = yaml.load(text, Loader=conftest.LONG_TEXT_LOADER), yaml.load(text, Loader=yaml.SafeLoader)
    assert _same(c, python)
    assert c["doc3"]["merged"]["name"] == "a" and c["doc3"]["merged"]["replicas"] == 3 and c["doc3"]["binary"] == b"hello"
    assert c["doc3"]["shared"][0] is c["doc3"]["shared"][1] is c["doc3"]["base"]


def test_kept_parses_are_copies_with_anchors_still_shared():
    text = LONG
    first, second = yaml.safe_load(text), yaml.safe_load(text)
    assert _same(first, second) and first is not second
    first["doc0"]["base"]["name"] = "changed"
    assert second["doc0"]["base"]["name"] == "a"
    assert first["doc0"]["shared"][0] is first["doc0"]["shared"][1] is first["doc0"]["base"]


def test_a_text_that_does_not_parse_raises_every_time():
    text = "key: [unclosed\n" + "# pad\n" * 1000
    for _ in range(2):
        with pytest.raises(yaml.YAMLError):
            yaml.safe_load(text)


def test_the_loader_is_libyaml_where_pyyaml_has_it():
    assert conftest.LONG_TEXT_LOADER is (yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader)

"""JSON nesting is limited by counting brackets, not by whatever recursion limit the process happens to have."""

from __future__ import annotations

import sys

import pytest

from gpupools.stack.reading import MAX_DEPTH, ReadError, load_json


@pytest.mark.parametrize("limit", [1000, 100_000])
def test_deep_json_is_refused_whatever_the_recursion_limit(limit):
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        for text in ("[" * 2000, "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), '{"a": ' * 40 + "1" + "}" * 40):
            with pytest.raises(ReadError, match="nested more than"):
                load_json(text)
    finally:
        sys.setrecursionlimit(before)


def test_brackets_inside_strings_do_not_count():
    assert load_json('{"a": "' + "[" * 100 + '", "b": "\\"{{{"}') == {"a": "[" * 100, "b": '"{{{'}
    assert load_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None

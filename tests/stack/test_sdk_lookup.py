"""Whether a cloud's provider SDK is installed: looked up on sys.path once per process, and asked of sys.modules first."""

from __future__ import annotations

import sys

from gpupools.stack import providers


def test_an_sdk_marked_not_importable_is_missing_even_after_it_was_found(monkeypatch):
    assert providers.sdk_installed("gcp")  # found (and, if not imported yet, remembered)
    monkeypatch.setitem(sys.modules, "pulumi_gcp", None)  # what `import pulumi_gcp` then does: ImportError
    assert not providers.sdk_installed("gcp")
    assert providers.sdk_installed("aws")


def test_a_package_not_imported_is_looked_up_on_the_path_once(monkeypatch):
    calls = []
    real = providers.importlib.util.find_spec
    monkeypatch.setattr(providers.importlib.util, "find_spec", lambda name, *a: calls.append(name) or real(name, *a))
    providers._on_path.cache_clear()
    monkeypatch.delitem(sys.modules, "pulumi_gcp", raising=False)
    assert providers.sdk_installed("gcp") and providers.sdk_installed("gcp")
    assert calls == ["pulumi_gcp"]
    assert not providers._on_path("gpupools_no_such_sdk") and not providers._on_path("gpupools_no_such_sdk")
    assert calls == ["pulumi_gcp", "gpupools_no_such_sdk"]

"""Shipped YAML files are parsed once per text and kept beside their bytecode; the answer never depends on the copy."""

from __future__ import annotations

import os
import sys

import pytest
import yaml

from gpupools.core import packaged


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package `shipped` holding data.yaml, importable for the duration of the test, bytecode written as usual."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    folder = tmp_path / "shipped"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "data.yaml").write_text("a: 1\nb: [x, 2026-05-01]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield folder
    sys.modules.pop("shipped", None)


def kept(folder):
    return sorted(p.name for p in (folder / "__pycache__").glob("*.pickle")) if (folder / "__pycache__").exists() else []


def test_the_first_read_parses_and_keeps_a_copy_the_second_reads_it(package, monkeypatch):
    first = packaged.read("data.yaml", "shipped")
    assert first == yaml.safe_load((package / "data.yaml").read_text())
    assert kept(package) == [packaged.cache_file(package, "data.yaml", (package / "data.yaml").read_text()).name]
    monkeypatch.setattr(packaged, "parse", lambda text: pytest.fail("parsed although a copy was kept"))
    assert packaged.read("data.yaml", "shipped") == first


def test_a_changed_text_is_parsed_again_and_the_old_copy_goes(package):
    packaged.read("data.yaml", "shipped")
    old = kept(package)
    (package / "data.yaml").write_text("a: 2\n")
    assert packaged.read("data.yaml", "shipped") == {"a": 2}
    assert len(kept(package)) == 1 and kept(package) != old
    (package / "other.yaml").write_text("c: 3\n")
    packaged.read("other.yaml", "shipped")
    assert len(kept(package)) == 2  # each file's copy is its own


def test_a_damaged_copy_is_parsed_again_and_replaced(package):
    packaged.read("data.yaml", "shipped")
    copy = package / "__pycache__" / kept(package)[0]
    copy.write_bytes(b"\x80\x05not a pickle")
    assert packaged.read("data.yaml", "shipped")["a"] == 1
    copy.write_bytes(b"")
    assert packaged.read("data.yaml", "shipped")["a"] == 1
    assert packaged.read("data.yaml", "shipped") == yaml.safe_load((package / "data.yaml").read_text())


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_folder_that_cannot_be_written_gives_the_same_answer(package):
    package.chmod(0o555)
    try:
        assert packaged.read("data.yaml", "shipped")["a"] == 1 and kept(package) == []
    finally:
        package.chmod(0o755)


def test_a_folder_that_cannot_be_written_gives_the_same_answer_as_any_user(package, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(packaged.tempfile, "mkstemp", refuse)
    assert packaged.read("data.yaml", "shipped")["a"] == 1 and kept(package) == []


@pytest.mark.parametrize("name", ["catalog.yaml", "facts_aws.yaml", "facts_azure.yaml", "facts_gcp.yaml", "mig-parted-default.yaml"])
def test_every_shipped_file_reads_as_its_text_parses(name):
    from importlib import resources

    assert packaged.read(name) == yaml.safe_load(resources.files("gpupools.core").joinpath(name).read_text())


def test_nothing_is_written_where_python_writes_no_bytecode(package, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert packaged.read("data.yaml", "shipped")["a"] == 1 and kept(package) == []


def test_a_package_inside_a_zip_is_parsed_without_a_kept_copy(tmp_path, monkeypatch):
    import zipfile

    archive = tmp_path / "shipped.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped/__init__.py", "")
        z.writestr("zipped/data.yaml", "a: 1\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.syspath_prepend(str(archive))
    try:
        assert packaged.read("data.yaml", "zipped") == {"a": 1}
        assert zipfile.ZipFile(archive).namelist() == ["zipped/__init__.py", "zipped/data.yaml"]
    finally:
        sys.modules.pop("zipped", None)

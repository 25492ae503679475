"""`gpupools render --out DIR` writes inside DIR only: a symbolic link inside DIR (a committed `DIR/manifests ->
/somewhere`, a values file linked to a file elsewhere) is refused with one line naming it, exit 2, before anything is
written; a file there is replaced, never written into, so a hard link keeps the other name's contents."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpupools.cli import render
from gpupools.cli.main import app

runner = CliRunner()


def rendered(out: Path):
    return runner.invoke(app, ["render", "--stack", "dev-aws", "--out", str(out)])


def one_line(result, path: Path) -> str:
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stderr == (f"error: --out: {str(path)!r} is a symbolic link; gpupools render writes only inside the output folder "
                             f"and follows no link in it: remove it, or give another folder\n")
    return result.stderr


def files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def outside(tmp_path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "keep.txt").write_text("untouched\n")
    return folder


def test_a_linked_manifests_folder_is_refused_and_nothing_is_written(tmp_path, outside):
    out = tmp_path / "rendered"
    out.mkdir()
    (out / "manifests").symlink_to(outside, target_is_directory=True)
    one_line(rendered(out), out / "manifests")
    assert files(outside) == {"keep.txt": "untouched\n"}
    assert sorted(p.name for p in out.iterdir()) == ["manifests"]  # nothing written before the refusal


def test_a_linked_values_file_is_refused_and_its_target_kept(tmp_path, outside):
    out = tmp_path / "rendered"
    out.mkdir()
    (out / "kueue.values.yaml").symlink_to(outside / "keep.txt")
    one_line(rendered(out), out / "kueue.values.yaml")
    assert (outside / "keep.txt").read_text() == "untouched\n"


def test_a_link_deeper_in_the_folder_is_refused(tmp_path, outside):
    first = tmp_path / "first"
    assert rendered(first).exit_code == 0
    victim = sorted((first / "manifests").iterdir())[0]
    victim.unlink()
    victim.symlink_to(outside / "keep.txt")
    one_line(rendered(first), victim)
    assert (outside / "keep.txt").read_text() == "untouched\n"


def test_a_dangling_link_is_refused_too(tmp_path):
    out = tmp_path / "rendered"
    out.mkdir()
    (out / "grafana").symlink_to(tmp_path / "does-not-exist")
    one_line(rendered(out), out / "grafana")
    assert not (tmp_path / "does-not-exist").exists()


def test_a_hard_link_is_replaced_not_written_into(tmp_path, outside):
    out = tmp_path / "rendered"
    out.mkdir()
    os.link(outside / "keep.txt", out / "kueue.values.yaml")
    result = rendered(out)
    assert result.exit_code == 0, result.stderr
    assert (outside / "keep.txt").read_text() == "untouched\n"
    assert (out / "kueue.values.yaml").read_text().startswith("# Helm values for release kueue")


def test_rendering_again_replaces_the_files_and_leaves_no_temporary_file(tmp_path):
    out = tmp_path / "rendered"
    assert rendered(out).exit_code == 0
    before = files(out)
    (out / "kueue.values.yaml").write_text("stale\n")
    assert rendered(out).exit_code == 0
    assert files(out) == before and not [p for p in out.rglob(".*gpupools-*")]


def test_the_output_folder_itself_may_be_a_link(tmp_path):
    """The caller names DIR, link or not; the rule is about what is inside it."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "out").symlink_to(real, target_is_directory=True)
    assert rendered(tmp_path / "out").exit_code == 0
    assert (real / "manifests").is_dir()


def test_a_link_made_after_the_first_look_is_refused_by_the_write_itself(tmp_path, outside, monkeypatch):
    """The writes go through folder descriptors with O_NOFOLLOW, so a link that appears between the check and the
    write is refused too."""
    out = tmp_path / "rendered"
    out.mkdir()
    (out / "manifests").symlink_to(outside, target_is_directory=True)
    monkeypatch.setattr(render, "_check_paths", lambda out, rels: None)
    one_line(rendered(out), out / "manifests")
    assert files(outside) == {"keep.txt": "untouched\n"}

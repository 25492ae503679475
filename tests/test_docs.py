"""The docs cannot rot silently: every relative link and anchor in README and docs/ resolves, every stack key the
models accept is in the config reference (and nothing there that they do not accept), and README's example is the
example stack with the plan it really gets."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE = re.compile(r"(`+).+?\1")
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def prose(text: str) -> str:
    """The page without fenced blocks and inline code, where brackets and parentheses are not links."""
    return CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's heading anchor (github-slugger): the rendered text, lower case, without punctuation other than '-'
    and '_', spaces turned into '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"(\*\*|__|\*)", "", text)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    out.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", page.read_text()))
    return out


def links(page: Path) -> list[str]:
    return [target for _, target in LINK.findall(prose(page.read_text()))]


def shown(file: Path) -> Path:
    return file.relative_to(ROOT) if file.is_relative_to(ROOT) else file


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not ours to resolve offline
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {shown(file)}")
        elif anchor and (file.suffix != ".md" or anchor not in anchors(file)):
            broken.append(f"{target}: no heading with anchor #{anchor} in {shown(file)}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    assert broken_links(page) == []


def test_the_link_check_finds_what_is_broken(tmp_path):
    (tmp_path / "a.md").write_text("# Top\n\n## Pools and clouds\n\n## `gpupools idle`: the report\n\n## Top\n\n"
                                   "[ok](#pools-and-clouds) [ok](#gpupools-idle-the-report) [ok](#top-1) [ok](b.md#b-c)\n"
                                   "[bad](#pools) [bad](b.md#nope) [bad](c.md) `[not a link](c.md)`\n\n```\n[nor](d.md)\n```\n")
    (tmp_path / "b.md").write_text("# B: c?\n")
    found = [b.split(":")[0] for b in broken_links(tmp_path / "a.md")]
    assert found == ["#pools", "b.md#nope", "c.md"]
    assert slug("Autoscaling from zero") == "autoscaling-from-zero" and slug("vGPUs with HAMi") == "vgpus-with-hami"


def test_readme_links_a_page_for_every_capability_and_stays_short():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 210
    linked = {Path(t.partition("#")[0]).name for t in links(ROOT / "README.md") if t.startswith("docs/")}
    assert {p.name for p in (ROOT / "docs").glob("*.md")} <= linked


# --------------------------------------------------------------------------------------------------------------------
# Stack keys: the models against docs/stack-config.md


def models_in(annotation) -> tuple[list[type[BaseModel]], bool]:
    """The pydantic models a field's type holds, through Optional, Annotated, unions and lists (not dicts, whose
    keys are data), and whether they sit in a list."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation], False
    if origin is list:
        return models_in(typing.get_args(annotation)[0])[0], True
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        args = typing.get_args(annotation)
        found = [models_in(a) for a in (args[:1] if origin is typing.Annotated else args)]
        return [m for ms, _ in found for m in ms], any(listy for _, listy in found)
    return [], False


def stack_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every key a stack may set, spelled as the stack file spells it (the models' aliases): `cluster.name`,
    `pools[].sharing.mode`, `monitoring.idle.forHours`."""
    from gpupools.stack.config import StackConfig

    keys = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        if model is StackConfig and key == "providers":  # the provider namespaces' keys, documented in their own table
            continue
        nested, listy = models_in(field.annotation)
        path = prefix + key + ("[]" if listy and nested else "")
        keys += [k for m in nested for k in stack_keys(m, path + ".")] if nested else [path]
    return keys


def documented_keys() -> set[str]:
    """The first cell of every row of the key tables: `gpupools:<key>`, or `pools[].<key>` / `teams[].<key>` / `departments[].<key>`."""
    text = FENCE.sub("", (ROOT / "docs" / "stack-config.md").read_text())
    cells = re.findall(r"^\| `([^`]+)` \|", text, re.M)
    return {c.removeprefix("gpupools:") for c in cells if c.startswith(("gpupools:", "pools[]", "teams[]", "departments[]"))}


def test_every_stack_key_is_in_the_config_reference():
    from gpupools.stack.config import StackConfig

    keys = stack_keys(StackConfig)
    assert {"cluster.name", "pools[].sharing.migProfile", "monitoring.idle.forHours", "teams[].alerts.slack.webhook"} <= set(keys)
    documented = documented_keys()
    # The stack-wide sharing default takes the same keys as a pool's own, which the reference lists once.
    missing = [k for k in keys if k not in documented
               and not (k.startswith("sharing.") and "sharing" in documented and f"pools[].{k}" in documented)]
    assert missing == [], f"stack keys not documented in docs/stack-config.md: {missing}"
    ancestors = {".".join(k.split(".")[:i]) for k in keys for i in range(1, k.count(".") + 1)}
    parents = ancestors | {a.removesuffix("[]") for a in ancestors}
    stale = sorted(d for d in documented if d not in keys and d.removesuffix("[]") not in parents)
    assert stale == [], f"docs/stack-config.md documents keys the stack file does not take: {stale}"


# --------------------------------------------------------------------------------------------------------------------
# README's example: the example stack, and what `gpupools plan` prints for it


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.S | re.M)


def test_readme_example_is_the_example_stack_and_its_real_plan():
    from typer.testing import CliRunner

    from gpupools.cli.main import app

    readme = (ROOT / "README.md").read_text()
    stack = next(b for b in blocks(readme, "yaml") if "gpupools:cloud" in b)
    assert yaml.safe_load(stack) == yaml.safe_load((ROOT / "stacks" / "Pulumi.dev-aws.yaml").read_text())
    shown = next(b for b in blocks(readme, "text") if b.startswith("gpupools plan: stack dev-aws")).splitlines()
    result = CliRunner().invoke(app, ["plan", "--stack", "dev-aws"])
    assert result.exit_code == 0, result.output
    # The README shows the plan of a clone at ~/gpupools, with parts left out where a line reads `...`; what it shows
    # is there, in order, word for word (lines may break elsewhere: the path's length moves where they wrap).
    words = lambda lines: " ".join(" ".join(lines).split())
    real = words(result.stdout.replace(str(ROOT), "~/gpupools").splitlines())
    at = 0
    for part in "\n".join(shown).split("\n...\n"):
        found = real.find(words(part.splitlines()), at)
        assert found >= 0, f"README's plan is not what `gpupools plan --stack dev-aws` prints: {part[:300]!r}"
        at = found + len(words(part.splitlines()))


def test_readme_names_every_example_stack():
    """The "Two commands" line and the paragraph of example stacks name every stacks/Pulumi.<stack>.yaml."""
    readme = (ROOT / "README.md").read_text()
    two_commands = next(line for line in readme.splitlines() if line.startswith("./dev plan dev-aws"))
    for path in sorted((ROOT / "stacks").glob("Pulumi.*.yaml")):
        stack = path.name[len("Pulumi."):-len(".yaml")]
        assert stack in two_commands.replace("./dev plan dev-aws", "dev-aws"), stack
        if stack != "dev-aws":  # the example the README shows in full
            assert re.search(rf"`{re.escape(stack)}`\s+\(", readme), stack


def test_the_docs_give_the_idle_reports_answer_limit_the_code_uses():
    from gpupools.idle.promapi import MAX_ANSWER_BYTES

    limit = f"{MAX_ANSWER_BYTES // 2**20} MiB"
    for doc in ("docs/stack-config.md", "docs/monitoring.md"):
        text = (ROOT / doc).read_text()
        stated = set(re.findall(r"more than (\d+ MiB)", text))
        assert stated == {limit}, f"{doc} says {sorted(stated)}, the code allows {limit}"


# --------------------------------------------------------------------------------------------------------------------
# Every `gpupools ...` command the pages show, against the command line's real commands and options


BLOCK = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1", re.S | re.M)
COMMAND = re.compile(r"^\s*(?:\$\s+)?(?:\S*/)?gpupools\s+[a-z][a-z-]*(?:\s|$)")
INLINE = re.compile(r"(`+)(.+?)\1")


def shown_commands(text: str) -> list[tuple[str, bool]]:
    """(command, inline) for every `gpupools <command> ...` a page shows: a line of a fenced block (continued by a
    trailing backslash, or by indented lines that go on with options, as a usage summary wraps) and an inline code
    span that starts with one. A line such as `gpupools plan: stack dev-aws ...` is output, not a command."""
    found: list[tuple[str, bool]] = []
    for block in BLOCK.finditer(text):
        current: str | None = None
        for line in block.group(2).splitlines():
            if current is not None and (current.endswith("\\") or re.match(r"\s+[\[-]", line)):
                current = current.removesuffix("\\").rstrip() + " " + line.strip()
                continue
            if current is not None:
                found.append((current, False))
            current = line.strip() if COMMAND.match(line) else None
        if current is not None:
            found.append((current, False))
    found += [(span.group(2), True) for span in INLINE.finditer(FENCE.sub("", text)) if COMMAND.match(span.group(2))]
    return found


def command_problem(command: str, inline: bool) -> str | None:
    """Why the command line would refuse `command` as written, by its own parser (no command runs): an unknown
    command, an unknown option, an option without its value, a stray argument. Usage notation is read as such:
    `[...]` and `|` around options, `...` for what is left out, `# comments`. An inline span may name an option
    without its value (`gpupools workload --fraction`)."""
    import shlex

    from typer.main import get_command

    from gpupools.cli.main import app

    tokens = [t.strip("[]") for t in shlex.split(re.sub(r"^\s*\$\s+", "", command), comments=True)]
    tokens = [t for t in tokens if t and t not in ("|", "...")]
    group = get_command(app)
    name, args = tokens[1], tokens[2:]
    cmd = group.commands.get(name)
    if cmd is None:
        return f"no command {name!r} (gpupools has {', '.join(group.commands)})"
    parser = cmd.make_parser(cmd.context_class(cmd, info_name=name))
    for attempt in (args, args + ["VALUE"]):
        try:
            _, rest, _ = parser.parse_args(list(attempt))
        except Exception as exc:  # click's usage errors: NoSuchOption, BadOptionUsage
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            if inline and attempt is args and "requires an argument" in message:
                continue
            return message
        return f"unexpected argument {rest[0]!r}" if rest else None
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_gpupools_command_a_page_shows_is_one_the_command_line_takes(page):
    wrong = [f"{command}: {problem}" for command, inline in shown_commands(page.read_text())
             if (problem := command_problem(command, inline))]
    assert wrong == []


def test_the_pages_show_commands_and_the_check_finds_what_is_wrong():
    everything = [c for page in PAGES for c in shown_commands(page.read_text())]
    assert len(everything) > 40 and {c.split()[1] for c, _ in everything} == {"plan", "render", "workload", "catalog", "check", "idle"}
    # The Autopilot page shows its idle report as a whole command, so the check covers its options too.
    autopilot = [c for c, _ in shown_commands((ROOT / "docs" / "managed-modes.md").read_text()) if "monitoring.googleapis.com" in c]
    assert autopilot == ["gpupools idle --prometheus https://monitoring.googleapis.com/v1/projects/PROJECT/location/global/prometheus "
                         "--prometheus-auth gcp"]
    page = ("```sh\ngpupools idle --prometheus URL [--window 24h]\n              [--json] [--plot FILE.png]\n"
            "gpupools idle --prometheus http://x --auth gcp   # wrong\ngpupools plna --stack a\n$ gpupools workload --stack s --nodes\n"
            "gpupools plan: stack dev-aws, output\n```\n\nInline: `gpupools workload --fraction`, `gpupools catalog --cloud`, "
            "`gpupools check --stack <name> extra`, `--prometheus-auth gcp`, `gpupools:cloud`.\n")
    shown = shown_commands(page)
    assert [c for c, _ in shown] == [
        "gpupools idle --prometheus URL [--window 24h] [--json] [--plot FILE.png]", "gpupools idle --prometheus http://x --auth gcp   # wrong",
        "gpupools plna --stack a", "$ gpupools workload --stack s --nodes", "gpupools workload --fraction", "gpupools catalog --cloud",
        "gpupools check --stack <name> extra"]
    problems = [command_problem(c, inline) for c, inline in shown]
    assert problems[0] is None and problems[4] is None and problems[5] is None
    assert "--auth" in problems[1] and "no command 'plna'" in problems[2] and "requires an argument" in problems[3]
    assert problems[6] == "unexpected argument 'extra'"


def test_the_cli_help_names_every_cloud():
    from typer.testing import CliRunner

    from gpupools.cli.main import app
    from gpupools.core.catalog import CLOUDS

    runner = CliRunner()
    top = " ".join(runner.invoke(app, ["--help"]).stdout.split())
    assert "GPU node pools on EKS, AKS, GKE and Gcore Managed Kubernetes" in top
    catalog = " ".join(runner.invoke(app, ["catalog", "--help"]).stdout.split())
    assert " | ".join(CLOUDS) in catalog and CLOUDS == ("aws", "azure", "gcp", "gcore")
    assert yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["description"].endswith("on EKS, AKS, GKE and Gcore Managed Kubernetes")


def test_readme_and_dev_give_the_same_size_for_dev_test():
    """What `./dev test` installs, as README says it and as `./dev` says while it installs (measured on a fresh clone
    with `du -sh .venv`)."""
    readme = " ".join((ROOT / "README.md").read_text().split())
    dev = (ROOT / "dev").read_text()
    (said,) = re.findall(r"`\./dev test` every cloud and the test tools \(about ([\d.]+ GB)\)", readme)
    assert re.search(rf"\.venv is about {re.escape(said)} with checkov and helm", dev), said

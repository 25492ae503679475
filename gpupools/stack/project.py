"""What `pulumi preview` and `pulumi up` add to a stack file's config before the program sees it, read offline.

Project-level config. `config:` in the project file (Pulumi.yaml) is merged into every stack of the project, and a
key the stack file sets wins, whole (pulumi v3.259.0 pkg/workspace/config.go, mergeConfig; Pulumi's docs, "Project
file reference", `config` options, added in v3.44):

- a key without a namespace belongs to the project: `cluster` is `<project name>:cluster`
  (pkg/workspace/config.go, parseConfigKey);
- a plain value (string, integer, boolean) or a list is short for `default:` on a key of the project's namespace and
  for `value:` on any other (sdk/go/common/workspace/project.go, RewriteShorthandConfigValues); a mapping is the long
  form: `type`, `description`, `items`, `secret`, and `value` or `default`, nothing else (project.json,
  ConfigTypeDeclaration); a float or null is neither;
- the project refuses `value` and `default` together, and `type` or `default` on a key of another namespace, which
  must give a `value` (project.go, Project.Validate);
- a key of the project's namespace that gives neither must be set by every stack (mergeConfig,
  missingStackConfigurationKeysError).

`gpupools plan` and `check` merge it the same way, so a readiness gate switched off in Pulumi.yaml is judged offline
as it deploys. A key whose name is a property path (`gpupools:cluster.name`) is refused: gpupools reads whole keys.

ESC environments. A stack file's `environment:` imports Pulumi ESC environments, whose `pulumiConfig` the Pulumi
CLI merges into the stack's config (sdk/go/common/workspace/project.go, Environment; mergeConfig, "First merge the
stack environment"). Opening one needs Pulumi Cloud and credentials, so gpupools cannot read them offline and says
so, one line per environment (`environment_warnings`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpupools.stack.errors import ConfigError, Problem, describe, kind, name_like
from gpupools.stack.reading import Disputed, ReadError, read_document

PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml")
_LONG_FORM = ("type", "description", "items", "default", "value", "secret")


@dataclass
class StackDocument:
    """A stack file's config as the Pulumi CLI hands it to the program, as far as it can be known offline."""

    config: dict[str, Any]
    from_project: list[str] = field(default_factory=list)  # keys the project file gave, the stack file not
    warnings: list[str] = field(default_factory=list)


def project_file_of(stack_file: Path) -> Path | None:
    """The project file of the project that holds a stack file: the nearest Pulumi.yaml at or above its folder."""
    for folder in Path(stack_file).resolve().parents:
        for name in PROJECT_FILES:
            if (folder / name).is_file():
                return folder / name
    return None


def _key_label(key: Any) -> str:
    return str(key) if isinstance(key, str) and name_like(key) else f"({kind(key)})"


def project_config(doc: Any, label: str = "Pulumi.yaml") -> tuple[dict[str, Any], list[str]]:
    """The values a project file's `config:` gives every stack (namespaced key -> value), and the keys every stack
    must set itself; or ConfigError, one problem per bad key."""
    if not isinstance(doc, dict):
        raise ConfigError([Problem(label, "a project file is a mapping with a `name:`")])
    config = doc.get("config")
    if config is None or isinstance(config, str):  # a string is the old spelling of stackConfigDir
        return {}, []
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError([Problem(f"{label} name", "missing: Pulumi namespaces the project's config keys by the project's name")])
    if not isinstance(config, dict):
        raise ConfigError([Problem(f"{label} config", f"expected a mapping of config keys, got {kind(config)}")])
    values: dict[str, Any] = {}
    required: list[str] = []
    problems: list[Problem] = []
    for key, entry in config.items():
        where = f"{label} config.{_key_label(key)}"
        if not isinstance(key, str) or not key or key.startswith(":") or key.endswith(":"):
            problems.append(Problem(where, "not a config key (`<namespace>:<name>`, or `<name>` for the project's own)"))
            continue
        ours = ":" not in key or key.startswith(f"{name}:")
        full = key if ":" in key else f"{name}:{key}"
        if any(c in full.partition(":")[2] for c in ".[]\"'"):
            problems.append(Problem(where, "a property path: Pulumi sets that part of the key's value, which gpupools does not "
                                           "merge; give the whole value under the key itself"))
            continue
        if isinstance(entry, (str, bool, int, list, Disputed)):
            # The short form: `default` of the project's own key, `value` of another's. A value YAML 1.1 and 1.2 read
            # apart stays Disputed, for the stack check to name.
            values[full] = entry
            continue
        if not isinstance(entry, dict):  # a float or null: Pulumi's project schema (project.json) takes neither
            problems.append(Problem(where, f"expected a string, integer, boolean, list or a mapping of {', '.join(_LONG_FORM)}; "
                                           f"got {kind(entry)}"))
            continue
        unknown = [k for k in entry if k not in _LONG_FORM]
        if unknown:
            problems.append(Problem(where, f"unknown attribute {describe(unknown[0]) if name_like(str(unknown[0])) else kind(unknown[0])}; "
                                           f"a project config key takes {', '.join(_LONG_FORM)}"))
            continue
        has_value, has_default = entry.get("value") is not None, entry.get("default") is not None
        if has_value and has_default:
            problems.append(Problem(where, "both `value` and `default`: Pulumi takes one of them"))
        elif not ours and (has_default or "type" in entry):
            problems.append(Problem(where, f"not of the project's namespace ({name}:), so Pulumi takes only `value` here, "
                                           f"not `default` or `type`"))
        elif not ours and not has_value:
            problems.append(Problem(where, f"not of the project's namespace ({name}:): give it a `value`"))
        elif has_value or has_default:
            values[full] = entry["value"] if has_value else entry["default"]
        else:
            required.append(full)
    if problems:
        raise ConfigError(problems)
    return values, required


def merge_project_config(stack: dict[str, Any], values: dict[str, Any], required: list[str],
                         label: str = "Pulumi.yaml") -> StackDocument:
    """The stack's config with the project's merged in: a key the stack file sets keeps the stack file's value, whole."""
    missing = [key for key in required if key not in stack]
    if missing:
        raise ConfigError([Problem(f"{label} config.{_key_label(key)}", "declared without a value or default, and the stack file "
                                                                        "does not set it: Pulumi refuses such a stack") for key in missing])
    given = [key for key in values if key not in stack]
    return StackDocument({**{key: values[key] for key in given}, **stack}, from_project=given)


def environment_warnings(environment: Any, label: str) -> list[str]:
    """One line per ESC environment a stack file's `environment:` imports (a list of names, or an environment
    definition with `imports:` and `values:`), naming it where its name is a name."""
    if environment is None:
        return []
    imports = environment if isinstance(environment, list) else environment.get("imports") if isinstance(environment, dict) else None
    names = []
    for item in imports if isinstance(imports, list) else []:
        if isinstance(item, dict) and len(item) == 1:  # `- name: {merge: false}`
            item = next(iter(item))
        names.append(f'"{item}"' if isinstance(item, str) and name_like(item) else f"({kind(item)})")
    tail = ("which gpupools cannot open offline: config it gives the stack (pulumiConfig) is not in this plan or check; "
            "`pulumi preview` reads it")
    lines = [f"warning: {label}: environment: imports the ESC environment {n}, {tail}" for n in names]
    if isinstance(environment, dict) and environment.get("values") is not None:
        lines.append(f"warning: {label}: environment: defines values of its own (an ESC environment), {tail}")
    if not lines:
        lines.append(f"warning: {label}: environment: is set (Pulumi ESC), {tail}")
    return lines


def _document(path: Path, what: str) -> Any:
    try:
        return read_document(path)
    except FileNotFoundError:
        raise ConfigError([Problem(str(path), f"{what} not found")]) from None
    except OSError as exc:
        raise ConfigError([Problem(str(path), f"cannot read {what}: {exc.strerror}")]) from None
    except ReadError as exc:
        raise ConfigError([Problem(str(path), str(exc))]) from None


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def read_stack(path: str | Path, project: Path | None) -> StackDocument:
    """A stack file's config merged with its project file's (None: no project file), with a warning per ESC
    environment it imports; or ConfigError. The stack file is read as `gpupools.stack.values.read_stack_file` reads
    it, with the same limits and messages; the project file with the same limits."""
    path = Path(path)
    doc = _document(path, "stack file")
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise ConfigError([Problem(str(path), "a stack file needs a top-level `config:` mapping")])
    if project is None:
        merged = StackDocument(doc["config"])
    else:
        label = _shown(project)
        merged = merge_project_config(doc["config"], *project_config(_document(project, "project file"), label), label=label)
    merged.warnings = environment_warnings(doc.get("environment"), str(path))
    return merged

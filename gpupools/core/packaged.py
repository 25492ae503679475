"""The YAML files gpupools ships (the GPU catalog, the cloud facts, mig-parted's defaults), parsed once per text.

Parsing is what reading them costs (libyaml still builds every node in Python: the catalog and one cloud's facts took
about 15 ms of a 0.5 s plan), while their text changes only with a new version of gpupools. So, as Python keeps a
module's bytecode in `__pycache__` beside its source, the parsed document is kept there too, named by the SHA-256 of
the text it came from: a changed file gets a new name, so a stale copy is never read. Nothing is written where Python
writes no bytecode either (PYTHONDONTWRITEBYTECODE, `python -B`). Where the folder cannot be written (a read-only
installation) or a kept copy cannot be read, the text is parsed as before; the answer is the same either way.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

# The kept copies are pickles, read with the same trust as the bytecode beside them (which Python executes): both
# are written by this installation into its own folder. The protocol is fixed so that any Python gpupools runs on
# reads what another wrote.
_PROTOCOL = 5


def parse(text: str) -> Any:
    """A shipped YAML text as data: libyaml where PyYAML was built with it (the files are ours, so the hardened
    reader for a user's stack file is not needed)."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def cache_file(folder: Path, name: str, text: str) -> Path:
    digest = hashlib.sha256(text.encode()).hexdigest()[:32]
    return folder / "__pycache__" / f"{name}.{digest}.pickle"


def read(name: str, package: str = "gpupools.core") -> Any:
    """The parsed document of `name`, a YAML file of `package`."""
    source = resources.files(package).joinpath(name)
    text = source.read_text()
    if not isinstance(source, Path):  # inside a zip or another loader: no folder to keep a copy in
        return parse(text)
    kept = cache_file(source.parent, name, text)
    try:
        with open(kept, "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ValueError, IndexError):
        pass
    doc = parse(text)
    if not sys.dont_write_bytecode:  # told to write nothing beside the sources (PYTHONDONTWRITEBYTECODE, -B): as Python
        _keep(kept, name, doc)
    return doc


def _keep(kept: Path, name: str, doc: Any) -> None:
    """Write the copy whole or not at all (a temporary file renamed over it), so a reader never sees half of one, and
    remove the copies of the file's earlier texts."""
    try:
        kept.parent.mkdir(exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=kept.parent, prefix=kept.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(doc, f, protocol=_PROTOCOL)
            os.replace(temporary, kept)
        except BaseException:
            os.unlink(temporary)
            raise
        for old in kept.parent.glob(f"{name}.*.pickle"):
            if old != kept:
                old.unlink(missing_ok=True)
    except (OSError, pickle.PicklingError):
        pass

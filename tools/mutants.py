#!/usr/bin/env python3
"""Sampled mutation testing of one module: do its tests notice wrong logic?

Each mutant changes one place of the module, the way a slip in a change would:
  compare   a comparison flipped (== / !=, < / >=, > / <=, in / not in, is / is not)
  negate    an if / elif / while / conditional-expression / comprehension condition negated
  drop      a statement dropped: a call on its own line (`problems.append(...)`), `x += ...`, `d["key"] = ...`
  key       a string key misspelled: a dict display's key, a subscript `d["key"]`, `d.get("key")`

A sample of N mutants (seeded, so the same module gives the same sample) is applied one at a time: the module file is
rewritten (ast.unparse of the mutated tree), the given tests run with -x under a timeout, and the original file is put
back (with its timestamps) whatever happens. A mutant is killed when the tests fail, error or time out. First a control
run checks that the unmutated module, written back through ast.unparse, passes the same tests.

Usage (from the repository root; CPU is shared, so keep the test list targeted and N small):

  .venv/bin/python tools/mutants.py gpupools/idle/report.py tests/idle/test_idle_report.py -n 40
  .venv/bin/python tools/mutants.py gpupools/queues/kai.py tests/queues -n 40 --show-survivors

It changes the module file while it runs: run it in a working tree nothing else is using, and let it finish (Ctrl-C
also restores the file).
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

FLIP = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
        ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
KEY = re.compile(r"^[A-Za-z_][\w.\-/]*$")


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@dataclass(frozen=True)
class Site:
    index: int  # the site's place in the traversal order, which `Mutator` counts again
    kind: str
    line: int
    what: str


def segment(source: str, node: ast.AST) -> str:
    text = ast.get_source_segment(source, node) or ast.unparse(node)
    text = " ".join(text.split())
    return text if len(text) <= 70 else text[:67] + "..."


class Mutator(ast.NodeTransformer):
    """Walks the tree in a fixed order, numbering every mutation site; changes the site numbered `target` (None: none)."""

    def __init__(self, source: str, target: int | None = None):
        self.source, self.target, self.count, self.sites = source, target, 0, []

    def _site(self, kind: str, node: ast.AST, what: str) -> bool:
        index = self.count
        self.count += 1
        self.sites.append(Site(index, kind, getattr(node, "lineno", 0), what))
        return index == self.target

    # compare ---------------------------------------------------------------------------------------------------------
    def visit_Compare(self, node: ast.Compare):
        self.generic_visit(node)
        for i, op in enumerate(node.ops):
            flipped = FLIP.get(type(op))
            if flipped and self._site("compare", node, f"{type(op).__name__} -> {flipped.__name__}: {segment(self.source, node)}"):
                node.ops[i] = flipped()
        return node

    # negate ----------------------------------------------------------------------------------------------------------
    def _negate(self, node: ast.AST, test: ast.expr) -> ast.expr:
        if self._site("negate", node, f"not ({segment(self.source, test)})"):
            return ast.UnaryOp(op=ast.Not(), operand=test)
        return test

    def visit_If(self, node: ast.If):
        node.test = self._negate(node, node.test)
        self.generic_visit(node)
        return node

    def visit_While(self, node: ast.While):
        node.test = self._negate(node, node.test)
        self.generic_visit(node)
        return node

    def visit_IfExp(self, node: ast.IfExp):
        node.test = self._negate(node, node.test)
        self.generic_visit(node)
        return node

    def visit_comprehension(self, node: ast.comprehension):
        node.ifs = [self._negate(cond, cond) for cond in node.ifs]
        self.generic_visit(node)
        return node

    # drop ------------------------------------------------------------------------------------------------------------
    def _drop(self, node: ast.stmt):
        if self._site("drop", node, segment(self.source, node)):
            return ast.copy_location(ast.Pass(), node)
        return None

    def visit_Expr(self, node: ast.Expr):
        if isinstance(node.value, ast.Call):
            dropped = self._drop(node)
            if dropped is not None:
                return dropped
        self.generic_visit(node)
        return node

    def visit_AugAssign(self, node: ast.AugAssign):
        dropped = self._drop(node)
        if dropped is not None:
            return dropped
        self.generic_visit(node)
        return node

    def visit_Assign(self, node: ast.Assign):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            dropped = self._drop(node)
            if dropped is not None:
                return dropped
        self.generic_visit(node)
        return node

    # key -------------------------------------------------------------------------------------------------------------
    def _key(self, const: ast.expr, where: ast.AST) -> ast.expr:
        if (isinstance(const, ast.Constant) and isinstance(const.value, str) and KEY.match(const.value)
                and self._site("key", where, f"{const.value!r} -> {const.value + 'X'!r}")):
            return ast.copy_location(ast.Constant(const.value + "X"), const)
        return const

    def visit_Dict(self, node: ast.Dict):
        node.keys = [self._key(k, node) if k is not None else None for k in node.keys]
        self.generic_visit(node)
        return node

    def visit_Subscript(self, node: ast.Subscript):
        if not (isinstance(node.value, ast.Name) and node.value.id == "Literal"):  # a type, not a key
            node.slice = self._key(node.slice, node)
        self.generic_visit(node)
        return node

    def visit_Call(self, node: ast.Call):
        if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            node.args[0] = self._key(node.args[0], node)
        self.generic_visit(node)
        return node


def sites(source: str) -> list[Site]:
    m = Mutator(source)
    m.visit(ast.parse(source))
    return m.sites


def mutant(source: str, index: int) -> str:
    tree = Mutator(source, index).visit(ast.parse(source))
    return ast.unparse(ast.fix_missing_locations(tree))


def run_tests(tests: list[str], timeout: float) -> tuple[str, float]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", *tests, "-x", "-q", "-p", "no:cacheprovider", "--no-header", "-o", "addopts="]
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start
    status = {0: "survived", 1: "killed", 2: "error", 3: "error", 4: "error", 5: "no tests"}.get(done.returncode, "error")
    return status, time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("module", type=Path, help="the module to mutate, e.g. gpupools/idle/report.py")
    parser.add_argument("tests", nargs="+", help="the test files or folders that should notice")
    parser.add_argument("-n", type=int, default=40, help="mutants to sample (default 40)")
    parser.add_argument("--seed", type=int, default=1, help="sampling seed (default 1)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per test run before the mutant counts as killed")
    parser.add_argument("--kinds", default="compare,negate,drop,key", help="which kinds to sample from")
    parser.add_argument("--match", help="instead of a sample: every mutant whose line number or description matches this regex")
    parser.add_argument("--list", action="store_true", help="only list the sampled mutants")
    parser.add_argument("--show-survivors", action="store_true", help="print each survivor's diff")
    args = parser.parse_args(argv)

    path = args.module
    original = path.read_text()
    kinds = set(args.kinds.split(","))
    found = [s for s in sites(original) if s.kind in kinds]
    if args.match:
        wanted = re.compile(args.match)
        sample = [s for s in found if wanted.search(f"line {s.line}: {s.what}")]
        print(f"{path}: {len(found)} mutation sites, {len(sample)} matching {args.match!r}", flush=True)
    else:
        sample = sorted(random.Random(args.seed).sample(found, min(args.n, len(found))), key=lambda s: (s.line, s.index))
        print(f"{path}: {len(found)} mutation sites, {len(sample)} sampled (seed {args.seed})", flush=True)
    if args.list:
        for s in sample:
            print(f"  {s.kind:8} line {s.line:5}  {s.what}")
        return 0

    backup = Path(tempfile.mkdtemp(prefix="mutants-")) / path.name
    shutil.copy2(path, backup)
    killed, survivors = 0, []
    # A SIGTERM (a timeout, a CI job cancelled) unwinds like Ctrl-C, so `finally` puts the module back.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        path.write_text(ast.unparse(ast.parse(original)))
        status, secs = run_tests(args.tests, args.timeout)
        if status != "survived":
            print(f"control run (unmutated module through ast.unparse): {status}; fix the tests first", flush=True)
            return 2
        print(f"control run passes in {secs:.0f}s", flush=True)
        for n, s in enumerate(sample, 1):
            path.write_text(mutant(original, s.index))
            status, secs = run_tests(args.tests, args.timeout)
            shutil.copy2(backup, path)
            if status == "survived":
                survivors.append(s)
            else:
                killed += 1
            print(f"[{n:2}/{len(sample)}] {status:9} {secs:5.0f}s  {s.kind:8} line {s.line:5}  {s.what}", flush=True)
    finally:
        shutil.copy2(backup, path)
        shutil.rmtree(backup.parent, ignore_errors=True)
    print(f"{path}: killed {killed}/{len(sample)} ({100 * killed / max(len(sample), 1):.0f}%)", flush=True)
    if args.show_survivors:
        import difflib
        base = ast.unparse(ast.parse(original)).splitlines()
        for s in survivors:
            diff = [d for d in difflib.unified_diff(base, mutant(original, s.index).splitlines(), lineterm="", n=0) if d[:1] in "+-" and d[:3] not in ("+++", "---")]
            print(f"survivor line {s.line} ({s.kind}): " + " | ".join(diff))
    return 0


if __name__ == "__main__":
    sys.exit(main())

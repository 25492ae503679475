"""New processes of one `python -c` program, each forked where a fresh interpreter running it stands after its imports.

The CLI tests that start the command as a user does pay, in every process, for the interpreter's start and the import
of gpupools' CLI before the command itself runs (about a seventh of a CPU second each, many times per test file). A
fork server runs the program's head (its imports) once, then forks a child per run: the child leaves the serving loop
and runs the program's tail at the top level of the same `-c` program, so it is a process of its own, with its own
exit status, its output through its own descriptors (files: block-buffered, as a pipe is), its exit handlers and, when
it ends normally, the interpreter's teardown, and it starts the tail in the state a fresh interpreter is in after the
head: the loop imports nothing (the server checks), so the modules loaded are the head's alone.

What needs a process's very start (a closed stdout, globals defined before the imports) still runs as a new
interpreter in the tests.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import tempfile
from pathlib import Path

# The serving loop, between the head and the tail. A request is one line: stdout's file, stderr's file and the
# arguments, NUL-separated; the answer is the child's exit status (negative: the signal that ended it). Names start
# with an underscore so as not to shadow the program's.
LOOP = r"""
import os as _os
_before = set(sys.modules)
while True:
    _line = b""
    while not _line.endswith(b"\n"):
        _chunk = _os.read(0, 65536)
        if not _chunk:
            _os._exit(0)
        _line += _chunk
    _out, _err, *_args = _line[:-1].decode().split("\0")
    if set(sys.modules) != _before:
        _os._exit(3)
    _pid = _os.fork()
    if _pid == 0:
        for _fd, _path, _flags in ((0, _os.devnull, _os.O_RDONLY), (1, _out, _os.O_WRONLY | _os.O_TRUNC),
                                   (2, _err, _os.O_WRONLY | _os.O_TRUNC)):
            _new = _os.open(_path, _flags)
            _os.dup2(_new, _fd)
            _os.close(_new)
        sys.argv[1:] = _args
        break
    _os.write(1, b"%d\n" % _os.waitstatus_to_exitcode(_os.waitpid(_pid, 0)[1]))
"""


class ForkServer:
    """`run(*args)` is `subprocess.run([python, "-c", head + tail, *args], cwd=cwd, env=env, capture_output=True)`."""

    def __init__(self, head: str, tail: str, cwd: Path, env: dict | None = None):
        assert "import sys" in head, "the loop uses sys, which the head imports"
        self.tmp = tempfile.TemporaryDirectory(prefix="forkserver-")
        self.log = open(Path(self.tmp.name) / "server.err", "w+b")
        self.server = subprocess.Popen([sys.executable, "-c", head.rstrip("\n") + "\n" + LOOP + tail], cwd=cwd, env=env,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.runs = 0

    def run(self, *args: str, timeout: float = 300, text: bool = False) -> subprocess.CompletedProcess:
        assert not any("\n" in a or "\0" in a for a in args)
        self.runs += 1
        out, err = (Path(self.tmp.name) / f"{self.runs}.{name}" for name in ("out", "err"))
        out.write_bytes(b"")
        err.write_bytes(b"")
        self.server.stdin.write("\0".join([str(out), str(err), *args]).encode() + b"\n")
        self.server.stdin.flush()
        ready, _, _ = select.select([self.server.stdout], [], [], timeout)
        answer = self.server.stdout.readline() if ready else b""
        if not answer.strip().lstrip(b"-").isdigit():
            self.close()
            self.log.seek(0)
            raise RuntimeError(f"the fork server gave no status for {args} (ended with {self.server.returncode}): "
                               f"{self.log.read().decode(errors='replace')[-2000:]}")
        stdout, stderr = out.read_bytes(), err.read_bytes()
        out.unlink()
        err.unlink()
        if text:
            stdout, stderr = stdout.decode(), stderr.decode()
        return subprocess.CompletedProcess(list(args), int(answer), stdout, stderr)

    def close(self) -> None:
        if self.server.poll() is None:
            self.server.stdin.close()
            try:
                self.server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        self.server.stdout.close()
        self.log.close()
        self.tmp.cleanup()

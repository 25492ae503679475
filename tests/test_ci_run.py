""".ci/run, the CI entry point, also runs on contributors' workstations: it installs the Prometheus packages the
monitoring tests need and stops only the services that install started, never a Prometheus that ran before it (a
contributor's own), and kills nothing by name. Run here against stand-ins for apt-get, service, sudo, pkill and
killall on a PATH of their own, in a copy of the repository's root whose ./dev only records that it ran. The tests'
own Prometheus listens on a port the kernel picks, which is never one a running Prometheus holds."""

from __future__ import annotations

import shutil
import socket
import stat
import subprocess
from pathlib import Path

from conftest import ROOT

# What the Debian packages start when apt-get installs them: prometheus (9090), prometheus-alertmanager, and the
# node exporter prometheus recommends.
STARTED_BY_INSTALL = ("prometheus", "prometheus-alertmanager", "prometheus-node-exporter")
TOOLS = ("bash", "env", "dirname", "id", "cat", "grep", "rm", "touch", "sed", "mkdir", "printf", "sort", "uniq", "tr")


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def sandbox(tmp_path: Path, installed: bool, running: list[str]) -> tuple[Path, dict]:
    """A root with .ci/run and a ./dev stand-in, and a PATH of stand-ins: `running` are the services up before the
    run, `installed` whether promtool, prometheus and amtool are there already."""
    root, bin_, state = tmp_path / "repo", tmp_path / "bin", tmp_path / "state"
    (root / ".ci").mkdir(parents=True)
    bin_.mkdir()
    state.mkdir()
    shutil.copy(ROOT / ".ci" / "run", root / ".ci" / "run")
    executable(root / "dev", f'#!/bin/bash\necho "dev $*" >> {state}/log\n')
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (bin_ / tool).symlink_to(found)
    for name in running:
        (state / f"up-{name}").touch()
    present = ("promtool", "prometheus", "amtool") if installed else ()
    for name in (*present, "npm"):
        executable(bin_ / name, "#!/bin/bash\nexit 0\n")
    # apt-get install: the binaries appear and the packaged services start, as the packages' postinst scripts do.
    executable(bin_ / "apt-get", f"""#!/bin/bash
echo "apt-get $*" >> {state}/log
if [ "$1" = install ] || [ "$2" = install ] || [ "$3" = install ] || [ "$4" = install ]; then
  for t in promtool prometheus amtool; do printf '#!/bin/bash\\nexit 0\\n' > {bin_}/$t; chmod +x {bin_}/$t; done
  for s in {' '.join(STARTED_BY_INSTALL)}; do touch {state}/up-$s; done
fi
""")
    executable(bin_ / "service", f"""#!/bin/bash
case "$2" in
  status) [ -e {state}/up-$1 ] ;;
  stop) echo "service $1 stop" >> {state}/log; rm -f {state}/up-$1 ;;
  *) echo "service $*" >> {state}/log ;;
esac
""")
    for name in ("pkill", "killall", "systemctl"):
        executable(bin_ / name, f'#!/bin/bash\necho "{name} $*" >> {state}/log\n')
    executable(bin_ / "sudo", '#!/bin/bash\nexec "$@"\n')
    env = {"PATH": str(bin_), "HOME": str(tmp_path), "CI": "true"}
    return root, env


def run_ci(tmp_path: Path, installed: bool, running: list[str]) -> tuple[list[str], set[str]]:
    """(the commands the run logged, the services up after it)."""
    root, env = sandbox(tmp_path, installed, running)
    result = subprocess.run(["bash", str(root / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    state = tmp_path / "state"
    log = (state / "log").read_text().splitlines()
    return log, {p.name.removeprefix("up-") for p in state.glob("up-*")}


def test_a_fresh_install_stops_the_services_it_started_and_kills_nothing_by_name(tmp_path):
    log, up = run_ci(tmp_path, installed=False, running=[])
    assert log[0].startswith("apt-get install") and log[-1] == "dev test"
    assert sorted(line for line in log if line.startswith("service")) == [f"service {s} stop" for s in sorted(STARTED_BY_INSTALL)]
    assert not [line for line in log if line.split()[0] in ("pkill", "killall", "systemctl")]
    assert up == set()


def test_a_prometheus_that_ran_before_the_install_is_left_running(tmp_path):
    log, up = run_ci(tmp_path, installed=False, running=["prometheus"])
    assert "service prometheus stop" not in log
    assert {"service prometheus-alertmanager stop", "service prometheus-node-exporter stop"} <= set(log)
    assert up == {"prometheus"}
    assert not [line for line in log if line.split()[0] in ("pkill", "killall", "systemctl")]


def test_with_the_tools_installed_nothing_is_installed_or_stopped(tmp_path):
    log, up = run_ci(tmp_path, installed=True, running=["prometheus", "prometheus-alertmanager"])
    assert log == ["dev test"]
    assert up == {"prometheus", "prometheus-alertmanager"}


def test_the_tests_prometheus_takes_a_port_no_running_prometheus_holds():
    """`serving` (tests/idle/test_idle_report.py) binds its Prometheus to a port the kernel picks from the free ones;
    with a listener on 9090, as a workstation's own Prometheus, the port it gets is another."""
    from test_idle_report import free_port

    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            held.bind(("127.0.0.1", 9090))
        except OSError:
            pass  # something already listens on 9090: the check below holds all the same
        else:
            held.listen()
        ports = {free_port() for _ in range(20)}
    assert 9090 not in ports
    source = (ROOT / "tests" / "idle" / "test_idle_report.py").read_text()
    assert "--web.listen-address=127.0.0.1:{port}" in source and "port = free_port()" in source

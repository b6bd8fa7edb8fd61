"""`pip install .` works: the wheel built from this tree, installed into a fresh virtualenv, runs from any directory.

Offline and quick (`tests.support.packaging`): the wheel is built from a copy of the sources without build
isolation, installed with ``--no-deps --no-index`` into a new venv that sees the running one's third-party
packages; what is tested here is the package: its modules, data files and console scripts. Every command runs
from a directory outside the repository, so nothing can be imported from the checkout by accident.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.packaging import Installed, install

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ("kafka-monitor", "kafka-monitor-report", "kafka-monitor-rollup", "kafka-monitor-dashboard",
           "kafka-monitor-sandbox")
HEAVY = ("pandas", "pyspark", "streamlit", "plotly")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return install(tmp_path_factory.mktemp("packaging"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, deadline: float, proc: subprocess.Popen[str]) -> str:
    """GET url, retrying until it answers 200 or the deadline; fails at once if the process died."""
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.read().decode()
        except OSError:
            assert proc.poll() is None, f"exited {proc.returncode}: {proc.communicate()}"
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return proc.returncode, out


def test_console_scripts_are_installed_and_answer_help(installed: Installed) -> None:
    for name in SCRIPTS:
        p = installed.script(name, "--help")
        assert p.returncode == 0, f"{name} --help: {p.stderr}"
        assert "usage:" in p.stdout, name
    assert "--config" in installed.script("kafka-monitor", "--help").stdout
    assert "--history" in installed.script("kafka-monitor-report", "--help").stdout
    assert "--rollups" in installed.script("kafka-monitor-rollup", "--help").stdout
    assert "--state-dir" in installed.script("kafka-monitor-dashboard", "--help").stdout


def test_bad_config_exits_2_naming_the_field(installed: Installed) -> None:
    bad = installed.cwd / "bad.yaml"
    bad.write_text("clusters:\n  - name: a\n    bootstrap_servers: x:9092\npoll_interval_s: soon\n")
    p = installed.script("kafka-monitor", "--config", "bad.yaml", "--once")
    assert p.returncode == 2, p.stderr
    assert "poll_interval_s" in p.stderr and "bad.yaml" in p.stderr
    missing = installed.script("kafka-monitor-report", "--history", "no-such-dir")
    assert missing.returncode == 2 and "--history" in missing.stderr, missing.stderr


def test_modules_and_data_files_come_from_the_installed_package(installed: Installed) -> None:
    probe = """
import json
import os
import re
from importlib.resources import files

import collectors, collectors.alerting.catalogue as catalogue, collectors.outputs.exporter as exporter
import dashboard, sandbox, spark_analytics
from collectors.config import load_config
from sandbox.scenario import load_scenario

example = files("collectors") / "config.example.yaml"
for var in re.findall(r"[$][{]([A-Za-z_][A-Za-z0-9_]*)", example.read_text()):  # its ${VAR}s: any host:port will do
    os.environ.setdefault(var, "127.0.0.1:9092")
print(json.dumps({
    "files": [m.__file__ for m in (collectors, catalogue, exporter, dashboard, sandbox, spark_analytics)],
    "data": [str(p) for p in (example, catalogue.CATALOGUE_FILE, exporter.METRICS_FILE,
                              files("dashboard") / "app.py", files("sandbox") / "scenarios" / "default.yaml",
                              files("spark_analytics") / "log4j2.properties")],
    "rules": len(catalogue.RULES), "metrics": len(exporter.METRICS),
    "example_clusters": len(load_config(str(example)).clusters),
    "scenarios": sorted(p.name for p in (files("sandbox") / "scenarios").iterdir() if p.name.endswith(".yaml")),
    "default_incidents": len(load_scenario(None).incidents),
}))
"""
    p = installed.run(installed.python, "-c", probe)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    site = str(installed.venv.resolve())
    for path in doc["files"] + doc["data"]:
        assert str(Path(path).resolve()).startswith(site), f"{path} is not from the installed package"
        assert Path(path).is_file(), path
    assert doc["rules"] > 10 and doc["metrics"] > 10 and doc["example_clusters"] >= 1
    assert set(doc["scenarios"]) == {p.name for p in (ROOT / "sandbox" / "scenarios").glob("*.yaml")}
    assert doc["default_incidents"] > 0


LEAN = """
import sys


class Missing:
    '''As in a collector-only install: these packages are absent.'''

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {HEAVY!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, Missing())
from collectors.runtime.cli import main  # what the kafka-monitor script runs

sys.exit(main(sys.argv[1:]))
"""


def test_collector_runs_without_the_dashboard_and_report_packages(installed: Installed) -> None:
    """The collector image's HEALTHCHECK target, /healthz, from the installed package with no pandas, pyspark,
    streamlit, plotly, dashboard, sandbox or spark_analytics importable; it stops cleanly on SIGTERM."""
    lean = installed.cwd / "lean.py"
    lean.write_text(LEAN.format(HEAVY=set(HEAVY) | {"dashboard", "sandbox", "spark_analytics"}))
    port = _free_port()
    cfg = installed.cwd / "collector.yaml"
    cfg.write_text(f"clusters:\n  - name: nowhere\n    bootstrap_servers: 127.0.0.1:1\n"
                   f"poll_interval_s: 5\nrequest_timeout_s: 2\nexporter: {{host: 127.0.0.1, port: {port}}}\n"
                   f"history: {{root: {installed.cwd / 'history'}}}\nstate_dir: {installed.cwd / 'state'}\n")
    proc = subprocess.Popen([str(installed.python), str(lean), "--config", str(cfg)], cwd=installed.cwd,
                            env=installed.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        assert _get(f"http://127.0.0.1:{port}/healthz", deadline, proc) == "ok\n"
        assert "kafka" in _get(f"http://127.0.0.1:{port}/metrics", deadline, proc)
    finally:
        code, out = _stop(proc)
    assert code == 0, out
    assert "No module named" not in out, out


def test_dashboard_runs_from_the_installed_package(installed: Installed) -> None:
    data = installed.cwd / "dashboard-data"
    for d in ("state", "history", "reports"):
        (data / d).mkdir(parents=True, exist_ok=True)
    probe = """
import json
import sys
from pathlib import Path

import dashboard
from streamlit.testing.v1 import AppTest

app = Path(dashboard.__file__).with_name("app.py")
at = AppTest.from_file(str(app), default_timeout=60).run()
assert not at.exception, [e.value for e in at.exception]
mine = [m for n, m in sys.modules.items() if n.partition(".")[0] == "dashboard"]
print(json.dumps([m.__file__ for m in mine if getattr(m, "__file__", None)]))
"""
    p = installed.run(installed.python, "-c", probe, timeout=120, KMON_STATE_DIR=str(data / "state"),
                      KMON_HISTORY=str(data / "history"), KMON_REPORTS=str(data / "reports"), KMON_REFRESH="0")
    assert p.returncode == 0, p.stderr
    loaded = json.loads(p.stdout.strip().splitlines()[-1])
    assert loaded and all(str(Path(f).resolve()).startswith(str(installed.venv.resolve())) for f in loaded), loaded

    port = _free_port()
    proc = subprocess.Popen([str(installed.venv / "bin" / "kafka-monitor-dashboard"), "--port", str(port),
                             "--state-dir", str(data / "state"), "--history", str(data / "history")],
                            cwd=installed.cwd, env=installed.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        assert _get(f"http://127.0.0.1:{port}/_stcore/health", time.monotonic() + 60, proc) == "ok"
    finally:
        _stop(proc)

"""This tree as a user gets it: the wheel built from a copy of the sources and installed into a fresh virtualenv.

Offline and quick: the wheel is built without build isolation (setuptools comes from requirements-dev.txt) and
installed with ``--no-deps --no-index``; the new venv sees the third-party packages of the running one through a
``.pth`` file (the pins are tested elsewhere; what is tested with it is the package: its modules, data files and
console scripts). Commands run from a directory outside the repository, so nothing is imported from the checkout
by accident. Shared by the packaging test and the Spark cluster test (which submits the wheel as the README says).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "collectors", "dashboard", "spark_analytics", "sandbox")


@dataclass
class Installed:
    venv: Path
    cwd: Path  # an empty directory outside the repository
    env: dict[str, str]
    wheel: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def site_packages(self) -> Path:
        (site,) = self.venv.glob("lib/python3*/site-packages")
        return site

    def run(self, *cmd: str | Path, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(c) for c in cmd], cwd=self.cwd, env={**self.env, **env}, capture_output=True,
                              text=True, timeout=timeout, check=False)

    def script(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(self.venv / "bin" / name, *args)


def install(base: Path) -> Installed:
    """Build the wheel under `base` and install it into `base/venv`; fails naming the command that failed."""
    src = base / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    def call(*cmd: str | Path) -> None:
        p = subprocess.run([str(c) for c in cmd], cwd=base, env=env, capture_output=True, text=True, timeout=120,
                           check=False)
        assert p.returncode == 0, f"{' '.join(map(str, cmd))}\n{p.stdout}\n{p.stderr}"

    dist = base / "dist"
    call(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", dist, src)
    (wheel,) = dist.glob("kafka_reliability_monitor-*.whl")
    venv = base / "venv"
    call(sys.executable, "-m", "venv", "--without-pip", venv)
    call(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q", "--no-deps",
         "--no-index", wheel)
    cwd = base / "elsewhere"
    cwd.mkdir()
    installed = Installed(venv, cwd, env, wheel)
    # only now (pip would otherwise see the editable install of the running venv): the third-party packages
    deps = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (installed.site_packages / "_kmon_test_deps.pth").write_text("".join(f"{d}\n" for d in deps))
    return installed

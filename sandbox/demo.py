"""`./run.sh demo`: everything at once, on the sandbox unless a real cluster is configured.

Starts the sandbox cluster with its incident timeline and a real ZooKeeper
ensemble, the collector (polling, alerts, /metrics, Parquet history, latest
state files) and the Streamlit dashboard, prints where to look, and stops
every process it started on Ctrl-C or SIGTERM. With `--config FILE` (or
KMON_CONFIG) it monitors that cluster instead and starts no sandbox.

The collector runs in this process and reads time from the sandbox clock, so
`--speed 10` compresses incidents without confusing lag-in-seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used, so `--help` and the port checks answer before the heavy imports
    from collectors.config import MonitorConfig
    from sandbox.runner import Sandbox

ROOT = Path(__file__).resolve().parents[1]
log = logging.getLogger("demo")


def port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def say(msg: str) -> None:
    print(f"[demo] {msg}", flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="./run.sh demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=os.environ.get("KMON_CONFIG"),
                   help="monitor this cluster config instead of the sandbox (also KMON_CONFIG)")
    p.add_argument("--scenario", help="sandbox scenario file (default: the built-in timeline)")
    p.add_argument("--speed", type=float, default=1.0, help="sandbox simulated seconds per real second")
    p.add_argument("--data-dir", default=str(ROOT / "data" / "demo"), help="history and state (default data/demo)")
    p.add_argument("--metrics-port", type=int, default=9308)
    p.add_argument("--dashboard-port", type=int, default=8501)
    p.add_argument("--poll-interval", type=float, default=None,
                   help="seconds between polls, real time (default: 10 simulated seconds, i.e. 10 / --speed, "
                        "at least 0.5: a compressed timeline is polled as often, in simulated time, as the "
                        "real one, so its short incidents do not fall between polls)")
    p.add_argument("--no-dashboard", action="store_true")
    p.add_argument("--duration", type=float, help="stop by itself after this many seconds")
    return p


def monitor_config(args: argparse.Namespace, sb: Sandbox | None) -> MonitorConfig:
    """The cluster config given with --config, else one for the sandbox `sb` (then started)."""
    from collectors.config import MonitorConfig, load_config

    data = Path(args.data_dir)
    if args.config:
        cfg = load_config(args.config)
        return cfg
    assert sb is not None, "without --config the demo monitors its sandbox"
    cluster: dict[str, Any] = {"name": "sandbox", "bootstrap_servers": sb.bootstrap_servers}
    if sb.zk_connect:
        cluster["zookeeper"] = {"connect": sb.zk_connect}
    return MonitorConfig.model_validate({
        "clusters": [cluster], "poll_interval_s": args.poll_interval, "request_timeout_s": 5,
        "exporter": {"host": "127.0.0.1", "port": args.metrics_port},
        "history": {"root": str(data / "history"), "flush_interval_s": 60},
        "state_dir": str(data / "state"),
        # a compressed timeline makes minutes pass in seconds: scale the time thresholds with it
        "thresholds": {"under_replicated_grace_s": 30, "consumer_stop_after_s": 120, "lag_seconds_slo": 60}})


def clock_start(history: Path, now: float) -> float:
    """Where this run's sandbox clock starts: now, or just after the last poll a run before wrote to `history`.

    The sandbox clock runs `--speed` times fast, so a run on a data dir reused at once wrote polls "in the future";
    started at now, this run interleaved its polls with those in the history (and its collector, behind them,
    carried nothing on: `collectors.outputs.checkpoint.FUTURE_SLACK_S`)."""
    from collectors.outputs.history.lease import read_holder

    last = read_holder(history).flushed_until
    return now if last is None or last < now else last + 60.0


def start_dashboard(args: argparse.Namespace, cfg: MonitorConfig) -> subprocess.Popen[bytes] | None:
    app = ROOT / "dashboard" / "app.py"
    if args.no_dashboard or not app.exists():
        return None
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.address", "127.0.0.1",
           "--server.port", str(args.dashboard_port), "--server.headless", "true",
           "--browser.gatherUsageStats", "false", "--", "--state-dir", str(cfg.state_dir),
           "--history", str(cfg.history.root)]
    log_path = Path(args.data_dir) / "dashboard.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(cmd, cwd=ROOT, stdout=log_path.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.poll_interval is None:
        args.poll_interval = max(0.5, 10.0 / args.speed) if not args.config else 10.0
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    for what, port in (("metrics", args.metrics_port), ("dashboard", args.dashboard_port)):
        if not port_free("127.0.0.1", port):
            say(f"error: port {port} for the {what} is already in use on 127.0.0.1; "
                f"free it or pass --{what}-port N")
            return 1
    if not args.config and shutil.which("java") is None:
        say("error: java not found: run ./run.sh setup (installs openjdk-17-jre-headless)")
        return 1

    from collectors.runtime.loop import install_stop_handlers

    stop = threading.Event()
    install_stop_handlers(stop)
    sb = None
    dashboard = None
    monitor = None
    clock = time.time
    try:
        if not args.config:
            from sandbox.runner import Sandbox
            from sandbox.scenario import ScenarioError, load_scenario

            try:
                scenario = load_scenario(args.scenario)
            except ScenarioError as e:
                say(f"error: {e}")
                return 2
            say("starting the sandbox cluster and a real 3-node ZooKeeper ensemble ...")
            from sandbox.clock import SimClock

            now = time.time()
            start = clock_start(Path(args.data_dir) / "history", now)
            if start > now:
                say(f"sandbox: {args.data_dir} holds an earlier run's polls ahead of now (its clock ran fast); this "
                    f"run's clock starts after them, {start - now:.0f}s ahead")
            sb = Sandbox(scenario, speed=args.speed, clock=SimClock(args.speed, start)).start()
            clock = sb.clock.now
            say(f"sandbox: bootstrap {sb.bootstrap_servers}; ZooKeeper {sb.zk_connect}; "
                f"{len(scenario.incidents)} incidents every {scenario.repeat_every or 0:g}s (speed x{args.speed:g})")
            say(f"sandbox: simulated clock t+0 = {sb.cluster.start:.3f} (epoch seconds); the lines "
                f"[sandbox t+...] below are what really happened, on that clock")
        from collectors.config import ConfigError
        from collectors.runtime.cli import hide_secrets_in_logs
        from collectors.runtime.loop import run_loop
        from collectors.runtime.poller import Monitor
        from collectors.runtime.sinks import build_sinks

        try:
            cfg = monitor_config(args, sb)
        except ConfigError as e:
            say(f"error: {e}")
            return 2
        hide_secrets_in_logs(cfg)  # a demo given a real cluster's --config logs as the monitor does
        monitor = Monitor(cfg, clock)
        sinks = build_sinks(cfg, monitor, clock)
        say(f"collector: polling every {cfg.poll_interval_s:g}s; metrics on "
            f"http://{cfg.exporter.host}:{cfg.exporter.port}/metrics, JSON API on "
            f"http://{cfg.exporter.host}:{cfg.exporter.port}/api/v1/clusters; history under {cfg.history.root}")
        dashboard = start_dashboard(args, cfg)
        if dashboard is not None:
            say(f"dashboard: http://127.0.0.1:{args.dashboard_port}  (log: {Path(args.data_dir) / 'dashboard.log'})")
        say("Ctrl-C stops everything.")
        if args.duration:
            threading.Timer(args.duration, stop.set).start()
        events = threading.Thread(target=_print_events, args=(sb, stop), daemon=True)
        if sb is not None:
            events.start()
        run_loop(monitor, cfg.poll_interval_s, sinks, stop, clock=clock)
    finally:
        say("stopping ...")
        if dashboard is not None:
            _stop_process(dashboard)
        if monitor is not None:
            monitor.close()
        if sb is not None:
            sb.stop()
        say("stopped; nothing left running.")
    return 0


def _print_events(sb: Sandbox, stop: threading.Event) -> None:
    seen = 0
    while not stop.wait(1.0):
        try:
            events = sb.call(lambda c, after=seen: [e for e in c.events if e[0] > after])
        except Exception:
            return
        for seq, when, what in events:
            print(f"  [sandbox t+{when - sb.cluster.start:7.1f}s] {what}", flush=True)
            seen = seq


def _stop_process(p: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())

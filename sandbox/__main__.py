"""`python -m sandbox`: run a local Kafka cluster (and real ZooKeeper) with scripted incidents."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
from pathlib import Path

from sandbox.scenario import ScenarioError, load_scenario
from sandbox.spec import INCIDENT_TYPES, Scenario


def parse_incident(text: str) -> dict[str, object]:
    """`TYPE[:key=value,...]`, e.g. `broker_crash:at=30,duration=60,broker=2`."""
    kind, _, rest = text.partition(":")
    out: dict[str, object] = {"type": kind.strip(), "at": 0}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise ScenarioError(f"--incident {text!r}: expected key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def parse_dimensions(option: str, text: str, names: tuple[str, ...], required: int, usage: str) -> dict[str, int]:
    """`2000x10` → {names[0]: 2000, names[1]: 10}: `required` to len(names) positive numbers joined by x."""
    parts = text.lower().split("x")
    if not required <= len(parts) <= len(names) or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ScenarioError(f"{option} {text!r}: expected {usage} (positive whole numbers)")
    return {name: int(p) for name, p in zip(names, parts, strict=False)}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__)
    p.add_argument("--scenario", help="YAML/JSON scenario file (default: the built-in default scenario)")
    p.add_argument("--brokers", type=int, help="number of brokers (overrides the scenario)")
    p.add_argument("--mode", choices=["zookeeper", "kraft"], help="metadata mode (overrides the scenario)")
    p.add_argument("--speed", type=float, default=1.0, help="simulated seconds per real second (default 1)")
    p.add_argument("--topics", metavar="COUNTxPARTITIONS[xRF]",
                   help="add generated topics, e.g. 2000x10 (RF 3, or the broker count if fewer; idle)")
    p.add_argument("--groups", metavar="COUNT[xTOPICS]",
                   help="add generated consumer groups, each reading TOPICS (default 1) of the generated topics")
    p.add_argument("--incident", action="append", default=[], metavar="TYPE[:k=v,...]",
                   help="add an incident, e.g. broker_crash:at=30,duration=60,broker=2 (repeatable)")
    p.add_argument("--no-incidents", action="store_true", help="drop the scenario's own incidents")
    p.add_argument("--no-zookeeper", action="store_true", help="ZooKeeper mode without a real ensemble")
    p.add_argument("--info-file", help="write bootstrap servers and ZooKeeper connect string here as JSON")
    p.add_argument("--list-incidents", action="store_true", help="list incident types and exit")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def resolve_scenario(args: argparse.Namespace) -> Scenario:
    base = load_scenario(args.scenario)
    data = base.model_dump(exclude_none=True)
    if args.brokers is not None:
        data["cluster"]["brokers"] = args.brokers
    if args.mode is not None:
        data["cluster"]["mode"] = args.mode
    if args.topics is not None:
        dims = parse_dimensions("--topics", args.topics, ("count", "partitions", "replication_factor"), 2,
                                "COUNTxPARTITIONS[xRF], e.g. 2000x10 or 2000x10x3")
        dims.setdefault("replication_factor", min(3, data["cluster"].get("brokers", 3)))
        data["cluster"]["generated_topics"] = dims
    if args.groups is not None:
        dims = parse_dimensions("--groups", args.groups, ("count", "topics_per_group"), 1,
                                "COUNT[xTOPICS], e.g. 200 or 200x5")
        data["cluster"]["generated_groups"] = dims
    if args.no_incidents:
        data["incidents"] = []
        data.pop("repeat_every", None)
    for text in args.incident:
        data["incidents"].append(parse_incident(text))
    from sandbox.scenario import parse_scenario

    return parse_scenario(json.dumps(data), args.scenario or "default scenario + command line")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list_incidents:
        for name, what in INCIDENT_TYPES.items():
            print(f"{name:28s} {what}")
        return 0
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.speed <= 0:
        print("error: --speed must be > 0", file=sys.stderr)
        return 2
    try:
        scenario = resolve_scenario(args)
    except ScenarioError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from collectors.runtime.loop import install_stop_handlers
    from sandbox.runner import Sandbox

    stop = threading.Event()
    install_stop_handlers(stop)
    zookeeper = False if args.no_zookeeper else None
    sb = Sandbox(scenario, speed=args.speed, zookeeper=zookeeper)
    try:
        sb.start()
    except Exception as e:
        print(f"error: could not start the sandbox: {e}", file=sys.stderr)
        sb.stop()
        return 1
    try:
        info = {"bootstrap_servers": sb.bootstrap_servers, "zookeeper_connect": sb.zk_connect,
                "mode": scenario.cluster.mode, "cluster_id": scenario.cluster.cluster_id,
                "speed": args.speed}
        print(f"bootstrap servers:  {info['bootstrap_servers']}")
        print(f"zookeeper connect:  {info['zookeeper_connect'] or '-'}")
        print(f"mode: {info['mode']}   speed: x{args.speed}   incidents: {len(scenario.incidents)}"
              + (f" (repeating every {scenario.repeat_every:g}s)" if scenario.repeat_every else ""))
        c = scenario.cluster
        print(f"topics: {len(c.topic_names())} ({c.partition_count():,} partitions)   groups: {len(c.all_groups())}")
        print("Ctrl-C stops everything.", flush=True)
        if args.info_file:
            Path(args.info_file).write_text(json.dumps(info, indent=2))
        seen = 0
        while not stop.wait(0.5):
            for seq, when, what in sb.call(lambda c, after=seen: [e for e in c.events if e[0] > after]):
                print(f"  [t+{when - sb.cluster.start:7.1f}s] {what}", flush=True)
                seen = seq
    finally:
        sb.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

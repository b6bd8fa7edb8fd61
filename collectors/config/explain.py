"""``python -m collectors.config explain FILE --group NAME | --topic NAME [--cluster NAME]``.

Says, for a group or a topic on each cluster (or the one named), whether the cluster's filters watch it and, if
so, what it is held to: every policy setting with where it comes from (the rule, with its line in the file, or
the thresholds). The answer an on-call engineer needs before asking "why did this page?" or "why not?".
"""

from __future__ import annotations

from pathlib import Path

import yaml

from collectors.config.models import MonitorConfig
from collectors.model.policy import Policies

__all__ = ["explain", "policy_lines"]

GROUP_FIELDS = ("team", "lag_seconds_slo", "lag_allowed_messages", "lag_min_points", "consumer_stop_after_s",
                "retention_risk_s", "max_severity", "idle_max_s", "idle_windows")
TOPIC_FIELDS = ("team", "retention_risk_s", "max_severity")
# The topics a broker's metadata flags is_internal (Kafka's Topic.INTERNAL_TOPICS; __share_group_state from
# Kafka 4.0 on), which is what the adapter's topic filter is given. Not every "__" name: MSK's
# __amazon_msk_canary, Confluent's __confluent.* or an application's __-named topic are ordinary topics.
KAFKA_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def policy_lines(path: str | Path) -> list[int]:
    """The line (1-based) of each ``policies:`` item in the file; [] when it cannot be told."""
    try:
        root = yaml.compose(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return []
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if getattr(key, "value", None) == "policies" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []


def _source(rule: str | None, lines: list[int]) -> str:
    if rule is None:
        return "thresholds"
    i = int(rule[len("policies["):-1])
    return f"{rule} (line {lines[i]})" if i < len(lines) else rule


def _settings(config: MonitorConfig, rule: str | None, fields: tuple[str, ...], lines: list[int]) -> list[str]:
    """Each setting: the matching rule's value where it sets one, else the threshold (or '-': none)."""
    raw = config.policies[int(rule[len("policies["):-1])] if rule is not None else None
    out = []
    for f in fields:
        value = getattr(raw, f) if raw is not None else None
        if value is not None:
            out.append(f"  {f}: {value}  ({_source(rule, lines)})")
        else:
            default = getattr(config.thresholds, f, None)
            out.append(f"  {f}: {default}  (thresholds)" if default is not None else f"  {f}: -")
    return out


def explain(config: MonitorConfig, group: str | None = None, topic: str | None = None, cluster: str | None = None,
            lines: list[int] | None = None) -> list[str]:
    """What applies to `group` or `topic` on each cluster (or `cluster`), one line per fact."""
    lines = lines or []
    policies = Policies(config.policies)
    clusters = [c for c in config.clusters if cluster is None or c.name == cluster]
    if not clusters:
        return [f"no cluster named {cluster!r} (clusters: {', '.join(c.name for c in config.clusters)})"]
    out: list[str] = []
    for c in clusters:
        if group is not None:
            why = c.filters.groups.build().why_not(group)
            out.append(f"cluster {c.name}: group {group}: " + ("watched" if why is None else
                                                               f"NOT watched ({why}, clusters[].filters.groups)"))
            out += _settings(config, policies.for_group(c.name, group).rule, GROUP_FIELDS, lines)
        if topic is not None:
            watch = c.filters.topic_filter()
            internal = topic in KAFKA_INTERNAL_TOPICS
            ok = watch is None or watch(topic, internal)
            why = c.filters.topics.build().why_not(topic)
            out.append(f"cluster {c.name}: topic {topic}: " + ("watched" if ok else
                                                               f"NOT watched ({why or 'internal topics off'})"))
            out += _settings(config, policies.for_topic(c.name, topic).rule, TOPIC_FIELDS, lines)
    return out

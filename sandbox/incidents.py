"""What each incident does to the sandbox when it starts and when it ends.

Model changes happen directly (we run on the sandbox loop); changes to the
real ZooKeeper processes block, so they are returned as a callable that the
runner executes on a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from sandbox.handlers import metadata_answer
from sandbox.model import Cluster
from sandbox.spec import IncidentSpec

if TYPE_CHECKING:
    from sandbox.zookeeper import ZooKeeperEnsemble

Blocking = Callable[[], None] | None
UNCLEAN = "unclean.leader.election.enable"


class IncidentTarget(Protocol):
    """What incidents act on: a running `sandbox.runner.Sandbox`.

    Spelled out here rather than imported, because the runner imports this module to run incidents; the
    ZooKeeper incidents remember which servers they stopped or paused in the two lists, so that their end
    brings back exactly those; `config_before` keeps the topic configs an incident overrode.
    """

    @property
    def cluster(self) -> Cluster: ...

    @property
    def ensemble(self) -> ZooKeeperEnsemble | None: ...

    zk_killed: list[int]
    zk_paused: list[int]
    config_before: dict[tuple[str, str], str | None]


def _first(items: list[str] | dict[str, object]) -> str:
    return next(iter(items))


def apply(sb: IncidentTarget, inc: IncidentSpec, starting: bool) -> Blocking:
    c = sb.cluster
    kind = inc.type
    broker = inc.broker or (max(c.brokers) if c.brokers else 1)
    group = inc.group or (_first(c.groups) if c.groups else None)
    producer = inc.transactional_id or (_first(c.txn_producers) if c.txn_producers else None)
    user_topics = [t for t in c.topics.values() if not t.internal]
    topic = inc.topic or (user_topics[0].name if user_topics else None)
    # A marker in the event log, so a run can tell exactly when each scripted incident began and ended.
    c.log(f"incident {kind} {'start' if starting else 'end'}")

    if kind == "broker_crash":
        (c.crash_broker if starting else c.restart_broker)(broker)
    elif kind == "broker_flap":
        if starting:
            c.start_flapping(broker, inc.period or 6.0)
        else:
            c.stop_flapping(broker)
    elif kind == "broker_slow":
        c.set_broker_delay(broker, (inc.delay_s if inc.delay_s is not None else 5.0) if starting else 0.0)
    elif kind == "metadata_lag":
        c.lag_metadata(broker, metadata_answer(c) if starting else None)
    elif kind == "slow_follower":
        c.set_slow_follower(broker, starting)
    elif kind in ("consumer_stall", "consumer_stop") and group:
        c.set_group_mode(group, ("stalled" if kind == "consumer_stall" else "stopped") if starting else "running")
    elif kind == "consumer_rewind" and group and starting:
        c.rewind_group(group, inc.messages or 1000)
    elif kind == "consumer_behind_retention" and group:
        target = inc.topic or c.groups[group].spec.topics[0]
        c.set_group_mode(group, "stopped" if starting else "running")
        c.set_topic_config(target, "retention.ms", str(inc.retention_ms or 60_000) if starting else None)
    elif kind == "producer_crash_in_txn" and producer:
        if starting:
            c.crash_producer(producer, inside_transaction=True)
        else:
            c.restart_producer(producer)
    elif kind == "producer_restart" and producer and starting:
        c.restart_producer(producer)
    elif kind == "hanging_transaction" and topic:
        part = inc.partition or 0
        if starting:
            c.inject_hanging_transaction(topic, part)
        else:
            c.abort_hanging_transactions(topic, part)
    elif kind in ("unclean_election", "acks1_leader_loss") and topic:
        _lose_leader(c, sb.config_before, kind, topic, inc.partition or 0, starting)
    elif kind == "leader_change_hw_dip" and topic:
        if starting:
            c.move_leader(topic, inc.partition or 0, inc.messages or 50, inc.duration or 10.0)
        else:
            c.end_hw_dip(topic, inc.partition or 0)
    elif kind == "topic_recreate" and topic and starting:
        c.recreate_topic(topic)
    elif kind == "controller_failover" and starting:
        c.controller_failover()
    elif kind in ("kraft_remove_voter", "kraft_add_voter") and inc.node is not None:
        # the end undoes the start: a voter removed for `duration` is added back, one added is removed again
        (c.remove_voter if (kind == "kraft_remove_voter") == starting else c.add_voter)(inc.node)
    elif kind == "zk_leader_kill" and sb.ensemble is not None:
        return _zk_leader_kill(sb.ensemble, sb.zk_killed, starting)
    elif kind == "zk_follower_pause" and sb.ensemble is not None:
        return _zk_follower_pause(sb.ensemble, sb.zk_paused, inc, starting)
    return None


def _lose_leader(c: Cluster, config_before: dict[tuple[str, str], str | None], kind: str, topic: str, index: int,
                 starting: bool) -> None:
    """Followers stall at the start; the leader's replica is lost at the end. For an unclean election the topic
    allows it for the incident's length (as an operator does to bring an offline partition back)."""
    unclean = kind == "unclean_election"
    if starting:
        if unclean:
            before = c.topics[topic].configs.get(UNCLEAN)
            config_before.setdefault((topic, UNCLEAN), before)
            c.set_topic_config(topic, UNCLEAN, "true")
            c.log(f"topic {topic}: {UNCLEAN}=true (was {before or 'the broker default'})")
        c.stall_followers(topic, index)
        return
    c.lose_leader(topic, index)
    if unclean:
        before = config_before.pop((topic, UNCLEAN), None)
        c.set_topic_config(topic, UNCLEAN, before)
        c.log(f"topic {topic}: {UNCLEAN} back to {before or 'the broker default'}")


def _zk_leader_kill(ens: ZooKeeperEnsemble, state: list[int], starting: bool) -> Blocking:
    def start() -> None:
        state.append(ens.kill_leader())

    def end() -> None:
        while state:
            ens.start_node(state.pop())

    return start if starting else end


def _zk_follower_pause(ens: ZooKeeperEnsemble, state: list[int], inc: IncidentSpec, starting: bool) -> Blocking:
    def start() -> None:
        sid = inc.zk_server
        if sid is None:
            leader = ens.leader_sid()
            sid = next(n.sid for n in ens.nodes if n.sid != leader and n.alive and not n.paused)
        ens.pause(sid)
        state.append(sid)

    def end() -> None:
        while state:
            ens.resume(state.pop())

    return start if starting else end

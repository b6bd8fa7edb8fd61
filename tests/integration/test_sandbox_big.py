"""One broker down on a 20,000-partition cluster: what the collector sees is what the model says is so.

The storm incident correlation has to fold: a broker of six dies, and the half of an RF-3 cluster that had a
replica on it (~10,000 partitions) is under-replicated and at min ISR. The sandbox's model is the ground
truth (`Cluster.ground_truth_broker_outage`), read with simulated time frozen so it cannot move between
the poll and the reading; one poll with the real collector over TCP must report exactly those partitions,
not a count that happens to match.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from collectors.runtime.poller import ClusterPoller
from sandbox.model import BrokerOutage, Cluster
from sandbox.runner import Sandbox
from tests.support.monitor import monitor_config, poll
from tests.support.sandbox import frozen, running_sandbox, scenario

pytestmark = pytest.mark.integration

BROKERS = 6
DEAD = 4
INTERNAL = 10  # partitions of each internal topic (the sandbox's default)
CLUSTER = {
    "brokers": BROKERS,
    "broker_config": {"min.insync.replicas": "2"},
    # 19,990 idle partitions, placed as Kafka places them, and one busy topic the groups read
    "generated_topics": {"count": 1999, "partitions": 10, "replication_factor": 3, "min_insync_replicas": 2},
    "topics": [{"name": "orders", "partitions": 10, "replication_factor": 3, "produce_rate": 50,
                "configs": {"unclean.leader.election.enable": "true"}}],
    "groups": [{"group_id": "billing", "topics": ["orders"], "commit_interval_s": 1},
               {"group_id": "audit", "topics": ["orders", "t0000", "t0001"], "commit_interval_s": 1}],
    "generated_groups": {"count": 3, "topics_per_group": 5},
}


def _poller(sb: Sandbox) -> ClusterPoller:
    """`make_poller`'s poller with a request timeout for a big cluster: the six simulated brokers answer on one
    event loop, sharing two cores with the poller, so an answer about 3,000 partitions can wait its turn behind
    seventeen others for more than the usual 3 s on a busy machine."""
    cfg = monitor_config(sb).model_copy(update={"request_timeout_s": 20.0})
    return ClusterPoller(cfg.clusters[0], cfg)


def _isr_shrunk(c: Cluster) -> bool:
    """The controller fenced the dead broker: it left the ISR of every partition it had a replica of."""
    truth = c.ground_truth_broker_outage(DEAD)
    return not truth.registered and truth.under_replicated == truth.partitions


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with running_sandbox(scenario(CLUSTER), speed=20.0) as s:
        yield s


def test_a_broker_outage_on_20000_partitions_is_seen_exactly(sb: Sandbox) -> None:
    sb.call(lambda c: c.crash_broker(DEAD))
    # the ISR shrinks when the ZooKeeper session expires (18 simulated seconds, under a second here)
    assert sb.wait_for(_isr_shrunk, timeout=30)
    poller = _poller(sb)
    try:
        with frozen(sb):
            r = poll(poller, sb)
            truth: BrokerOutage = sb.call(lambda c: c.ground_truth_broker_outage(DEAD))
    finally:
        poller.close()
    snap = r.snapshot
    internal = {t.topic for t in snap.topics if t.internal}
    assert sum(p.topic not in internal for p in snap.partitions) == 20_000
    assert len(snap.partitions) == 20_000 + 2 * INTERNAL
    assert "partitions" not in snap.stale_sections and "configs" not in snap.stale_sections

    # the storm: every partition with a replica on the dead broker lost exactly that replica
    assert truth.down and truth.offline == truth.under_min_isr == frozenset()
    assert truth.at_min_isr == truth.under_replicated == truth.partitions
    assert 9_000 < len(truth.partitions) < 11_000  # RF/brokers: half the cluster, as Kafka's placement spreads it
    assert truth.led == frozenset()  # its leaderships moved to in-sync replicas

    seen = {(p.topic, p.partition): p for p in snap.partitions}
    under_replicated = {k for k, p in seen.items() if p.under_replicated}
    at_min_isr = {k for k, p in seen.items() if p.at_min_isr and not p.offline}
    assert under_replicated == truth.under_replicated
    assert at_min_isr == truth.at_min_isr
    assert {k for k, p in seen.items() if p.offline} == truth.offline
    assert {k for k, p in seen.items() if p.under_min_isr and not p.offline} == truth.under_min_isr
    assert all(DEAD in seen[k].replicas and DEAD not in seen[k].isr for k in truth.partitions)
    unclean = {t.topic for t in snap.topics if t.unclean_leader_election and t.topic in truth.topics}
    assert unclean == truth.unclean_topics == {"orders"}

    brokers = {b.broker_id: b for b in snap.brokers}
    assert not brokers[DEAD].alive
    assert all(brokers[i].alive for i in range(1, BROKERS + 1) if i != DEAD)

    # one cause, one incident: the storm of partition alerts is one broker incident with the true blast radius
    assert len(snap.incidents) <= 3, [(i.kind, i.subject) for i in snap.incidents]
    inc = next(i for i in snap.incidents if i.kind == "broker")
    assert inc.subject == f"broker {DEAD}" and inc.brokers == [DEAD] and inc.severity == "critical"
    assert inc.partitions == len(truth.partitions) and inc.topics == len(truth.topics)
    assert (inc.at_min_isr, inc.under_min_isr, inc.offline) == (
        len(truth.at_min_isr), len(truth.under_min_isr), len(truth.offline))
    assert inc.unclean_topics == len(truth.unclean_topics) == 1
    assert inc.members.get("at_min_isr") == len(truth.at_min_isr)

"""A KRaft cluster's controller and quorum leader as the collector must read them.

Only the Raft leader answers DescribeQuorum, so a quorum without a leader shows as a failed DescribeQuorum
(NOT_LEADER_OR_FOLLOWER, or no answer in time), which is evidence for `kraft_no_leader`; and a KRaft broker's
Metadata names a random broker as controller (KIP-590), so the active controller is the quorum leader, kept over
polls that could not read the quorum.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import kafka.errors as kafka_errors
import pytest

from collectors.alerting.evaluation import judge
from collectors.config import Thresholds
from collectors.model.observations import KafkaObservation, QuorumInfo
from collectors.model.records import ClusterSnapshot
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState
from collectors.sources.kafka_answers import parse_quorum
from collectors.sources.kafka_transport import Outcome

T0 = 1_800_000_000.0
TH = Thresholds()


def parse(outcome: Outcome) -> KafkaObservation:
    obs = KafkaObservation(time=T0)
    parse_quorum(outcome, obs)
    return obs


def answer(top: int = 0, partition: int = 0) -> Any:
    part = SimpleNamespace(partition_index=0, error_code=partition, leader_id=0, leader_epoch=0, high_watermark=0,
                           current_voters=[], observers=[])
    return SimpleNamespace(error_code=top, topics=[SimpleNamespace(topic_name="__cluster_metadata", partitions=[part])])


@pytest.mark.parametrize(("outcome", "evidence", "kraft"), [
    (Outcome(1, None, answer(partition=6), None), "DescribeQuorum: NOT_LEADER_OR_FOLLOWER", True),
    (Outcome(1, None, answer(top=6), None), "DescribeQuorum: NOT_LEADER_OR_FOLLOWER", True),
    (Outcome(1, None, answer(top=7), None), "DescribeQuorum: REQUEST_TIMED_OUT", True),  # the broker's forwarding
    (Outcome(2, None, None, kafka_errors.RequestTimedOutError("after 1000 ms")),
     "DescribeQuorum to broker 2 got no answer in time (RequestTimedOutError)", None),
    (Outcome(2, None, None, kafka_errors.KafkaTimeoutError()),
     "DescribeQuorum to broker 2 got no answer in time (KafkaTimeoutError)", None),
    # no broker answered this poll (the client chose one): a timeout says nothing of the quorum
    (Outcome(None, None, None, kafka_errors.KafkaTimeoutError()), None, None),
    (Outcome(2, None, None, kafka_errors.KafkaConnectionError("refused")), None, None),  # that broker died
    (Outcome(1, None, answer(top=29), None), None, None),  # CLUSTER_AUTHORIZATION_FAILED
])
def test_which_failed_describe_quorum_says_the_quorum_has_no_leader(outcome: Outcome, evidence: str | None,
                                                                      kraft: bool | None) -> None:
    obs = parse(outcome)
    assert obs.quorum is None and obs.stale_sections == {"quorum"}
    assert obs.quorum_no_leader == evidence and obs.kraft is kraft


def quorum(leader: int, epoch: int, hw: int = 500) -> QuorumInfo:
    voters = [{"replica_id": i, "log_end_offset": hw, "last_fetch_timestamp": int(T0 * 1000),
               "last_caught_up_timestamp": int(T0 * 1000)} for i in (1, 2, 3)]
    return {"leader_id": leader, "leader_epoch": epoch, "high_watermark": hw, "voters": voters,  # type: ignore[typeddict-item]
            "observers": []}


def observation(t: float, told: int, q: QuorumInfo | None = None, no_leader: str | None = None,
                kraft: bool | None = True) -> KafkaObservation:
    """A KRaft poll whose Metadata names `told` as controller (a random broker); `q`: DescribeQuorum's answer."""
    obs = KafkaObservation(time=t, cluster_id="c", controller_id=told, quorum=q, kraft=kraft if q is None else True,
                           brokers=[(i, "h", 9092, None) for i in (1, 2, 3)])
    if q is None:
        obs.fail("quorum", no_leader or "DescribeQuorum failed: KafkaConnectionError")
        obs.quorum_no_leader = no_leader
    return obs


def poll(st: ClusterState, obs: KafkaObservation) -> tuple[ClusterSnapshot, set[str]]:
    snap = build_snapshot("c", obs, None, st, TH, obs.time)
    return snap, {c.rule for c in judge(snap, st, TH, obs.time)}


def test_the_controller_is_the_quorum_leader_and_stays_it_over_polls_that_cannot_read_the_quorum() -> None:
    st = ClusterState()
    for k, told in enumerate((1, 3, 2, 1)):  # Metadata: another broker at each poll
        snap, rules = poll(st, observation(T0 + 30 * k, told, quorum(2, 4)))
        assert snap.controller_id == 2 and [b.broker_id for b in snap.brokers if b.is_controller] == [2]
        assert rules == set()
    # the quorum unreadable (a broker dropped the connection): the controller known stays, nothing is claimed
    snap, rules = poll(st, observation(T0 + 120, 3, kraft=None))
    assert snap.mode == "kraft" and snap.controller_id == 2 and snap.kraft_voters == [] and rules == {"data_stale"}
    # ZooKeeper mode (DescribeQuorum unsupported): Metadata's controller is the controller
    snap, _ = poll(ClusterState(), observation(T0, 3, kraft=False))
    assert snap.controller_id == 3 and snap.mode is None
    # a KRaft cluster whose quorum never named a leader: no controller known, and no first-poll no_controller page
    # (its absence is kraft_no_leader's, after the grace: tests/unit/test_kraft_quorum_health.py)
    snap, rules = poll(ClusterState(), observation(T0, 3, no_leader="DescribeQuorum: NOT_LEADER_OR_FOLLOWER"))
    assert snap.controller_id is None and snap.kraft_voters == [] and rules == {"data_stale"}


def test_no_leader_is_reported_from_the_voters_last_known_and_alerted_after_the_grace() -> None:
    st = ClusterState()
    poll(st, observation(T0, 1, quorum(1, 4, hw=800)))
    why = "DescribeQuorum: NOT_LEADER_OR_FOLLOWER"
    snap, rules = poll(st, observation(T0 + 10, 2, no_leader=why))
    assert [(v.node_id, v.role, v.leader_id, v.leader_epoch, v.high_watermark, v.lag) for v in snap.kraft_voters] == [
        (i, "voter", -1, 4, 800, None) for i in (1, 2, 3)]
    assert snap.controller_id == 1 and rules == {"data_stale"}  # one poll: the leader may be moving
    snap, rules = poll(st, observation(T0 + 30, 3, no_leader=why))
    assert rules == {"data_stale"}  # 20 s: not yet
    snap, rules = poll(st, observation(T0 + 40, 3, no_leader=why))
    assert rules == {"data_stale", "kraft_no_leader"}  # 30 s and three polls; no voter "lagging" behind no leader
    alert = next(c for c in judge(snap, st, TH, T0 + 40) if c.rule == "kraft_no_leader")
    assert alert.summary == ("the KRaft quorum has had no leader for 30s (voters 1, 2, 3; last leader epoch 4): "
                             "DescribeQuorum: NOT_LEADER_OR_FOLLOWER")
    # a leader again, in a new epoch: an election, and the controller it names
    snap, rules = poll(st, observation(T0 + 50, 1, quorum(3, 5)))
    assert rules == {"kraft_leader_election"} and snap.controller_id == 3


def test_one_poll_without_a_leader_during_an_election_raises_nothing() -> None:
    st = ClusterState()
    poll(st, observation(T0, 1, quorum(1, 4)))
    _, rules = poll(st, observation(T0 + 30, 2, no_leader="DescribeQuorum: NOT_LEADER_OR_FOLLOWER"))
    assert rules == {"data_stale"}
    _, rules = poll(st, observation(T0 + 60, 3, quorum(2, 5)))
    assert rules == {"kraft_leader_election"} and st.condition_since == {}

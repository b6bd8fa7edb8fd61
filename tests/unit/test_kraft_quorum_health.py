"""A KRaft quorum that cannot commit, as the collector must see it.

A. A monitor started while the quorum has no leader: DescribeQuorum gets no answer (or REQUEST_TIMED_OUT from the
   broker forwarding it), no voter was ever seen. A cluster configured ``kraft: true`` is KRaft from the first poll,
   so its controller is the quorum leader (none known), not Metadata's random broker (KIP-590), and
   `kraft_no_leader` says the quorum did not answer, after the same grace as any leaderless quorum; `no_controller`
   is not its double.
B. A leader that hears from no majority of the voters keeps leading on Kafka 3.3-3.6 (it resigns only from 3.7,
   KAFKA-15489): the high watermark stops, so lag behind it says nothing; the voters' last fetch times, which are
   all the leader's clock, say who is fetching, and lag is measured against the leader's log end offset as
   ``kafka-metadata-quorum describe --replication`` does.
"""

from __future__ import annotations

from typing import Any

from collectors.alerting.evaluation import judge
from collectors.alerting.rules import KRAFT_NO_LEADER_GRACE_S, Candidate
from collectors.config import MonitorConfig, Thresholds
from collectors.model.observations import KafkaObservation, QuorumInfo
from collectors.model.records import ClusterSnapshot
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState
from collectors.runtime.poller import Monitor

T0 = 1_800_000_000.0
TH = Thresholds()
TIMEOUT = "DescribeQuorum to broker 1 got no answer in time (KafkaTimeoutError)"


def unanswered(t: float, told: int, no_leader: str | None = TIMEOUT, kraft: bool | None = None,
               error: str = "DescribeQuorum failed: KafkaTimeoutError") -> KafkaObservation:
    """A poll whose brokers answer (Metadata names `told` as controller) and whose DescribeQuorum does not:
    `no_leader` as the adapter judges it (`KafkaObservation.quorum_no_leader`), `kraft` as it learnt from it."""
    obs = KafkaObservation(time=t, cluster_id="c", controller_id=told, kraft=kraft,
                           brokers=[(i, f"h{i}", 9092, None) for i in (1, 2, 3)])
    obs.fail("quorum", error)
    obs.quorum_no_leader = no_leader
    return obs


def replica(node: int, leo: int, fetch_s: float | None) -> dict[str, int]:
    ms = -1 if fetch_s is None else int(fetch_s * 1000)
    return {"replica_id": node, "log_end_offset": leo, "last_fetch_timestamp": ms, "last_caught_up_timestamp": ms}


def answered(t: float, voters: list[dict[str, int]], hw: int = 5000, leader: int = 3000, epoch: int = 7,
             observers: list[dict[str, int]] | None = None) -> KafkaObservation:
    q: QuorumInfo = {"leader_id": leader, "leader_epoch": epoch, "high_watermark": hw,  # type: ignore[typeddict-item]
                     "voters": voters, "observers": observers or []}
    return KafkaObservation(time=t, cluster_id="c", controller_id=1, quorum=q, kraft=True,
                            brokers=[(i, f"h{i}", 9092, None) for i in (1, 2, 3)])


def poll(st: ClusterState, obs: KafkaObservation, kraft: bool | None = True) -> tuple[ClusterSnapshot, list[Candidate]]:
    snap = build_snapshot("c", obs, None, st, TH, obs.time, kraft=kraft)
    return snap, judge(snap, st, TH, obs.time)


def rules(alerts: list[Candidate]) -> set[str]:
    return {a.rule for a in alerts}


# ------------------------------------------------------------------------------------------------ A

def test_a_fresh_monitor_of_a_kraft_cluster_whose_quorum_does_not_answer_says_so_after_the_grace() -> None:
    st = ClusterState()
    seen = []
    for k, told in enumerate((1, 2, 3, 1)):  # Metadata: a random broker each poll
        snap, alerts = poll(st, unanswered(T0 + 10 * k, told))
        seen.append((snap.mode, snap.controller_id, [b.broker_id for b in snap.brokers if b.is_controller]))
        if k < 3:  # 0, 10, 20 s: an election takes seconds
            assert rules(alerts) == {"data_stale"}, k
    assert seen == [("kraft", None, [])] * 4  # KRaft from the first poll; no controller invented
    assert rules(alerts) == {"data_stale", "kraft_no_leader"}  # 30 s and four polls
    alert = next(a for a in alerts if a.rule == "kraft_no_leader")
    assert alert.severity == "critical" and alert.subject == "c"
    assert alert.summary == ("the KRaft quorum has had no leader for 30s: DescribeQuorum did not answer with one "
                             "(voters not known yet): " + TIMEOUT)


def test_a_broker_forwarding_answers_request_timed_out_no_first_poll_no_controller() -> None:
    st = ClusterState()
    why = "DescribeQuorum: REQUEST_TIMED_OUT"
    for k in range(3):
        snap, alerts = poll(st, unanswered(T0 + 15 * k, 1, no_leader=why, kraft=True, error=why))
        assert snap.mode == "kraft" and snap.controller_id is None
        assert "no_controller" not in rules(alerts)
        assert ("kraft_no_leader" in rules(alerts)) is (k == 2), k
    # the same without `kraft` configured: the broker's REQUEST_TIMED_OUT says KRaft, the same judgement
    st = ClusterState()
    _, alerts = poll(st, unanswered(T0, 1, no_leader=why, kraft=True, error=why), kraft=None)
    assert rules(alerts) == {"data_stale"}
    _, alerts = poll(st, unanswered(T0 + 30, 1, no_leader=why, kraft=True, error=why), kraft=None)
    assert rules(alerts) == {"data_stale", "kraft_no_leader"}


def test_a_quorum_unreadable_for_another_reason_claims_no_leader_nor_controller() -> None:
    """An authorisation failure (or a broker dropping the connection) is no evidence that the quorum has no leader:
    the quorum section is stale, and nothing else is claimed, however long it lasts."""
    st = ClusterState()
    for k in range(4):
        snap, alerts = poll(st, unanswered(T0 + 30 * k, 1 + k % 3, no_leader=None,
                                           error="DescribeQuorum: CLUSTER_AUTHORIZATION_FAILED"))
        assert snap.mode == "kraft" and snap.controller_id is None and rules(alerts) == {"data_stale"}


def test_a_cluster_not_configured_kraft_keeps_the_mode_it_sees() -> None:
    for configured in (None, False):
        st = ClusterState()
        for k, told in enumerate((1, 2, 3)):
            snap, alerts = poll(st, unanswered(T0 + 30 * k, told), kraft=configured)
            assert (snap.mode, snap.controller_id) == (None, told) and rules(alerts) == {"data_stale"}


def test_the_poller_passes_the_configured_kraft_flag() -> None:
    cfg = MonitorConfig.model_validate({
        "clusters": [{"name": "k", "bootstrap_servers": "127.0.0.1:1", "kraft": True},
                     {"name": "z", "bootstrap_servers": "127.0.0.1:1"}],
        "request_timeout_s": 1, "history": {"enabled": False}})
    monitor = Monitor(cfg)
    try:
        for p in monitor.pollers:
            p.kafka.observe = lambda now, watch, **_: unanswered(now, 2)  # type: ignore[method-assign]
        results = {r.snapshot.cluster: r.snapshot for r in monitor.poll_once(T0)}
        assert (results["k"].mode, results["k"].controller_id) == ("kraft", None)
        assert (results["z"].mode, results["z"].controller_id) == (None, 2)
    finally:
        monitor.close()


# ------------------------------------------------------------------------------------------------ B

def quorum_at(t: float, dead_since: float | None, leo: int, hw: int = 5000) -> KafkaObservation:
    """Leader 3000 and voters 3001, 3002 (dead since `dead_since`: their log end stays at the high watermark);
    brokers 1-3 observers fetching from the leader."""
    dead = dead_since is not None
    voters = [replica(3000, leo, t)] + [replica(i, hw if dead else leo, dead_since if dead else t)
                                        for i in (3001, 3002)]
    return answered(t, voters, hw=hw, observers=[replica(b, leo, t) for b in (1, 2, 3)])


def test_a_leader_that_hears_from_no_majority_pages_after_the_grace() -> None:
    st = ClusterState()
    _, alerts = poll(st, quorum_at(T0, None, 5000))
    assert alerts == []
    dead = T0 - 60  # their last fetch: 60 s behind the leader's at the first poll that sees it
    snap, alerts = poll(st, quorum_at(T0 + 15, dead, 5030))
    assert alerts == []  # seen once: pending
    snap, alerts = poll(st, quorum_at(T0 + 45, dead, 5090))
    assert rules(alerts) == {"kraft_no_leader"}
    alert = alerts[0]
    assert alert.severity == "critical" and alert.subject == "c"
    assert alert.summary == ("the KRaft leader 3000 (epoch 7) has heard from no majority of the voters for 30s: "
                             "only 1 of 3 fetching (3001 last fetched 105s, 3002 105s before the freshest "
                             "replica); nothing commits (high watermark 5000)")
    assert snap.controller_id == 3000


def test_an_election_blip_shorter_than_the_grace_raises_nothing() -> None:
    st = ClusterState()
    poll(st, quorum_at(T0, None, 5000))
    _, alerts = poll(st, quorum_at(T0 + 30, T0 - 30, 5030))  # one poll with two voters 60 s behind
    assert alerts == []
    _, alerts = poll(st, quorum_at(T0 + 60, None, 5060))  # fetching again
    assert alerts == [] and st.condition_since == {}


def test_unknown_or_recent_fetch_times_and_one_dead_voter_of_three_are_a_majority() -> None:
    st = ClusterState()
    for k in range(4):
        t = T0 + 30 * k
        # -1: the leader does not know yet (a new leader, an old Kafka): unknown, not stale
        _, alerts = poll(st, answered(t, [replica(3000, 900, t), replica(3001, 900, None), replica(3002, 900, None)],
                                      hw=900))
        assert alerts == []
    st = ClusterState()
    for k in range(4):
        t = T0 + 30 * k
        _, alerts = poll(st, answered(t, [replica(3000, 900, t), replica(3001, 900, t - 25),
                                          replica(3002, 900, T0 - 600)], hw=900))
        assert "kraft_no_leader" not in rules(alerts)  # the leader and 3001: two of three


def test_lag_is_measured_against_the_leader_s_log_end_offset() -> None:
    st = ClusterState()
    snap, _ = poll(st, answered(T0, [replica(3000, 5600, T0), replica(3001, 5000, T0), replica(3002, 4000, T0)],
                                hw=5000, observers=[replica(1, 5590, T0)]))
    assert [(v.node_id, v.role, v.lag) for v in snap.kraft_voters] == [
        (3000, "leader", 0), (3001, "voter", 600), (3002, "voter", 1600), (1, "observer", 10)]
    # the leader's entry missing (or its log end unknown): the high watermark, as before
    snap, _ = poll(st, answered(T0 + 30, [replica(3000, -1, T0), replica(3001, 5000, T0), replica(3002, 4000, T0)],
                                hw=5000))
    assert [v.lag for v in snap.kraft_voters] == [None, 0, 1000]


def test_a_stuck_high_watermark_still_shows_the_dead_voters_lagging() -> None:
    st = ClusterState()
    leo = 5000
    lags: list[Any] = []
    for k in range(20):
        leo += 60
        snap, alerts = poll(st, quorum_at(T0 + 30 * k, T0 - 30, leo))
        lags = [(v.node_id, v.lag) for v in snap.kraft_voters if v.role != "observer"]
    assert lags == [(3000, 0), (3001, 1200), (3002, 1200)]
    assert {(a.rule, a.subject) for a in alerts} == {("kraft_no_leader", "c"), ("kraft_voter_lagging", "voter-3001"),
                                                    ("kraft_voter_lagging", "voter-3002")}
    assert KRAFT_NO_LEADER_GRACE_S == 30.0

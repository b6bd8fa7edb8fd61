"""The sandbox's KRaft quorum behaves as Raft and Kafka's brokers do (`sandbox.controller`, `sandbox.handlers`).

A leader is elected only by a majority of the voters; without one nobody fences a broker; only the leader answers
DescribeQuorum; a KRaft broker names a random broker as controller in Metadata (KIP-590).
"""

from __future__ import annotations

from typing import Any

from sandbox.controller import KRAFT_CHECK_QUORUM_S, KRAFT_FETCH_TIMEOUT_S
from sandbox.handlers import NOT_LEADER_OR_FOLLOWER, Handlers, controller_for_clients
from tests.unit.test_sandbox_model import make, run


def quorum_answer(c: Any) -> dict[str, Any]:
    return dict(Handlers(c).describe_quorum(1, None))  # type: ignore[arg-type]


def test_without_a_majority_of_voters_the_quorum_has_no_leader_and_nothing_is_fenced() -> None:
    c = make(mode="kraft")
    run(c, 5)
    c.crash_broker(2)
    c.crash_broker(3)
    run(c, KRAFT_CHECK_QUORUM_S - 1)
    assert c.quorum_leader == 1  # not yet: the leader has not noticed it hears from no majority
    run(c, 2)
    assert c.quorum_leader == c.controller_id == -1
    part = quorum_answer(c)["topics"][0]["partitions"][0]
    assert (part["error_code"], part["leader_id"], part["current_voters"]) == (NOT_LEADER_OR_FOLLOWER, 0, [])
    run(c, 30)  # far past broker.session.timeout.ms: nobody fences the dead voters, no leader moves
    assert c.quorum_leader == -1 and all(b.registered for b in c.brokers.values())
    epoch = c.quorum_epoch
    c.restart_broker(2)  # a majority again: elected at once
    assert c.quorum_leader == c.controller_id == 1 and c.quorum_epoch == epoch + 1
    part = quorum_answer(c)["topics"][0]["partitions"][0]
    assert (part["error_code"], part["leader_id"]) == (0, 1)
    run(c, 1)
    assert not c.brokers[3].registered  # the new leader fences what stayed dead


def test_a_dead_leader_is_replaced_after_the_fetch_timeout_when_a_majority_is_up() -> None:
    c = make(mode="kraft")
    run(c, 5)
    c.crash_broker(1)
    run(c, 1)
    assert quorum_answer(c)["topics"][0]["partitions"][0]["error_code"] == NOT_LEADER_OR_FOLLOWER
    run(c, KRAFT_FETCH_TIMEOUT_S)
    assert c.quorum_leader == c.controller_id == 2 and c.brokers[1].registered  # fenced only at session expiry
    run(c, 10)
    assert not c.brokers[1].registered and c.quorum_leader == 2


def test_metadata_names_a_random_alive_broker_in_kraft_and_the_controller_in_zookeeper_mode() -> None:
    c = make(mode="kraft")
    told = [controller_for_clients(c) for _ in range(30)]
    assert set(told) == {1, 2, 3}
    again = make(mode="kraft")
    assert told == [controller_for_clients(again) for _ in range(30)]  # seeded: the same sequence every run
    z = make()
    assert {controller_for_clients(z) for _ in range(30)} == {z.controller_id}

"""The shared vocabulary: partition classes as kafka-topics' flags define them, and orders every consumer
(exporter codes, dashboard sorting, history roll-ups) relies on."""

from __future__ import annotations

import pytest

from collectors.model import vocabulary as V


@pytest.mark.parametrize(("leader", "isr", "rf", "min_isr", "expected"), [
    (1, 3, 3, 2, V.HEALTHY),
    (-1, 1, 3, 2, V.OFFLINE),
    (-1, 0, 3, 2, V.OFFLINE),        # offline wins over everything
    (1, 1, 3, 2, V.UNDER_MIN_ISR),   # also under-replicated: the worse class is named
    (1, 2, 3, 2, V.AT_MIN_ISR),
    (1, 2, 2, 2, V.HEALTHY),         # min ISR = RF: at min ISR whenever healthy, a config risk, not a state
    (1, 1, 2, 2, V.UNDER_MIN_ISR),
    (1, 2, 3, 1, V.UNDER_REPLICATED),
    (1, 1, 1, 1, V.HEALTHY),
])
def test_partition_class(leader: int, isr: int, rf: int, min_isr: int, expected: str) -> None:
    assert V.partition_class(leader, isr, rf, min_isr) == expected
    assert expected in V.PARTITION_CLASSES


def test_orders() -> None:
    assert V.PARTITION_STATUSES == ("OK", "WARN", "REWIND", "STALL", "STOP")
    assert [V.PARTITION_STATUS_RANK[s] for s in V.PARTITION_STATUSES] == [0, 1, 2, 3, 4]
    assert V.GROUP_STATUS_RANK == {"OK": 0, "WARN": 1, "ERR": 2}
    assert {V.GROUP_STATUS_OF[s] for s in V.PARTITION_STATUSES} == set(V.GROUP_STATUSES)
    assert V.SEVERITY_RANK["critical"] < V.SEVERITY_RANK["warning"] < V.SEVERITY_RANK["info"]


def test_transaction_states() -> None:
    assert set(V.TXN_STATES) == V.OPEN_TXN_STATES | V.CLOSED_TXN_STATES
    assert not V.OPEN_TXN_STATES & V.CLOSED_TXN_STATES
    assert V.PREPARE_TXN_STATES < V.OPEN_TXN_STATES and "Ongoing" in V.OPEN_TXN_STATES


def test_broker_and_voter_subjects_read_back() -> None:
    from collectors.model.vocabulary import broker_of, broker_subject, voter_of, voter_subject

    assert (broker_subject(3), voter_subject(3000)) == ("broker-3", "voter-3000")
    assert (broker_of(broker_subject(3)), voter_of(voter_subject(3000))) == (3, 3000)
    # a subject of the other kind, or of none, names no node
    assert [broker_of(s) for s in ("voter-3", "3", "broker-", "broker-x", "sandbox")] == [None] * 5
    assert [voter_of(s) for s in ("broker-3", "voter-", "voter-1a")] == [None] * 3

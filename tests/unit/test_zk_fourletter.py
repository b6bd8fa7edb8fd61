"""Parsers and error mapping of collectors.sources.zk_fourletter, on answers captured from a real 3.8 ensemble.

The fixtures were captured from sandbox.zookeeper.ZooKeeperEnsemble (Debian's
ZooKeeper 3.8.0) after a few kazoo writes, so they carry non-zero latencies,
zxids past the epoch boundary and the leader-only lines.  The mntr texts are
trimmed to a representative subset (the full answers are ~500 lines).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from collectors.sources.zk_fourletter import (
    FourLetterError,
    FourLetterNotServing,
    FourLetterNotWhitelisted,
    FourLetterTimeout,
    FourLetterUnreachable,
    parse_mntr,
    parse_srvr,
    send_four_letter,
    split_zxid,
)

SRVR_LEADER = (
    "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\n"
    "Latency min/avg/max: 0/0.0/0\n"
    "Received: 3\n"
    "Sent: 2\n"
    "Connections: 1\n"
    "Outstanding: 0\n"
    "Zxid: 0x100000018\n"
    "Mode: leader\n"
    "Node count: 27\n"
    "Proposal sizes last/min/max: 88/36/201\n"
)
SRVR_FOLLOWER = (
    "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\n"
    "Latency min/avg/max: 0/1.6739/9\n"
    "Received: 49\n"
    "Sent: 48\n"
    "Connections: 2\n"
    "Outstanding: 0\n"
    "Zxid: 0x100000018\n"
    "Mode: follower\n"
    "Node count: 27\n"
)
# A freshly elected follower that has not yet seen a write still reports zxid 0.
SRVR_STANDALONE = (
    "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\n"
    "Latency min/avg/max: 0/0.0/0\n"
    "Received: 1\n"
    "Sent: 0\n"
    "Connections: 1\n"
    "Outstanding: 0\n"
    "Zxid: 0x0\n"
    "Mode: standalone\n"
    "Node count: 5\n"
)
# Older servers (3.4) still in the field: no "built on" suffix change, observer mode.
SRVR_OBSERVER_34 = (
    "Zookeeper version: 3.4.14-4c25d480e66aadd371de8bd2fd8da255ac140bcf, built on 03/06/2019 16:18 GMT\n"
    "Latency min/avg/max: 1/12/230\n"
    "Received: 1000000\n"
    "Sent: 999999\n"
    "Connections: 42\n"
    "Outstanding: 3\n"
    "Zxid: 0x500000003\n"
    "Mode: observer\n"
    "Node count: 1234\n"
)
NOT_WHITELISTED = "mntr is not executed because it is not in the whitelist.\n"
NOT_SERVING = "This ZooKeeper instance is not currently serving requests\n"

MNTR_LEADER = (
    "zk_version\t3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\n"
    "zk_server_state\tleader\n"
    "zk_peer_state\tleading - broadcast\n"
    "zk_ephemerals_count\t1\n"
    "zk_num_alive_connections\t1\n"
    "zk_avg_latency\t0.0\n"
    "zk_min_proposal_size\t36\n"
    "zk_outstanding_requests\t0\n"
    "zk_znode_count\t27\n"
    "zk_global_sessions\t1\n"
    "zk_non_mtls_remote_conn_count\t0\n"
    "zk_last_client_response_size\t-1\n"
    "zk_packets_sent\t3\n"
    "zk_packets_received\t4\n"
    "zk_max_proposal_size\t201\n"
    "zk_max_client_response_size\t-1\n"
    "zk_synced_followers\t2\n"
    "zk_connection_drop_probability\t0.0\n"
    "zk_watch_count\t0\n"
    "zk_synced_non_voting_followers\t0\n"
    "zk_synced_observers\t0\n"
    "zk_auth_failed_count\t0\n"
    "zk_min_latency\t0\n"
    "zk_max_file_descriptor_count\t20000\n"
    "zk_approximate_data_size\t2524\n"
    "zk_open_file_descriptor_count\t47\n"
    "zk_last_proposal_size\t88\n"
    "zk_pending_syncs\t0\n"
    "zk_leader_uptime\t218\n"
    "zk_local_sessions\t0\n"
    "zk_uptime\t283\n"
    "zk_max_latency\t0\n"
    "zk_outstanding_tls_handshake\t0\n"
    "zk_learners\t2\n"
    "zk_min_client_response_size\t-1\n"
    "zk_non_mtls_local_conn_count\t0\n"
    "zk_quorum_size\t3\n"
    "zk_proposal_count\t24\n"
    "zk_watch_bytes\t0\n"
    "zk_outstanding_changes_removed\t44\n"
    "zk_avg_fsynctime\t0.0\n"
    "zk_avg_election_time\t370.0\n"
    "zk_cnt_election_time\t1\n"
    "zk_avg_readlatency\t0.0\n"
    "zk_p99_readlatency\t0\n"
    "zk_avg_1_learner_handler_qp_size\t0.0566\n"
    "zk_min_1_learner_handler_qp_size\t0\n"
    "zk_max_1_learner_handler_qp_size\t2\n"
    "zk_cnt_1_learner_handler_qp_size\t53\n"
    "zk_sum_1_learner_handler_qp_size\t3\n"
)

MNTR_FOLLOWER = (
    "zk_version\t3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\n"
    "zk_server_state\tfollower\n"
    "zk_peer_state\tfollowing - broadcast\n"
    "zk_ephemerals_count\t1\n"
    "zk_num_alive_connections\t2\n"
    "zk_avg_latency\t1.6739\n"
    "zk_outstanding_requests\t0\n"
    "zk_znode_count\t27\n"
    "zk_global_sessions\t1\n"
    "zk_non_mtls_remote_conn_count\t0\n"
    "zk_last_client_response_size\t24\n"
    "zk_packets_sent\t49\n"
    "zk_packets_received\t50\n"
    "zk_max_client_response_size\t188\n"
    "zk_connection_drop_probability\t0.0\n"
    "zk_watch_count\t0\n"
    "zk_auth_failed_count\t0\n"
    "zk_min_latency\t0\n"
    "zk_max_file_descriptor_count\t20000\n"
    "zk_approximate_data_size\t2524\n"
    "zk_open_file_descriptor_count\t46\n"
    "zk_local_sessions\t0\n"
    "zk_uptime\t295\n"
    "zk_max_latency\t9\n"
    "zk_outstanding_tls_handshake\t0\n"
    "zk_min_client_response_size\t16\n"
    "zk_non_mtls_local_conn_count\t0\n"
    "zk_quorum_size\t3\n"
    "zk_proposal_count\t0\n"
    "zk_watch_bytes\t0\n"
    "zk_avg_election_time\t335.0\n"
    "zk_max_election_time\t335\n"
    "zk_avg_readlatency\t0.3636\n"
    "zk_p99_readlatency\t1\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            SRVR_LEADER,
            {
                "version": "3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC",
                "latency_min": 0.0,
                "latency_avg": 0.0,
                "latency_max": 0.0,
                "received": 3,
                "sent": 2,
                "connections": 1,
                "outstanding": 0,
                "zxid": 0x100000018,
                "mode": "leader",
                "node_count": 27,
            },
        ),
        (
            SRVR_FOLLOWER,
            {
                "version": "3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC",
                "latency_min": 0.0,
                "latency_avg": 1.6739,
                "latency_max": 9.0,
                "received": 49,
                "sent": 48,
                "connections": 2,
                "outstanding": 0,
                "zxid": 0x100000018,
                "mode": "follower",
                "node_count": 27,
            },
        ),
        (
            SRVR_STANDALONE,
            {
                "version": "3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC",
                "latency_min": 0.0,
                "latency_avg": 0.0,
                "latency_max": 0.0,
                "received": 1,
                "sent": 0,
                "connections": 1,
                "outstanding": 0,
                "zxid": 0,
                "mode": "standalone",
                "node_count": 5,
            },
        ),
        (
            SRVR_OBSERVER_34,
            {
                "version": "3.4.14-4c25d480e66aadd371de8bd2fd8da255ac140bcf, built on 03/06/2019 16:18 GMT",
                "latency_min": 1.0,
                "latency_avg": 12.0,
                "latency_max": 230.0,
                "received": 1000000,
                "sent": 999999,
                "connections": 42,
                "outstanding": 3,
                "zxid": 0x500000003,
                "mode": "observer",
                "node_count": 1234,
            },
        ),
    ],
    ids=["leader", "follower", "standalone", "observer-3.4"],
)
def test_parse_srvr(text: str, expected: dict[str, object]) -> None:
    parsed = parse_srvr(text)
    assert dict(parsed) == expected
    for key in ("latency_min", "latency_avg", "latency_max"):
        assert isinstance(parsed[key], float)  # type: ignore[literal-required]


def test_parse_srvr_tolerates_crlf_and_unknown_lines() -> None:
    text = SRVR_FOLLOWER.replace("\n", "\r\n") + "Some future line: 1/2/3\r\n"
    assert parse_srvr(text)["mode"] == "follower"


@pytest.mark.parametrize(
    "text",
    [
        "",
        NOT_SERVING,
        NOT_WHITELISTED,
        SRVR_FOLLOWER.replace("Zxid: 0x100000018\n", ""),
        SRVR_FOLLOWER.replace("Mode: follower\n", ""),
        SRVR_FOLLOWER.replace("0x100000018", "0xnothex"),
        SRVR_FOLLOWER.replace("0/1.6739/9", "0/1.6739"),
    ],
    ids=["empty", "not-serving", "not-whitelisted", "no-zxid", "no-mode", "bad-zxid", "bad-latency"],
)
def test_parse_srvr_rejects_incomplete_answers(text: str) -> None:
    with pytest.raises(ValueError, match="srvr"):
        parse_srvr(text)


@pytest.mark.parametrize(
    ("text", "key", "value", "kind"),
    [
        (MNTR_LEADER, "zk_version", "3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC", str),
        (MNTR_LEADER, "zk_server_state", "leader", str),
        (MNTR_LEADER, "zk_peer_state", "leading - broadcast", str),
        (MNTR_LEADER, "zk_learners", 2, int),
        (MNTR_LEADER, "zk_synced_followers", 2, int),
        (MNTR_LEADER, "zk_pending_syncs", 0, int),
        (MNTR_LEADER, "zk_avg_latency", 0.0, float),
        (MNTR_LEADER, "zk_last_client_response_size", -1, int),
        (MNTR_LEADER, "zk_avg_election_time", 370.0, float),
        (MNTR_LEADER, "zk_avg_1_learner_handler_qp_size", 0.0566, float),
        (MNTR_LEADER, "zk_max_file_descriptor_count", 20000, int),
        (MNTR_FOLLOWER, "zk_server_state", "follower", str),
        (MNTR_FOLLOWER, "zk_avg_latency", 1.6739, float),
        (MNTR_FOLLOWER, "zk_max_latency", 9, int),
        (MNTR_FOLLOWER, "zk_connection_drop_probability", 0.0, float),
        (MNTR_FOLLOWER, "zk_avg_readlatency", 0.3636, float),
    ],
)
def test_parse_mntr_values(text: str, key: str, value: object, kind: type) -> None:
    parsed = parse_mntr(text)
    assert parsed[key] == value
    assert type(parsed[key]) is kind


def test_parse_mntr_keeps_every_line_and_leader_only_keys() -> None:
    leader, follower = parse_mntr(MNTR_LEADER), parse_mntr(MNTR_FOLLOWER)
    assert len(leader) == MNTR_LEADER.count("\n")
    assert len(follower) == MNTR_FOLLOWER.count("\n")
    assert {"zk_learners", "zk_synced_followers", "zk_pending_syncs"} <= leader.keys()
    assert "zk_learners" not in follower


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("NaN", "NaN"), ("inf", "inf"), ("1_000", "1_000"), ("", ""), ("1e3", 1000.0), ("-7", -7), (".5", 0.5)],
)
def test_parse_mntr_only_converts_plain_numbers(raw: str, expected: object) -> None:
    assert parse_mntr(f"zk_x\t{raw}\n")["zk_x"] == expected


@pytest.mark.parametrize("text", ["", NOT_SERVING, NOT_WHITELISTED])
def test_parse_mntr_rejects_answers_without_pairs(text: str) -> None:
    with pytest.raises(ValueError, match="mntr"):
        parse_mntr(text)


@pytest.mark.parametrize(
    ("zxid", "expected"),
    [
        (0x500000003, (5, 3)),
        (0x0, (0, 0)),
        (0x100000000, (1, 0)),
        (0x100000018, (1, 0x18)),
        (0xFFFFFFFF, (0, 0xFFFFFFFF)),
        (0xFFFFFFFFFFFFFFFF, (0xFFFFFFFF, 0xFFFFFFFF)),
    ],
)
def test_split_zxid(zxid: int, expected: tuple[int, int]) -> None:
    assert split_zxid(zxid) == expected


@pytest.mark.parametrize("zxid", [-1, 1 << 64])
def test_split_zxid_rejects_out_of_range(zxid: int) -> None:
    with pytest.raises(ValueError):
        split_zxid(zxid)


# --------------------------------------------------------------- send_four_letter over loopback


@pytest.fixture
def fake_server() -> Iterator[Callable[[Callable[[socket.socket], None]], int]]:
    """A one-shot TCP server on loopback whose per-connection behaviour the test supplies."""
    listeners: list[socket.socket] = []
    threads: list[threading.Thread] = []
    stop = threading.Event()

    def serve(handler: Callable[[socket.socket], None]) -> int:
        listener = socket.create_server(("127.0.0.1", 0))
        listeners.append(listener)

        def run() -> None:
            conn, _ = listener.accept()
            with conn:
                handler(conn)
                stop.wait(5)  # keep a silent connection open until the test is done

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        return listener.getsockname()[1]

    yield serve
    stop.set()
    for listener in listeners:
        listener.close()
    for thread in threads:
        thread.join(timeout=5)


def _answer(text: str, received: list[bytes] | None = None) -> Callable[[socket.socket], None]:
    def handler(conn: socket.socket) -> None:
        data = conn.recv(4)
        if received is not None:
            received.append(data)
        conn.sendall(text.encode())
        conn.shutdown(socket.SHUT_WR)

    return handler


def test_send_returns_full_answer_and_sends_the_command(fake_server) -> None:
    received: list[bytes] = []
    port = fake_server(_answer(SRVR_LEADER, received))
    assert send_four_letter("127.0.0.1", port, "srvr") == SRVR_LEADER
    assert received == [b"srvr"]


@pytest.mark.parametrize(
    ("answer", "error", "kind"),
    [
        (NOT_WHITELISTED, FourLetterNotWhitelisted, "not_whitelisted"),
        (NOT_SERVING, FourLetterNotServing, "not_serving"),
    ],
)
def test_send_maps_refusal_answers_to_errors(fake_server, answer: str, error: type, kind: str) -> None:
    port = fake_server(_answer(answer))
    with pytest.raises(error) as info:
        send_four_letter("127.0.0.1", port, "mntr")
    assert isinstance(info.value, FourLetterError)
    assert info.value.kind == kind
    assert info.value.response == answer
    assert (info.value.host, info.value.port, info.value.command) == ("127.0.0.1", port, "mntr")


def test_send_answered_by_a_bare_close_is_not_serving(fake_server) -> None:
    """A server changing roles accepts the connection and closes it without a word."""
    port = fake_server(_answer(""))
    with pytest.raises(FourLetterNotServing) as info:
        send_four_letter("127.0.0.1", port, "srvr")
    assert info.value.kind == "not_serving" and "without an answer" in str(info.value)


def test_send_to_closed_port_is_unreachable() -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    with pytest.raises(FourLetterUnreachable) as info:
        send_four_letter("127.0.0.1", port, "ruok", timeout=2.0)
    assert info.value.kind == "unreachable"


def test_silent_server_times_out_within_the_deadline(fake_server) -> None:
    port = fake_server(lambda conn: None)  # accepts, never answers: what a SIGSTOPped JVM looks like
    start = time.monotonic()
    with pytest.raises(FourLetterTimeout) as info:
        send_four_letter("127.0.0.1", port, "srvr", timeout=0.5)
    # it waited for its deadline, and a generous hang guard shows it did not wait for the peer
    assert 0.45 <= time.monotonic() - start < 5
    assert info.value.kind == "timeout"


def test_trickling_server_cannot_extend_the_deadline(fake_server) -> None:
    def trickle(conn: socket.socket) -> None:
        conn.recv(4)
        with contextlib.suppress(OSError):  # the client hangs up at its deadline
            for ch in SRVR_LEADER:
                conn.sendall(ch.encode())
                time.sleep(0.05)

    port = fake_server(trickle)
    start = time.monotonic()
    with pytest.raises(FourLetterTimeout):
        send_four_letter("127.0.0.1", port, "srvr", timeout=0.5)
    assert time.monotonic() - start < 5  # the trickle alone would take ~12 s: a hang guard, not a speed claim


@pytest.mark.parametrize("command", ["SRVR", "srv", "srvrr", "sr1r", ""])
def test_send_rejects_malformed_commands(command: str) -> None:
    with pytest.raises(ValueError):
        send_four_letter("127.0.0.1", 1, command)

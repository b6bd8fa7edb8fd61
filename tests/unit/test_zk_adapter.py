"""collectors.sources.zk_adapter and its pure halves: connect strings (endpoints), znode decoding (zk_znodes),
4lw → records and follower lag (zk_servers), and the adapter's session handling against a fake kazoo.

The srvr/mntr texts are the shapes captured from the sandbox's real 3.8
ensemble (see tests/unit/test_zk_fourletter.py); the znode payloads are the
ones Kafka 3.x writes (sandbox/znodes.py).
"""

from __future__ import annotations

import errno
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, NoNodeError, SessionExpiredError
from kazoo.handlers.threading import SequentialThreadingHandler

from collectors.model.records import ZkServerRecord
from collectors.sources.endpoints import DEFAULT_ZK_PORT, format_server, join_connect_string, split_connect_string
from collectors.sources.zk_adapter import ZkAdapter
from collectors.sources.zk_fourletter import (
    FourLetterError,
    FourLetterNotServing,
    FourLetterNotWhitelisted,
    FourLetterTimeout,
    FourLetterUnreachable,
    parse_mntr,
    parse_srvr,
)
from collectors.sources.zk_servers import (
    describe_failure,
    finalize_servers,
    follower_lags,
    server_answered,
    server_record,
)
from collectors.sources.zk_znodes import (
    MAX_ZNODE_ERRORS,
    parse_broker_ids,
    parse_controller,
    parse_controller_epoch,
    parse_partition_state,
)

# ----------------------------------------------------------------------------- connect strings


@pytest.mark.parametrize(("connect", "servers", "chroot"), [
    ("zk1:2181", [("zk1", 2181)], None),
    ("zk1", [("zk1", DEFAULT_ZK_PORT)], None),
    ("zk1:2181,zk2:2182,zk3:2183", [("zk1", 2181), ("zk2", 2182), ("zk3", 2183)], None),
    (" zk1:2181 , zk2:2181 ", [("zk1", 2181), ("zk2", 2181)], None),
    ("zk1:2181,zk2:2181/kafka", [("zk1", 2181), ("zk2", 2181)], "/kafka"),
    ("zk1:2181/kafka/prod", [("zk1", 2181)], "/kafka/prod"),
    ("zk1:2181/kafka/", [("zk1", 2181)], "/kafka"),
    ("zk1:2181/", [("zk1", 2181)], None),
    ("[::1]:2181", [("::1", 2181)], None),
    ("[::1]", [("::1", DEFAULT_ZK_PORT)], None),
    ("[fe80::1]:2181,[fe80::2]:2182/kafka", [("fe80::1", 2181), ("fe80::2", 2182)], "/kafka"),
    ("127.0.0.1:2181,[::1]:2182", [("127.0.0.1", 2181), ("::1", 2182)], None),
    ("zk1:2181,zk1:2181", [("zk1", 2181)], None),
    ("zk1:2181,,zk2:2181", [("zk1", 2181), ("zk2", 2181)], None),
])
def test_split_connect_string(connect: str, servers: list[tuple[str, int]], chroot: str | None) -> None:
    assert split_connect_string(connect) == (servers, chroot)


@pytest.mark.parametrize("connect", [
    "", "   ", "/kafka", ",", "zk1:notaport", "zk1:0", "zk1:65536", "zk1:-1", ":2181",
    "::1:2181", "[::1:2181", "[::1]x2181", "zk1:2181//kafka",
])
def test_split_connect_string_rejects(connect: str) -> None:
    with pytest.raises(ValueError):
        split_connect_string(connect)


@pytest.mark.parametrize(("connect", "joined"), [
    ("zk1,zk2:2182/kafka/", "zk1:2181,zk2:2182/kafka"),
    ("[::1]:2181", "[::1]:2181"),
    ("a:1,[::2]:3/c", "a:1,[::2]:3/c"),
])
def test_join_connect_string_round_trips(connect: str, joined: str) -> None:
    servers, chroot = split_connect_string(connect)
    assert join_connect_string(servers, chroot) == joined
    assert split_connect_string(joined) == (servers, chroot)


def test_format_server_brackets_ipv6_only() -> None:
    assert format_server("zk1", 2181) == "zk1:2181"
    assert format_server("::1", 2181) == "[::1]:2181"


@pytest.mark.parametrize(("settings", "hosts"), [
    ({}, "zk1:2181,zk2:2181/kafka"),
    ({"hosts": "other:2181"}, "other:2181/kafka"),  # the chroot cannot get lost in the config layer
    ({"hosts": "other:2181/elsewhere"}, "other:2181/elsewhere"),
])
def test_kazoo_hosts_keep_the_chroot(settings: dict[str, Any], hosts: str) -> None:
    adapter = ZkAdapter("c", "zk1:2181,zk2:2181/kafka", settings)
    try:
        assert adapter._kazoo_hosts() == hosts
    finally:
        adapter.close()


def test_adapter_validates_its_arguments() -> None:
    with pytest.raises(ValueError):
        ZkAdapter("c", "")
    with pytest.raises(ValueError):
        ZkAdapter("c", "zk1:2181", timeout_s=0)


# ----------------------------------------------------------------------------- znode payloads

KAFKA_STATE = b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":7,"isr":[2,3,1],"leader_recovery_state":0}'


@pytest.mark.parametrize(("data", "expected"), [
    (KAFKA_STATE, {"leader": 2, "leader_epoch": 7, "isr": [2, 3, 1], "controller_epoch": 3}),
    (b'{"controller_epoch":1,"leader":-1,"version":1,"leader_epoch":4,"isr":[2]}',
     {"leader": -1, "leader_epoch": 4, "isr": [2], "controller_epoch": 1}),
    (b'{"controller_epoch":1,"leader":1,"leader_epoch":0,"isr":[]}',
     {"leader": 1, "leader_epoch": 0, "isr": [], "controller_epoch": 1}),
    (b"", None),
    (None, None),
    (b"not json", None),
    (b'{"leader":2,', None),
    (b"\xff\xfe", None),
    (b"[1,2,3]", None),
    (b"42", None),
    (b'{"leader":2,"leader_epoch":7,"isr":[2]}', None),  # no controller_epoch
    (b'{"controller_epoch":1,"leader_epoch":7,"isr":[2]}', None),  # no leader
    (b'{"controller_epoch":1,"leader":2,"isr":[2]}', None),  # no leader_epoch
    (b'{"controller_epoch":1,"leader":2,"leader_epoch":7}', None),  # no isr
    (b'{"controller_epoch":1,"leader":"2","leader_epoch":7,"isr":[2]}', None),
    (b'{"controller_epoch":1,"leader":2,"leader_epoch":7,"isr":"2,3"}', None),
    (b'{"controller_epoch":1,"leader":2,"leader_epoch":7,"isr":[2,"3"]}', None),
    (b'{"controller_epoch":1,"leader":true,"leader_epoch":7,"isr":[2]}', None),
    (b'{"controller_epoch":1,"leader":2,"leader_epoch":7,"isr":[true]}', None),
    (b'{"controller_epoch":1,"leader":2.0,"leader_epoch":7,"isr":[2]}', None),
])
def test_parse_partition_state(data: bytes | None, expected: dict[str, Any] | None) -> None:
    assert parse_partition_state(data) == expected


@pytest.mark.parametrize(("data", "expected"), [
    (b'{"version":2,"brokerid":1,"timestamp":"1700000000000"}', 1),
    (b'{"version":1,"brokerid":0,"timestamp":"1"}', 0),
    (b'{"version":2,"brokerid":-1}', None),
    (b'{"version":2,"brokerid":"1"}', None),
    (b'{"version":2,"brokerid":true}', None),
    (b'{"version":2}', None),
    (b"1", None),
    (b"{broken", None),
    (b"", None),
    (None, None),
])
def test_parse_controller(data: bytes | None, expected: int | None) -> None:
    assert parse_controller(data) == expected


@pytest.mark.parametrize(("data", "expected"), [
    (b"1", 1), (b"17\n", 17), (b" 3 ", 3), (b"-1", None), (b"x", None), (b"", None), (None, None),
    (b"\xff", None), (b"1.5", None),
])
def test_parse_controller_epoch(data: bytes | None, expected: int | None) -> None:
    assert parse_controller_epoch(data) == expected


def test_parse_broker_ids() -> None:
    assert parse_broker_ids(["1", "2", "10"]) == ({1, 2, 10}, [])
    assert parse_broker_ids([]) == (set(), [])
    assert parse_broker_ids(["1", "lock", "-3"]) == ({1}, ["lock", "-3"])


# ----------------------------------------------------------------------------- 4lw outcomes → records


def srvr_text(zxid: int, mode: str, *, connections: int = 1, nodes: int = 27) -> str:
    return (
        "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\n"
        "Latency min/avg/max: 0/1.5/9\n"
        "Received: 49\nSent: 48\n"
        f"Connections: {connections}\nOutstanding: 2\nZxid: {zxid:#x}\nMode: {mode}\nNode count: {nodes}\n"
    )


MNTR_LEADER = (
    "zk_version\t3.8.0\nzk_server_state\tleader\nzk_avg_latency\t0.5\nzk_max_latency\t12\n"
    "zk_outstanding_requests\t0\nzk_num_alive_connections\t4\nzk_znode_count\t30\n"
    "zk_learners\t2\nzk_synced_followers\t2\n"
)
MNTR_FOLLOWER = (
    "zk_version\t3.8.0\nzk_server_state\tfollower\nzk_avg_latency\t0.25\nzk_max_latency\t3\n"
    "zk_outstanding_requests\t1\nzk_num_alive_connections\t2\nzk_znode_count\t30\n"
)
MNTR_OLD_LEADER = "zk_server_state\tleader\nzk_followers\t4\nzk_synced_followers\t3\n"  # 3.4/3.5 naming


def err(kind: type[FourLetterError], command: str = "srvr", cause: BaseException | None = None) -> FourLetterError:
    e = kind(f"{command} failed", host="h", port=1, command=command)
    e.__cause__ = cause
    return e


@pytest.mark.parametrize(("command", "exc", "reason"), [
    ("srvr", err(FourLetterTimeout), "timeout"),
    ("srvr", err(FourLetterNotServing), "not serving"),
    ("mntr", err(FourLetterNotWhitelisted, "mntr"), "4lw not whitelisted: mntr"),
    ("srvr", err(FourLetterUnreachable, cause=ConnectionRefusedError(errno.ECONNREFUSED, "refused")), "refused"),
    ("srvr", err(FourLetterUnreachable, cause=OSError(errno.EHOSTUNREACH, "no route")), "unreachable"),
    ("srvr", err(FourLetterError), "i/o error"),
    ("mntr", ValueError("mntr: no key/value lines"), "unparseable mntr answer"),
    ("srvr", RuntimeError("bug"), "srvr failed: RuntimeError"),
])
def test_describe_failure(command: str, exc: BaseException, reason: str) -> None:
    assert describe_failure(command, exc) == reason


def test_serving_leader_with_mntr() -> None:
    rec = server_record("c", "h:1", parse_srvr(srvr_text(0x300000018, "leader")), parse_mntr(MNTR_LEADER))
    assert rec == ZkServerRecord(
        cluster="c", server="h:1", serving=True, mode="leader", zxid=0x300000018, zxid_epoch=3, zxid_counter=0x18,
        latency_avg_ms=1.5, latency_max_ms=9.0, outstanding_requests=2, connections=1, znode_count=27,
        learners=2, synced_followers=2, error=None)


def test_old_mntr_names_for_learners() -> None:
    rec = server_record("c", "h:1", parse_srvr(srvr_text(5, "leader")), parse_mntr(MNTR_OLD_LEADER))
    assert (rec.learners, rec.synced_followers) == (4, 3)


def test_mntr_not_whitelisted_still_serving_with_srvr_fields() -> None:
    """ZooKeeper's default whitelist is srvr alone: the common production case."""
    rec = server_record("c", "h:1", parse_srvr(srvr_text(0x100000005, "follower")),
                        err(FourLetterNotWhitelisted, "mntr"))
    assert rec.serving and rec.mode == "follower" and (rec.zxid_epoch, rec.zxid_counter) == (1, 5)
    assert rec.znode_count == 27 and rec.connections == 1 and rec.latency_avg_ms == 1.5
    assert rec.learners is None and rec.synced_followers is None
    assert rec.error == "4lw not whitelisted: mntr"
    assert server_answered(rec)


def test_mntr_timeout_is_noted_on_a_serving_server() -> None:
    rec = server_record("c", "h:1", parse_srvr(srvr_text(1, "follower")), err(FourLetterTimeout, "mntr"))
    assert rec.serving and rec.error == "mntr timeout"


def test_srvr_not_whitelisted_falls_back_to_mntr() -> None:
    rec = server_record("c", "h:1", err(FourLetterNotWhitelisted), parse_mntr(MNTR_FOLLOWER))
    assert rec.serving and rec.mode == "follower"
    assert rec.zxid is None and rec.zxid_epoch is None  # mntr carries no zxid
    assert (rec.latency_avg_ms, rec.latency_max_ms, rec.outstanding_requests, rec.connections,
            rec.znode_count) == (0.25, 3.0, 1, 2, 30)
    assert rec.error == "4lw not whitelisted: srvr"


@pytest.mark.parametrize(("srvr", "mntr", "error", "answered"), [
    (err(FourLetterTimeout), err(FourLetterTimeout, "mntr"), "timeout", False),
    # srvr is the verdict: a paused server does not serve because mntr squeezed in an answer.
    (err(FourLetterTimeout), parse_mntr(MNTR_FOLLOWER), "timeout", False),
    (err(FourLetterNotServing), err(FourLetterNotServing, "mntr"), "not serving", True),
    (err(FourLetterUnreachable, cause=ConnectionRefusedError()), err(FourLetterUnreachable, "mntr"), "refused",
     False),
    (err(FourLetterNotWhitelisted), err(FourLetterNotWhitelisted, "mntr"), "4lw not whitelisted: srvr, mntr",
     False),
    (err(FourLetterNotWhitelisted), err(FourLetterNotServing, "mntr"), "not serving", True),
    (err(FourLetterNotWhitelisted), err(FourLetterTimeout, "mntr"), "timeout", False),
    (ValueError("srvr: answer lacks zxid"), err(FourLetterNotWhitelisted, "mntr"), "unparseable srvr answer", False),
    (err(FourLetterError), err(FourLetterError, "mntr"), "i/o error", False),
])
def test_not_serving(srvr: Any, mntr: Any, error: str, answered: bool) -> None:
    rec = server_record("c", "h:1", srvr, mntr)
    assert not rec.serving and rec.mode is None and rec.zxid is None
    assert rec.error == error
    assert server_answered(rec) is answered


# ----------------------------------------------------------------------------- follower lag


def zk(server: str, mode: str | None, zxid: int | None, serving: bool = True) -> ZkServerRecord:
    epoch, counter = (zxid >> 32, zxid & 0xFFFFFFFF) if zxid is not None else (None, None)
    return ZkServerRecord(cluster="c", server=server, serving=serving, mode=mode, zxid=zxid,
                          zxid_epoch=epoch, zxid_counter=counter)


E2 = 2 << 32  # first zxid of epoch 2


@pytest.mark.parametrize(("servers", "lags"), [
    # healthy: one behind by 3, one caught up
    ([zk("a", "leader", E2 + 10), zk("b", "follower", E2 + 7), zk("c", "follower", E2 + 10)],
     {"a": None, "b": 3, "c": 0}),
    # answers are concurrent: a follower caught "ahead" of the leader's answer is not behind
    ([zk("a", "leader", E2 + 10), zk("b", "follower", E2 + 12)], {"a": None, "b": 0}),
    # right after an election followers say Zxid: 0x0 until the first write: unknown, not 8 billion behind
    ([zk("a", "leader", E2 + 1), zk("b", "follower", 0), zk("c", "follower", E2 + 1)],
     {"a": None, "b": None, "c": 0}),
    # a follower still at the previous epoch's last zxid: counters of different epochs do not compare
    ([zk("a", "leader", E2), zk("b", "follower", (1 << 32) + 99)], {"a": None, "b": None}),
    # two leaders (split brain or a stale answer): both stay leaders, every lag unknown
    ([zk("a", "leader", E2 + 5), zk("b", "leader", (3 << 32) + 1), zk("c", "follower", E2 + 4)],
     {"a": None, "b": None, "c": None}),
    # no leader (election in progress)
    ([zk("a", None, None, serving=False), zk("b", "follower", E2 + 4)], {"a": None, "b": None}),
    # a leader that does not serve does not count
    ([zk("a", "leader", E2 + 9, serving=False), zk("b", "follower", E2 + 4)], {"a": None, "b": None}),
    # leader answered without a zxid (srvr refused, mntr used)
    ([zk("a", "leader", None), zk("b", "follower", E2 + 4)], {"a": None, "b": None}),
    # observers lag like followers; a down follower has no lag
    ([zk("a", "leader", E2 + 9), zk("o", "observer", E2 + 1), zk("d", None, None, serving=False)],
     {"a": None, "o": 8, "d": None}),
    # standalone: nobody to lag behind
    ([zk("s", "standalone", E2 + 9)], {"s": None}),
    ([], {}),
])
def test_follower_lags(servers: list[ZkServerRecord], lags: dict[str, int | None]) -> None:
    assert follower_lags(servers) == lags
    finalized = finalize_servers(servers)
    assert {s.server: s.lag_behind_leader for s in finalized} == lags
    assert [s.mode for s in finalized] == [s.mode for s in servers]  # two leaders stay two leaders


def test_finalize_servers_does_not_mutate_its_input() -> None:
    servers = [zk("a", "leader", E2 + 10), zk("b", "follower", E2 + 7)]
    out = finalize_servers(servers)
    assert servers[1].lag_behind_leader is None and out[1].lag_behind_leader == 3
    assert out[1] is not servers[1]


# ----------------------------------------------------------------------------- znode reads, against a fake kazoo
# The read logic (pipelining, deadline, error lines, when to drop the session) runs here on a tree of
# znodes in memory; the integration tests run the same code against a real ensemble.


class FakeKazoo:
    """Just what ZkAdapter uses of KazooClient, answering from a dict of path -> data."""

    def __init__(self, tree: dict[str, bytes], hang: frozenset[str] = frozenset(),
                 fail: dict[str, Exception] | None = None) -> None:
        self.tree = tree
        self.hang = hang
        self.fail = fail or {}
        self.handler = SequentialThreadingHandler()
        self.connected = True
        self.state = "CONNECTED"
        self.requests = 0
        self.stopped = threading.Event()
        self._live = threading.Event()

    def start_async(self) -> threading.Event:
        self._live.set()
        return self._live

    def stop(self) -> None:
        self.stopped.set()

    def close(self) -> None:
        pass

    def _answer(self, path: str, value: Callable[[], Any]) -> Any:
        self.requests += 1
        result = self.handler.async_result()
        if path in self.hang:
            return result
        if path in self.fail:
            result.set_exception(self.fail[path])
        elif path not in self.tree:
            result.set_exception(NoNodeError())
        else:
            result.set(value())
        return result

    def get_async(self, path: str) -> Any:
        return self._answer(path, lambda: (self.tree[path], None))

    def get_children_async(self, path: str) -> Any:
        prefix = path + "/"
        return self._answer(path, lambda: sorted({p[len(prefix):].split("/")[0]
                                                  for p in self.tree if p.startswith(prefix)}))


def kafka_tree(partitions: dict[str, int], brokers: tuple[int, ...] = (1, 2, 3)) -> dict[str, bytes]:
    tree = {"/brokers/ids": b"", "/brokers/topics": b"", "/controller_epoch": b"5",
            "/controller": b'{"version":2,"brokerid":2,"timestamp":"1700000000000"}'}
    for b in brokers:
        tree[f"/brokers/ids/{b}"] = b"{}"
    for topic, count in partitions.items():
        tree[f"/brokers/topics/{topic}"] = b"{}"
        tree[f"/brokers/topics/{topic}/partitions"] = b""
        for p in range(count):
            tree[f"/brokers/topics/{topic}/partitions/{p}"] = b""
            tree[f"/brokers/topics/{topic}/partitions/{p}/state"] = json.dumps(
                {"controller_epoch": 5, "leader": 1 + p % 3, "version": 1, "leader_epoch": p, "isr": [1, 2, 3],
                 "leader_recovery_state": 0}).encode()
    return tree


@pytest.fixture
def fake_adapter(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[FakeKazoo], ZkAdapter]]:
    adapters: list[ZkAdapter] = []

    def make(client: FakeKazoo, timeout_s: float = 1.0) -> ZkAdapter:
        adapter = ZkAdapter("c", "zk1:2181", four_letter_words=False, timeout_s=timeout_s)
        monkeypatch.setattr(adapter, "_new_client", lambda: client)
        adapters.append(adapter)
        return adapter

    yield make
    for a in adapters:
        a.close()


def test_reads_kafka_znodes(fake_adapter: Callable[..., ZkAdapter]) -> None:
    adapter = fake_adapter(FakeKazoo(kafka_tree({"orders": 3, "logs": 2})))
    obs = adapter.observe()
    assert obs.servers == [] and obs.errors == [] and obs.stale_sections == set()
    assert obs.broker_ids == {1, 2, 3} and obs.controller_id == 2 and obs.controller_epoch == 5
    assert sorted(obs.partition_states) == [("logs", 0), ("logs", 1), ("orders", 0), ("orders", 1), ("orders", 2)]
    assert obs.partition_states[("orders", 2)] == {"leader": 3, "leader_epoch": 2, "isr": [1, 2, 3],
                                                   "controller_epoch": 5}


def test_session_is_kept_across_polls(fake_adapter: Callable[..., ZkAdapter]) -> None:
    client = FakeKazoo(kafka_tree({"t": 1}))
    adapter = fake_adapter(client)
    adapter.observe()
    adapter.observe()
    assert adapter._client is client and not client.stopped.is_set()


def test_many_partitions_flow_through_the_window(fake_adapter: Callable[..., ZkAdapter]) -> None:
    client = FakeKazoo(kafka_tree({f"t{i}": 500 for i in range(10)}))
    obs = fake_adapter(client).observe()
    assert len(obs.partition_states) == 5000 and obs.errors == []
    assert client.requests == 4 + 10 + 5000  # ids, controller, epoch, topics; one per topic; one per partition


def test_malformed_and_missing_znodes_are_skipped_with_error_lines(fake_adapter: Callable[..., ZkAdapter]) -> None:
    tree = kafka_tree({"good": 2, "bad": 4})
    tree["/brokers/topics/bad/partitions/0/state"] = b'{"leader": 1,'
    tree["/brokers/topics/bad/partitions/1/state"] = b'{"leader": 1, "isr": [1]}'
    del tree["/brokers/topics/bad/partitions/2/state"]
    tree["/brokers/topics/bad/partitions/x"] = b""
    tree["/brokers/topics/empty"] = b"{}"  # a topic without its partitions znode
    tree["/brokers/ids/lock"] = b""
    tree["/controller"] = b"garbage"
    obs = fake_adapter(FakeKazoo(tree)).observe()
    assert set(obs.partition_states) == {("good", 0), ("good", 1), ("bad", 3)}
    assert obs.broker_ids == {1, 2, 3} and obs.controller_id is None and obs.controller_epoch == 5
    assert obs.stale_sections == set()
    assert sorted(obs.errors) == sorted([
        "znodes: /brokers/ids/lock is not a broker id",
        "znodes: malformed /controller: b'garbage'",
        "znodes: topic empty has no partitions znode; skipped",
        "znodes: /brokers/topics/bad/partitions/x is not a partition",
        "znodes: malformed /brokers/topics/bad/partitions/0/state: b'{\"leader\": 1,'",
        "znodes: malformed /brokers/topics/bad/partitions/1/state: b'{\"leader\": 1, \"isr\": [1]}'",
        "znodes: /brokers/topics/bad/partitions/2/state is missing (deleted while reading?)",
    ])


def test_error_lines_are_capped(fake_adapter: Callable[..., ZkAdapter]) -> None:
    tree = kafka_tree({"t": 50})
    for p in range(50):
        tree[f"/brokers/topics/t/partitions/{p}/state"] = b"{}"
    obs = fake_adapter(FakeKazoo(tree)).observe()
    assert obs.partition_states == {}
    assert len(obs.errors) == MAX_ZNODE_ERRORS + 1 and obs.errors[-1] == "znodes: 30 more znode problems not listed"


def test_no_controller_is_not_an_error(fake_adapter: Callable[..., ZkAdapter]) -> None:
    tree = kafka_tree({"t": 1})
    del tree["/controller"], tree["/controller_epoch"]
    obs = fake_adapter(FakeKazoo(tree)).observe()
    assert obs.controller_id is None and obs.controller_epoch is None and obs.errors == []


def test_no_brokers_ids_means_wrong_chroot(fake_adapter: Callable[..., ZkAdapter]) -> None:
    obs = fake_adapter(FakeKazoo({})).observe()
    assert obs.broker_ids is None and obs.partition_states == {} and obs.stale_sections == {"znodes"}
    assert obs.errors == ["znodes: /brokers/ids does not exist (is this Kafka's ZooKeeper, and is the chroot right?)"]


def test_deadline_with_progress_keeps_partial_states_and_the_session(
        fake_adapter: Callable[..., ZkAdapter]) -> None:
    client = FakeKazoo(kafka_tree({"t": 10}), hang=frozenset({"/brokers/topics/t/partitions/7/state"}))
    adapter = fake_adapter(client, timeout_s=0.1)
    started = time.monotonic()
    obs = adapter.observe()
    assert time.monotonic() - started < 5  # the hung read would block forever: a hang guard
    assert sorted(obs.partition_states) == [("t", p) for p in range(7)]
    assert obs.broker_ids == {1, 2, 3} and obs.stale_sections == {"znodes"}
    assert obs.errors == ["znodes: deadline of 0.2s passed while reading partition states (7 of 10 partition "
                          "states read)"]
    assert adapter._client is client  # answers were flowing: a slow cluster, not a dead session


def test_deadline_without_any_answer_drops_the_session(fake_adapter: Callable[..., ZkAdapter]) -> None:
    client = FakeKazoo(kafka_tree({"t": 1}), hang=frozenset({"/brokers/ids"}))
    adapter = fake_adapter(client, timeout_s=0.1)
    obs = adapter.observe()
    assert obs.broker_ids is None and obs.stale_sections == {"znodes"}
    assert obs.errors == ["znodes: deadline of 0.2s passed while reading broker registrations"]
    assert adapter._client is None and client.stopped.wait(2)


@pytest.mark.parametrize("exc", [ConnectionLoss(), SessionExpiredError(), ConnectionClosedError("closed")])
def test_session_errors_drop_the_session(fake_adapter: Callable[..., ZkAdapter], exc: Exception) -> None:
    client = FakeKazoo(kafka_tree({"t": 3}), fail={"/brokers/topics/t/partitions/1/state": exc})
    adapter = fake_adapter(client)
    obs = adapter.observe()
    assert obs.broker_ids == {1, 2, 3} and set(obs.partition_states) == {("t", 0)}
    assert obs.stale_sections == {"znodes"}
    assert len(obs.errors) == 1 and obs.errors[0].startswith(f"znodes: reading partition states failed: "
                                                             f"{type(exc).__name__}")
    assert adapter._client is None and client.stopped.wait(2)


def test_no_session_in_time(fake_adapter: Callable[..., ZkAdapter]) -> None:
    client = FakeKazoo({})
    client.start_async = threading.Event  # type: ignore[method-assign]  # never connects
    adapter = fake_adapter(client, timeout_s=0.1)
    obs = adapter.observe()
    assert obs.stale_sections == {"znodes"} and obs.broker_ids is None
    assert obs.errors == ["znodes: no ZooKeeper session within 0.2s (client CONNECTED)"]
    assert adapter._client is None


def test_closed_adapter_refuses_to_observe() -> None:
    adapter = ZkAdapter("c", "zk1:2181", four_letter_words=False)
    adapter.close()
    with pytest.raises(RuntimeError):
        adapter.observe()

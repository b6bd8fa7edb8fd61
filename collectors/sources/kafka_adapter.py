"""One poll of a Kafka cluster's admin APIs, batched, concurrent, and failing piecewise.

Which client does what, and why:

* kafka-python's protocol classes (through `KafkaTransport`) for everything
  whose batching we must control or that librdkafka does not offer: Metadata
  (librdkafka hides leader epochs and offline replicas), ListOffsets (one
  request per leader per kind: earliest, latest, read_committed latest),
  FindCoordinator (batched, v4+), DescribeGroups and OffsetFetch (one request
  per coordinator for many groups; librdkafka fetches offsets one group at a
  time), ListTransactions / DescribeTransactions, DescribeProducers (500
  partitions a request, like Kafka's own `find-hanging`), DescribeQuorum.
* confluent-kafka's AdminClient for DescribeConfigs (all topics in one request,
  effective values with their sources). ListGroups goes through kafka-python
  too, to exactly the brokers the fresh metadata lists: librdkafka keeps asking
  a broker that left the metadata and times out, which would make every poll
  during a broker outage slow and mark all groups stale.

Request count per poll, with B brokers, C coordinators in use, G groups,
P partitions with an open transaction: 1 Metadata + 3B ListOffsets + B
ListTransactions + B ListGroups + B Metadata of a few topics (outside KRaft:
`collectors.model.metadata_lag`) + 2 DescribeConfigs + ≤2·ceil(keys/1000)
FindCoordinator + C·ceil(G_c/500)·2 DescribeGroups/OffsetFetch + C
DescribeTransactions + ceil(P/500)+B DescribeProducers + 1 DescribeQuorum + 1 ApiVersions —
linear in brokers and groups, never their product.

Every step's failure is recorded (errors, stale sections) and the rest goes on:
a dead broker costs the partitions it leads their offsets, not the poll.
Only read APIs are ever sent.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from kafka.protocol.admin import (
    DescribeGroupsRequest,
    DescribeProducersRequest,
    DescribeQuorumRequest,
    DescribeTransactionsRequest,
    ListGroupsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.consumer import ListOffsetsRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest

from collectors.model.loss import EpochQuestion, EpochWatch, epoch_questions
from collectors.model.observations import KafkaObservation, Owner, PartitionMeta
from collectors.model.patterns import TopicFilter
from collectors.model.vocabulary import partition_subject
from collectors.model.wording import plural
from collectors.sources.client_settings import CLIENT_ID
from collectors.sources.kafka_answers import error_name, parse_features, parse_quorum
from collectors.sources.limiter import RequestLimiter
from collectors.sources.metadata_epochs import KnownEpochs, behind, epochs_of, newest, topic_id

log = logging.getLogger(__name__)

GROUPS_PER_REQUEST = 500
METADATA_ASKS = 4
"""Other brokers asked for Metadata, at most, when an answer shows partitions at older leader epochs than seen
(`_newest_metadata`): a 100-broker cluster whose epochs all went back (restored from a backup) would otherwise be
asked a 100,000-partition answer a broker, all in one poll. The newest of what they said is believed."""
PRODUCER_PARTITIONS_PER_REQUEST = 500
COORDINATOR_KEYS_PER_REQUEST = 1000
EARLIEST, LATEST = -2, -1
GROUP_ID_NOT_FOUND = 69
NEW_PROTOCOL_GROUPS = frozenset({"consumer", "streams"})  # ListGroups v5's group_type of non-classic groups


def _answered_groups(groups: Iterable[Any], api: str, obs: KafkaObservation) -> Iterator[Any]:
    """The groups of an answer that carry no error; each error is recorded against that group (in the groups
    section: its alerts are kept, the other groups' are judged as usual, `KafkaObservation.fail`). A group
    that no longer exists is an answer, not an error: deleted between ListGroups and this request (an ephemeral
    console consumer's group, say), DescribeGroups v6+ says GROUP_ID_NOT_FOUND where older versions said state
    Dead. It is marked Dead like them, rather than making every group's data stale for a poll (a data_stale alert,
    and every group alert held open on missing evidence)."""
    for g in groups:
        if g.error_code == GROUP_ID_NOT_FOUND and api == "DescribeGroups" and g.group_id in obs.groups:
            info = obs.groups[g.group_id]
            if info.get("group_type") in NEW_PROTOCOL_GROUPS:
                # Kafka 4's consumer (KIP-848) and streams groups: "not a classic group", DescribeGroups cannot
                # describe them (ConsumerGroupDescribe can; kafka-python has no request for it). ListGroups' state
                # stands; members, unknown, are counted as one while the group is not Empty (it has some).
                info["members"] = 0 if info.get("state") in ("Empty", "Dead") else 1
            else:
                info.update(state="Dead", members=0)
        elif g.error_code:
            obs.fail("groups", f"{api} {g.group_id}: {error_name(g.error_code)}", subjects=[g.group_id])
        else:
            yield g


def _list_offsets(asked: tuple[tuple[str, int], ...], timestamp: int, isolation: int, timeout_ms: int) -> Any:
    """One ListOffsets request for the given partitions of one leader (as a consumer: replica id -1)."""
    topics: dict[str, list[int]] = defaultdict(list)
    for topic, partition in asked:
        topics[topic].append(partition)
    LT = ListOffsetsRequest.ListOffsetsTopic
    LP = LT.ListOffsetsPartition
    return ListOffsetsRequest(
        replica_id=-1, isolation_level=isolation, timeout_ms=timeout_ms,
        topics=[LT(name=name, partitions=[LP(partition_index=p, timestamp=timestamp, current_leader_epoch=-1)
                                          for p in plist]) for name, plist in topics.items()])


def group_owners(members: Iterable[Any], known: Mapping[bytes, list[tuple[str, int]]] | None = None,
                 learned: dict[bytes, list[tuple[str, int]]] | None = None) -> dict[tuple[str, int], Owner]:
    """Who holds which partition, from DescribeGroups' members of a consumer group: each member's assignment is
    Kafka's ConsumerProtocolAssignment (the same bytes the group's leader sent in SyncGroup). A member whose
    assignment is empty (mid-rebalance) or not in that format (a custom assignor's) holds nothing we can name.
    ``known``: assignments decoded before, by their bytes (unchanged between rebalances); every assignment seen
    is put in ``learned``."""
    out: dict[tuple[str, int], Owner] = {}
    for m in members:
        raw = m.member_assignment
        if not raw:
            continue
        raw = bytes(raw)
        held = known.get(raw) if known is not None else None
        if held is None:
            try:
                assignment = ConsumerProtocolAssignment.decode(raw)
                held = [(tp.topic, p) for tp in assignment.assigned_partitions for p in tp.partitions]
            except Exception:  # any malformed assignment means "unknown owner", never a failed poll
                continue
        if learned is not None:
            learned[raw] = held
        owner = Owner(m.member_id, m.client_id, m.client_host)
        for key in held:
            out[key] = owner
    return out


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


class KafkaAdapter:
    """Owns the two clients of one cluster; `observe` never raises for cluster trouble."""

    def __init__(self, name: str, confluent_settings: dict[str, Any], kafka_python_settings: dict[str, Any],
                 request_timeout_s: float, kraft: bool | None = None, limiter: RequestLimiter | None = None,
                 topic_filter: TopicFilter | None = None, group_filter: Callable[[str], bool] | None = None) -> None:
        """`topic_filter` / `group_filter`: what the cluster's filters leave in (None: everything); applied before
        any request about a topic or group is made."""
        self.name = name
        self.topic_filter = topic_filter
        self.group_filter = group_filter
        self.limiter = limiter
        self._ck_settings = confluent_settings
        self._kp_settings = kafka_python_settings
        self.timeout_s = request_timeout_s
        self.kraft_hint = kraft
        self._transport: Any = None
        self._ck: Any = None
        self._configs_pool: concurrent.futures.ThreadPoolExecutor | None = None
        # ListOffsets requests by (leader, kind), with the partitions they ask about: a big cluster's leadership
        # rarely moves between polls, so the same request objects serve again (building 300,000 partition
        # entries a poll was a tenth of a 100,000-partition poll's CPU)
        self._offset_requests: dict[tuple[int, str], tuple[tuple[tuple[str, int], ...], Any]] = {}
        # decoded member assignments by their bytes: unchanged between rebalances
        self._assignments: dict[bytes, list[tuple[str, int]]] = {}
        # the leader epoch (and topic id) of each partition in the last Metadata believed (`_newest_metadata`)
        self._epochs: dict[tuple[str, int], tuple[int, str | None]] = {}

    # ----------------------------------------------------------------- clients
    def _kp(self) -> Any:
        if self._transport is None:
            from collectors.sources.kafka_transport import KafkaTransport

            self._transport = KafkaTransport(
                {**self._kp_settings, "max_in_flight_requests_per_connection": 256}, self.timeout_s, self.limiter)
        return self._transport

    def _confluent(self) -> Any:
        if self._ck is None:
            from confluent_kafka.admin import AdminClient

            self._ck = AdminClient({**self._ck_settings, "logger": logging.getLogger("librdkafka")})
        return self._ck

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        self._ck = None
        if self._configs_pool is not None:
            self._configs_pool.shutdown(wait=False, cancel_futures=True)
            self._configs_pool = None

    # ----------------------------------------------------------------- the poll
    def observe(self, now: float | None = None,
                epochs: Mapping[tuple[str, int], EpochWatch] | None = None,
                probe: Sequence[str] = ()) -> KafkaObservation:
        """One poll's observation. `epochs`: the leader epochs last known per partition; where one moved, the
        current leader is asked where the old epoch ends in its log (`collectors.model.loss`). `probe`: topics every
        broker is asked Metadata of, to tell one whose metadata cache lags (`collectors.model.metadata_lag`)."""
        obs = KafkaObservation(time=now if now is not None else time.time())
        try:
            kp = self._kp()
        except Exception as e:
            obs.reachable = False
            obs.fail("cluster", f"cluster unreachable: {type(e).__name__}: {e}")
            self.close()
            return obs
        sent_before = kp.sent
        kp.retry_brokers_now()
        if not self._metadata(kp, obs, epochs):
            obs.requests = kp.sent - sent_before
            return obs
        ck_configs = self._start_configs(obs)
        self._offsets_and_listings(kp, obs, probe)
        if epochs:
            self._epoch_end_offsets(kp, obs, epoch_questions(obs.partitions, epochs))
        self._groups_and_transactions(kp, obs)
        self._producers(kp, obs)
        self._finish_configs(ck_configs, obs)
        obs.requests = kp.sent - sent_before + (2 if ck_configs else 0)
        return obs

    def _metadata(self, kp: Any, obs: KafkaObservation,
                  epochs: Mapping[tuple[str, int], EpochWatch] | None = None) -> bool:
        out = kp.send_one(None, MetadataRequest(topics=None, allow_auto_topic_creation=False))
        # the client's least-loaded pick may be a broker that just died: try each other known broker once
        for node in kp.broker_ids() if not out.ok else []:
            out = kp.send_one(node, MetadataRequest(topics=None, allow_auto_topic_creation=False))
            if out.ok:
                break
        if not out.ok:
            obs.reachable = False
            obs.fail("cluster", f"cluster unreachable: Metadata failed: {out.error}")
            return False
        md, patches = self._newest_metadata(kp, out.response, epochs)
        kp.refresh_brokers(md)
        obs.cluster_id = md.cluster_id
        obs.controller_id = md.controller_id if md.controller_id is not None and md.controller_id >= 0 else None
        obs.brokers = [(b.node_id, b.host, b.port, b.rack) for b in md.brokers]
        holders: set[int] | None = set()
        for t in md.topics:
            if t.error_code not in (0, 5):
                if t.name and self.topic_filter is not None and not self.topic_filter(t.name, bool(t.is_internal)):
                    obs.filtered_topics += 1  # a topic the filters leave out is nobody's concern here, errors too
                    holders = None  # its replicas, which hold brokers' data all the same, are unknown
                    continue
                # One topic's error (UNKNOWN_TOPIC_OR_PARTITION while it is being deleted, TOPIC_AUTHORIZATION_FAILED)
                # leaves that topic's partitions unread, not the others': only its alerts are kept (a topic known by
                # no name cannot be told apart: all of them are).
                obs.fail("partitions", f"metadata for topic {t.name}: {error_name(t.error_code)}",
                         subjects=[t.name] if t.name else None)
                holders = None  # that topic's replicas are unknown
                continue
            parts = [patches.get((t.name, p.partition_index), p) for p in t.partitions] if patches else t.partitions
            if holders is not None:
                for p in parts:
                    holders.update(p.replica_nodes)
            if getattr(t, "topic_id", None) is not None:
                obs.topic_names[t.topic_id] = t.name
            tid = topic_id(t)
            if not t.partitions:
                # A topic being created can show no partitions for a moment. Left out on purpose until it has
                # some: there is nothing to measure, and a topic of replication factor 0 would only make
                # false durability alerts and divisions by zero downstream.
                continue
            if self.topic_filter is not None and not self.topic_filter(t.name, bool(t.is_internal)):
                obs.filtered_topics += 1
                continue  # not described, no offsets listed (the id stays known: its commits are dropped below)
            if t.is_internal:
                obs.internal_topics.add(t.name)
            for p in parts:
                obs.partitions.append(PartitionMeta(
                    t.name, p.partition_index, p.leader_id,
                    p.leader_epoch if getattr(p, "leader_epoch", -1) not in (None, -1) else None,
                    list(p.replica_nodes), list(p.isr_nodes), list(getattr(p, "offline_replicas", None) or []),
                    tid))
        obs.replica_brokers = holders
        self._epochs = {(p.topic, p.partition): (p.leader_epoch, p.topic_id) for p in obs.partitions
                        if p.leader_epoch is not None}
        return True

    def _newest_metadata(self, kp: Any, md: Any, watched: Mapping[tuple[str, int], EpochWatch] | None
                         ) -> tuple[Any, dict[tuple[str, int], Any]]:
        """The Metadata answer to believe, and partition answers of other brokers to put in it
        (`metadata_epochs`). Where `md` shows partitions at an older leader epoch than already seen, its broker's
        cache lags: other brokers are asked in turn (`METADATA_ASKS` at most) until one answer is not behind. The
        epochs seen are the last poll's, or after a restart the loss ledger's watch (checkpointed)."""
        known: KnownEpochs = self._epochs or {k: (w.epoch, w.topic_id) for k, w in (watched or {}).items()}
        late = behind(md, known)
        if not late:
            return md, {}
        answers = [(md, late)]
        for node in sorted(b.node_id for b in md.brokers):
            out = kp.send_one(node, MetadataRequest(topics=None, allow_auto_topic_creation=False))
            if out.ok:
                answers.append((out.response, behind(out.response, known)))
                if not answers[-1][1] or len(answers) > METADATA_ASKS:
                    break
        best, patches = newest(answers)
        left = min(len(b) for _, b in answers) - len(patches)  # partitions older in every answer: believed
        log.info("%s: a Metadata answer showed %s at an older leader epoch than already seen (a broker whose "
                 "metadata lags); asked %s more, %s", self.name, plural(len(late), "partition"),
                 plural(len(answers) - 1, "broker"),
                 "one of them is current" if left <= 0 else f"{plural(left, 'partition')} older in every answer")
        return best, patches

    def _offsets_and_listings(self, kp: Any, obs: KafkaObservation, probe: Sequence[str] = ()) -> None:
        by_leader: dict[int, list[PartitionMeta]] = defaultdict(list)
        for p in obs.partitions:
            if p.leader >= 0:
                by_leader[p.leader].append(p)
        requests: list[tuple[int | None, Any]] = []
        kinds: list[tuple[str, int]] = []
        cache: dict[tuple[int, str], tuple[tuple[tuple[str, int], ...], Any]] = {}
        for leader, parts in sorted(by_leader.items()):
            asked = tuple((p.topic, p.partition) for p in parts)
            for kind, ts, isolation in (("earliest", EARLIEST, 0), ("latest", LATEST, 0), ("lso", LATEST, 1)):
                known = self._offset_requests.get((leader, kind))
                if known is not None and known[0] == asked:
                    req = known[1]
                else:
                    req = _list_offsets(asked, ts, isolation, int(self.timeout_s * 1000))
                cache[(leader, kind)] = (asked, req)
                requests.append((leader, req))
                kinds.append((kind, leader))
        self._offset_requests = cache  # leaders that lead nothing any more are forgotten
        broker_ids = [b[0] for b in obs.brokers]
        for b in broker_ids:
            requests.append((b, ListTransactionsRequest(state_filters=[], producer_id_filters=[])))
            kinds.append(("txn_list", b))
            requests.append((b, ListGroupsRequest(states_filter=[], types_filter=[])))
            kinds.append(("group_list", b))
        if probe:
            asked_topics = [MetadataRequest.MetadataRequestTopic(name=t) for t in probe]
            for b in broker_ids:
                requests.append((b, MetadataRequest(topics=asked_topics, allow_auto_topic_creation=False)))
                kinds.append(("probe", b))
        targets = {"earliest": obs.log_start, "latest": obs.high_watermark, "lso": obs.last_stable}
        for (kind, node), out in zip(kinds, kp.send_many(requests), strict=True):
            if kind in targets:
                if not out.ok:
                    # a fresh request next time: the kept one carries the API version negotiated with the broker
                    # it was last sent to, which a broker restarted at another version may not speak
                    asked_of = self._offset_requests.pop((node, kind), ((), None))[0]
                    obs.unreachable_brokers.add(node)
                    obs.fail("offsets", f"ListOffsets to broker {node} failed: {type(out.error).__name__}",
                             subjects=[partition_subject(t, p) for t, p in asked_of])
                    continue
                for t in out.response.topics:
                    for p in t.partitions:
                        if p.error_code == 0 and p.offset >= 0:
                            targets[kind][(t.name, p.partition_index)] = p.offset
                            if kind == "latest" and (getattr(p, "leader_epoch", -1) or -1) >= 0:
                                obs.high_watermark_epoch[(t.name, p.partition_index)] = p.leader_epoch
                        elif p.error_code:
                            subj = partition_subject(t.name, p.partition_index)
                            obs.fail("offsets", f"ListOffsets {subj}: {error_name(p.error_code)}", subjects=[subj])
            elif kind == "txn_list":
                if not out.ok or out.response.error_code:
                    why = type(out.error).__name__ if not out.ok else error_name(out.response.error_code)
                    obs.fail("transactions", f"ListTransactions to broker {node} failed: {why}")
                    if not out.ok:
                        obs.unreachable_brokers.add(node)
                    continue
                for ts in out.response.transaction_states:
                    obs.listed_transactions[ts.transactional_id] = ts.producer_id
            elif kind == "probe":
                if out.ok:  # a broker that does not answer is the other requests' to tell
                    obs.metadata_probes[node] = self._probe_view(out.response)
            elif kind == "group_list":
                if not out.ok or out.response.error_code:
                    why = type(out.error).__name__ if not out.ok else error_name(out.response.error_code)
                    obs.fail("groups", f"ListGroups to broker {node} failed: {why}")
                    continue
                watch = self.group_filter
                for g in out.response.groups:
                    if g.protocol_type not in ("consumer", ""):
                        continue  # connect workers and other group types have no offsets to lag
                    if watch is not None and not watch(g.group_id):
                        obs.filtered_groups += 1  # never described, its offsets never fetched
                        continue
                    obs.groups[g.group_id] = {"state": getattr(g, "group_state", None) or "Unknown", "members": 0,
                                              "coordinator": node, "protocol_type": g.protocol_type,
                                              "group_type": getattr(g, "group_type", None)}

    def _probe_view(self, md: Any) -> dict[tuple[str, int], tuple[int, str | None]]:
        """One broker's answer about the probed topics: each partition's leader epoch and topic id. An epoch
        higher than the one believed is learned (`_epochs`): the next poll's Metadata, if it lands on a broker that
        lags, is then seen behind and another broker asked, rather than believed for a poll."""
        view = epochs_of(md)
        for key, (e, tid) in view.items():
            was = self._epochs.get(key)
            if was is not None and e > was[0] and tid is not None and tid == was[1]:  # the same topic only
                self._epochs[key] = (e, tid)
        return view

    def _epoch_end_offsets(self, kp: Any, obs: KafkaObservation, questions: list[EpochQuestion]) -> None:
        """OffsetForLeaderEpoch (as a consumer, replica id -1: KIP-320) to each asked partition's leader.

        A failed answer (an error, or no answer) leaves the partition out: `collectors.model.loss.settle` asks again
        next poll. Not a stale section: nothing shown is out of date, the evidence is only late."""
        if not questions:
            return
        by_leader: dict[int, list[EpochQuestion]] = defaultdict(list)
        for q in questions:
            by_leader[q.leader].append(q)
        requests = []
        for leader, qs in sorted(by_leader.items()):
            topics: dict[str, list[Any]] = defaultdict(list)
            for q in qs:
                topics[q.topic].append(OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=q.partition, current_leader_epoch=q.current_epoch, leader_epoch=q.epoch))
            requests.append((leader, OffsetForLeaderEpochRequest(
                replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=ps)
                                       for t, ps in topics.items()])))
        for (leader, _), out in zip(requests, kp.send_many(requests), strict=True):
            if not out.ok:
                log.info("OffsetForLeaderEpoch to broker %s failed: %s", leader, type(out.error).__name__)
                continue
            for t in out.response.topics:
                for p in t.partitions:
                    # (-1, -1) without an error is an answer: the leader's epoch cache holds nothing at or before the
                    # epoch asked (older than the cache, or a topic of the old message format). It proves nothing,
                    # and settles the question: asked again, it would answer the same at every poll.
                    if p.error_code == 0:
                        obs.epoch_end_offsets[(t.topic, p.partition)] = (p.leader_epoch, p.end_offset)

    # ----------------------------------------------------------------- groups and transactions
    @staticmethod
    def _healthy_broker(obs: KafkaObservation) -> int | None:
        """The first broker that answered this poll so far (None: let the client choose)."""
        return next((b[0] for b in obs.brokers if b[0] not in obs.unreachable_brokers), None)

    def _find_coordinators(self, kp: Any, keys: list[str], key_type: int, obs: KafkaObservation,
                           section: str) -> dict[str, int]:
        # ask a broker that answered this poll: a slow one would cost a whole request timeout again
        node = self._healthy_broker(obs)
        chunks = _chunks(keys, COORDINATOR_KEYS_PER_REQUEST)
        requests = [(node, FindCoordinatorRequest(key_type=key_type, coordinator_keys=chunk, min_version=4))
                    for chunk in chunks]
        found: dict[str, int] = {}
        for chunk, out in zip(chunks, kp.send_many(requests), strict=True):
            if not out.ok:
                obs.fail(section, f"FindCoordinator failed: {type(out.error).__name__}", subjects=chunk)
                continue
            for c in out.response.coordinators:
                if c.error_code == 0 and c.node_id >= 0:
                    found[c.key] = c.node_id
                else:
                    obs.fail(section, f"FindCoordinator {c.key}: {error_name(c.error_code)}", subjects=[c.key])
        return found

    def _groups_and_transactions(self, kp: Any, obs: KafkaObservation) -> None:
        group_ids = sorted(obs.groups)
        known, self._assignments = self._assignments, {}  # keeps this poll's only: bounded by the groups
        txn_ids = sorted(obs.listed_transactions)
        coords = self._find_coordinators(kp, group_ids, 0, obs, "groups") if group_ids else {}
        txn_coords = self._find_coordinators(kp, txn_ids, 1, obs, "transactions") if txn_ids else {}
        by_coord: dict[int, list[str]] = defaultdict(list)
        for gid, node in coords.items():
            by_coord[node].append(gid)
            obs.groups[gid]["coordinator"] = node
        requests: list[tuple[int | None, Any]] = []
        kinds: list[str] = []
        asked: list[list[str]] = []  # the groups / transactional ids each request asks about
        OG = OffsetFetchRequest.OffsetFetchRequestGroup
        for node, gids in sorted(by_coord.items()):
            for chunk in _chunks(sorted(gids), GROUPS_PER_REQUEST):
                requests.append((node, DescribeGroupsRequest(groups=chunk, include_authorized_operations=False)))
                kinds.append("describe")
                requests.append((node, OffsetFetchRequest(
                    groups=[OG(group_id=g, member_id=None, member_epoch=-1, topics=None) for g in chunk],
                    require_stable=False, min_version=8)))
                kinds.append("offsets")
                asked += [chunk, chunk]
        txn_by_coord: dict[int, list[str]] = defaultdict(list)
        for tid, node in txn_coords.items():
            txn_by_coord[node].append(tid)
        for node, tids in sorted(txn_by_coord.items()):
            requests.append((node, DescribeTransactionsRequest(transactional_ids=sorted(tids))))
            kinds.append("txn")
            asked.append(sorted(tids))
        if self.kraft_hint is not False:
            # any broker forwards it to the quorum; ask one that answered this poll (a dead one picked at random
            # by the client would cost the quorum view for the poll)
            requests.append((self._healthy_broker(obs), DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
                topic_name="__cluster_metadata", partitions=[
                    DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)])])))
            kinds.append("quorum")
            asked.append([])
        requests.append((self._healthy_broker(obs), ApiVersionsRequest(
            client_software_name=CLIENT_ID, client_software_version="1", min_version=3)))
        kinds.append("features")
        asked.append([])
        for kind, keys, out in zip(kinds, asked, kp.send_many(requests), strict=True):
            if kind == "quorum":
                parse_quorum(out, obs)
                continue
            if kind == "features":
                parse_features(out, obs)
                continue
            section = "transactions" if kind == "txn" else "groups"
            if not out.ok:
                obs.fail(section, f"{type(out.request).__name__} to broker {out.node_id} failed: "
                                  f"{type(out.error).__name__}", subjects=keys)
                continue
            if kind == "describe":
                for g in _answered_groups(out.response.groups, "DescribeGroups", obs):
                    info = obs.groups.setdefault(g.group_id, {})
                    info.update(state=g.group_state, members=len(g.members), protocol_type=g.protocol_type,
                                coordinator=out.node_id)
                    if g.protocol_type == "consumer" and g.members:
                        owners = group_owners(g.members, known, self._assignments)
                        if owners:
                            obs.group_owners[g.group_id] = owners
            elif kind == "offsets":
                for g in _answered_groups(out.response.groups, "OffsetFetch", obs):
                    commits = obs.commits.setdefault(g.group_id, {})
                    for t in g.topics:
                        name = getattr(t, "name", None) or obs.topic_names.get(getattr(t, "topic_id", None))
                        if not name:
                            continue  # a topic deleted since the metadata request
                        if self.topic_filter is not None and not self.topic_filter(name, name in obs.internal_topics):
                            continue  # a topic the filters leave out
                        for p in t.partitions:
                            if p.error_code == 0 and p.committed_offset >= 0:
                                commits[(name, p.partition_index)] = p.committed_offset
            else:
                for ts in out.response.transaction_states:
                    if ts.error_code:
                        obs.fail("transactions", f"DescribeTransactions {ts.transactional_id}: "
                                                 f"{error_name(ts.error_code)}", subjects=[ts.transactional_id])
                        continue
                    obs.transactions.append({
                        "transactional_id": ts.transactional_id, "coordinator": out.node_id,
                        "transaction_state": ts.transaction_state, "producer_id": ts.producer_id,
                        "producer_epoch": ts.producer_epoch, "transaction_timeout_ms": ts.transaction_timeout_ms,
                        "transaction_start_time_ms": ts.transaction_start_time_ms,
                        "partitions": [(t.topic, p) for t in ts.topics for p in t.partitions]})

    def _producers(self, kp: Any, obs: KafkaObservation) -> None:
        """DescribeProducers where a transaction is open: LSO behind the HW, or a known open transaction."""
        wanted: set[tuple[str, int]] = set()
        for key, hw in obs.high_watermark.items():
            lso = obs.last_stable.get(key)
            if lso is not None and lso < hw:
                wanted.add(key)
        leaders = {(p.topic, p.partition): p.leader for p in obs.partitions}
        by_leader: dict[int, list[tuple[str, int]]] = defaultdict(list)
        for key in sorted(wanted):
            if leaders.get(key, -1) >= 0:
                by_leader[leaders[key]].append(key)
        requests: list[tuple[int | None, Any]] = []
        asked: list[list[str]] = []  # the partitions each request asks about
        TR = DescribeProducersRequest.TopicRequest
        for leader, keys in sorted(by_leader.items()):
            for chunk in _chunks(keys, PRODUCER_PARTITIONS_PER_REQUEST):
                topics: dict[str, list[int]] = defaultdict(list)
                for t, p in chunk:
                    topics[t].append(p)
                requests.append((leader, DescribeProducersRequest(
                    topics=[TR(name=t, partition_indexes=ps) for t, ps in topics.items()])))
                asked.append([partition_subject(t, p) for t, p in chunk])
        for parts, out in zip(asked, kp.send_many(requests), strict=True):
            if not out.ok:
                obs.fail("producers", f"DescribeProducers to broker {out.node_id} failed: {type(out.error).__name__}",
                         subjects=parts)
                continue
            for t in out.response.topics:
                for p in t.partitions:
                    if p.error_code:
                        subj = partition_subject(t.name, p.partition_index)
                        obs.fail("producers", f"DescribeProducers {subj}: {error_name(p.error_code)}", subjects=[subj])
                        continue
                    obs.producers[(t.name, p.partition_index)] = [
                        {"producer_id": s.producer_id, "producer_epoch": s.producer_epoch,
                         "last_timestamp": s.last_timestamp, "txn_start_offset": s.current_txn_start_offset}
                        for s in p.active_producers]

    # ----------------------------------------------------------------- configs
    def _start_configs(self, obs: KafkaObservation) -> concurrent.futures.Future[dict[Any, Any]] | None:
        """DescribeConfigs through librdkafka, in the background while the rest of the poll goes on.

        It runs on a thread of its own because its requests count against the request limiter like every
        other: that thread takes its slots, waits for librdkafka's answers and gives them back, so the poll's
        thread never holds slots while it waits for more.
        """
        topics = sorted({p.topic for p in obs.partitions})
        broker = obs.controller_id
        if broker is None and obs.brokers:
            broker = obs.brokers[0][0]
        if not topics and broker is None:
            return None
        if self._configs_pool is None:
            self._configs_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"configs-{self.name}")
        return self._configs_pool.submit(self._describe_configs, topics, broker)

    def _describe_configs(self, topics: list[str], broker: int | None) -> dict[Any, Any]:
        from confluent_kafka.admin import ConfigResource

        ck = self._confluent()
        calls = [[ConfigResource("TOPIC", t) for t in topics]] if topics else []
        if broker is not None:
            calls.append([ConfigResource("BROKER", str(broker))])
        futs: dict[Any, Any] = {}
        while calls:
            taken = self.limiter.acquire_up_to(len(calls)) if self.limiter is not None else len(calls)
            batch, calls = calls[:taken], calls[taken:]
            try:
                started: dict[Any, Any] = {}
                for resources in batch:
                    started.update(ck.describe_configs(resources, request_timeout=self.timeout_s))
                concurrent.futures.wait(list(started.values()), timeout=self.timeout_s + 2)
                futs.update(started)
            finally:
                if self.limiter is not None:
                    self.limiter.release(taken)
        return futs

    def _finish_configs(self, pending: concurrent.futures.Future[dict[Any, Any]] | None,
                        obs: KafkaObservation) -> None:
        if pending is None:
            return
        try:
            futs = pending.result(timeout=2 * (self.timeout_s + 2))
        except Exception as e:
            obs.fail("configs", f"DescribeConfigs failed: {type(e).__name__}: {e}")
            return
        for res, fut in futs.items():
            try:
                entries = fut.result(timeout=0)
            except Exception as e:
                topic = getattr(res.restype, "name", "") == "TOPIC"
                obs.fail("configs", f"DescribeConfigs {res.name}: {type(e).__name__}",
                         subjects=[res.name] if topic else None)
                continue
            values = {k: (None if v.is_sensitive else v.value) for k, v in entries.items()}
            if getattr(res.restype, "name", "") == "TOPIC":
                obs.topic_configs[res.name] = values
            else:
                obs.broker_configs = values


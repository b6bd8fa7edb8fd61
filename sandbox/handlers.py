"""Answers to the admin requests the collectors (and real admin tools) send.

Each handler turns the model's state into the plain-dict form of a response;
`sandbox.protocol.build` turns that into kafka-python's generated classes.
Only read APIs are implemented: the monitor is read-only, and a client asking
for anything else gets UNSUPPORTED_VERSION rather than a silent drop.
Error codes are Kafka's (see kafka.errors).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from sandbox import kafka_defaults as kd
from sandbox.controller import KRAFT_OBSERVER_SESSION_S
from sandbox.groups import Group, client_host, client_id, member_id
from sandbox.model import Cluster
from sandbox.protocol import KRAFT_ONLY, Request, UnsupportedRequest, supported_api_versions
from sandbox.topology import CONSUMER_OFFSETS, Partition

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_REQUEST = 42
GROUP_ID_NOT_FOUND = 69
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
TRANSACTIONAL_ID_NOT_FOUND = 105
UNKNOWN_SERVER_ERROR = -1
NOT_LEADER_MESSAGE = ("For requests intended only for the leader, this error indicates that the broker is not the "
                      "current leader. For requests intended for any replica, this error indicates that the broker "
                      "is not a replica of the topic partition.")  # Errors.NOT_LEADER_OR_FOLLOWER.message()

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

LIST_OFFSETS_LATEST = -1
LIST_OFFSETS_EARLIEST = -2
LIST_OFFSETS_MAX_TIMESTAMP = -3

# One topic of an OffsetFetch: its name (None when asked by an id this cluster does not know) and the partitions asked.
TopicAsk = tuple[str | None, list[int]]


def controller_for_clients(c: Cluster) -> int:
    """The controller id of a Metadata or DescribeCluster answer. ZooKeeper mode: the controller, while its broker is
    registered. KRaft: a random unfenced broker, another at each answer (KIP-590: clients send what is meant for the
    controller to any broker, which forwards it); the active controller is the quorum leader, which only
    DescribeQuorum names."""
    if c.mode == "kraft":
        return c.random_alive_broker()
    return c.controller_id if c.controller_id in c.alive_brokers() else -1


def partition_metadata(p: Partition, unavailable: set[int]) -> dict[str, Any]:
    """One partition of a Metadata answer; `unavailable`: brokers the controller does not count in."""
    if unavailable or p.failed_replicas:
        offline = [r for r in p.replicas if r in unavailable or r in p.failed_replicas]
    else:
        offline = []
    return {
        "error_code": NONE if p.online else LEADER_NOT_AVAILABLE,
        "partition_index": p.index, "leader_id": p.leader, "leader_epoch": p.leader_epoch,
        "replica_nodes": list(p.replicas), "isr_nodes": list(p.isr), "offline_replicas": offline,
    }


def metadata_answer(c: Cluster, wanted: list[str] | None = None) -> dict[str, Any]:
    """A Metadata answer (of `wanted` topics; None: all) as the controller sees the cluster now. Also what a broker
    whose metadata cache stops following the controller keeps answering (`Cluster.lag_metadata`). A topic of
    `Cluster.topic_errors` answers its error code and no partitions."""
    topics = []
    unavailable = {i for i, b in c.brokers.items() if not b.registered}
    for name in list(c.topics) if wanted is None else wanted:
        t = c.topics.get(name)
        if t is None or name in c.topic_errors:
            topics.append({"error_code": c.topic_errors.get(name, UNKNOWN_TOPIC_OR_PARTITION), "name": name,
                           "partitions": []})
            continue
        topics.append({
            "error_code": NONE, "name": t.name, "topic_id": t.topic_id, "is_internal": t.internal,
            "partitions": [partition_metadata(p, unavailable) for p in t.partitions],
        })
    return {
        "throttle_time_ms": 0, "cluster_id": c.cluster_id, "controller_id": controller_for_clients(c),
        "topics": topics, "error_code": NONE,
        "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in c.brokers.values() if b.registered],
    }


# KIP-584 features as a Kafka 4.0 broker knows them (BrokerFeatures.defaultSupportedFeatures): name → (min, max).
# metadata.version runs from 3.3-IV3 (7) to 4.0-IV3 (25); only KRaft brokers advertise it here.
SUPPORTED_FEATURES = {"transaction.version": (0, 2)}
KRAFT_SUPPORTED_FEATURES = {"metadata.version": (7, 25)}
# The metadata.version a KRaft sandbox runs at: 4.0-IV3 where transaction.version is finalized (it needs 4.0-IV2 or
# later), else 3.9-IV0, the last 3.x level (a cluster not yet finalized at 4.0, as after a rolling upgrade from 3.9).
METADATA_VERSION_TV = 25
METADATA_VERSION_3X = 21


def feature_fields(c: Cluster, api_version: int) -> dict[str, Any]:
    """The tagged KIP-584 fields of an ApiVersions v3+ answer, as a Kafka 4.0 broker fills them.

    Supported features: below v4 those whose minimum is 0 are left out (KAFKA-17011: older clients cannot read a
    zero minimum; Kafka's `alterFeatureLevel0`). Finalized features: only levels above 0 (Kafka drops a feature set
    to 0); a KRaft cluster always finalizes metadata.version, and its epoch is the metadata log offset the broker's
    image reached. A ZooKeeper-mode sandbox finalizes nothing: epoch -1 (unknown), no finalized features.
    """
    supported = {**SUPPORTED_FEATURES, **(KRAFT_SUPPORTED_FEATURES if c.mode == "kraft" else {})}
    finalized: dict[str, int] = {}
    if c.mode == "kraft":
        finalized["metadata.version"] = METADATA_VERSION_TV if c.spec.transaction_version else METADATA_VERSION_3X
    if c.spec.transaction_version > 0:
        finalized["transaction.version"] = c.spec.transaction_version
    return {
        "supported_features": [{"name": n, "min_version": lo, "max_version": hi}
                               for n, (lo, hi) in supported.items() if lo > 0 or api_version >= 4],
        "finalized_features_epoch": int(c.metadata_hwm) if finalized else -1,
        "finalized_features": [{"name": n, "min_version_level": v, "max_version_level": v}
                               for n, v in finalized.items()],
    }


def _observer(node_id: int, high_watermark: float, now: float, up: bool,
              stopped: tuple[float, float] | None) -> dict[str, Any]:
    """A broker's entry among DescribeQuorum's observers: caught up with the leader while it runs and fetches; a
    broker down answers -1 (nothing known); one whose metadata fetch stopped (`lag_metadata`) keeps the offset
    and time it stopped at."""
    offset, at = (high_watermark, now) if stopped is None else stopped
    return {"replica_id": node_id, "replica_directory_id": None, "log_end_offset": int(offset) if up else -1,
            "last_fetch_timestamp": int(at * 1000) if up else -1,
            "last_caught_up_timestamp": int(at * 1000) if up else -1}


class Handlers:
    """Dispatch by API key; `__call__` is the server's handler callable."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        self._by_key: dict[int, Callable[[int, Request], Mapping[str, Any]]] = {
            18: self.api_versions,
            3: self.metadata,
            60: self.describe_cluster,
            32: self.describe_configs,
            16: self.list_groups,
            15: self.describe_groups,
            10: self.find_coordinator,
            9: self.offset_fetch,
            2: self.list_offsets,
            23: self.offset_for_leader_epoch,
            66: self.list_transactions,
            65: self.describe_transactions,
            61: self.describe_producers,
            55: self.describe_quorum,
        }
        # Test hook, run on the sandbox loop before each request is answered (e.g. to fail over mid-poll).
        self.on_request: Callable[[int, Request], object] | None = None

    def __call__(self, node_id: int, req: Request) -> Mapping[str, Any]:
        if self.on_request is not None:
            self.on_request(node_id, req)
        fn = self._by_key.get(req.api_key)
        if fn is None or (req.api_key in KRAFT_ONLY and self.c.mode != "kraft"):
            raise UnsupportedRequest(req.api_key)
        return fn(node_id, req)

    # ------------------------------------------------------------------ cluster
    def api_versions(self, node_id: int, req: Request) -> Mapping[str, Any]:
        out: dict[str, Any] = {"error_code": NONE, "api_keys": supported_api_versions(self.c.mode),
                               "throttle_time_ms": 0}
        if req.api_version >= 3:
            out.update(feature_fields(self.c, req.api_version))
        return out

    def metadata(self, node_id: int, req: Request) -> Mapping[str, Any]:
        body = req.body
        wanted: list[str] | None
        if body.topics is None or (req.api_version == 0 and not body.topics):
            wanted = None
        else:
            wanted = []
            for t in body.topics:
                name = t.name
                if name is None and getattr(t, "topic_id", None) is not None:
                    name = self.c.topic_ids.get(t.topic_id)
                if name is not None:
                    wanted.append(name)
        lagging = self.c.brokers[node_id].metadata_view if node_id in self.c.brokers else None
        if lagging is not None:  # its cache stopped following the controller: the cluster as it was then
            known = {t["name"]: t for t in lagging["topics"]}
            return {**lagging, "topics": list(known.values()) if wanted is None else [
                known.get(n) or {"error_code": UNKNOWN_TOPIC_OR_PARTITION, "name": n, "partitions": []}
                for n in wanted]}
        return metadata_answer(self.c, wanted)

    def describe_cluster(self, node_id: int, req: Request) -> Mapping[str, Any]:
        include_fenced = bool(getattr(req.body, "include_fenced_brokers", False))
        brokers = []
        for b in self.c.brokers.values():
            if b.registered or include_fenced:
                brokers.append({"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                                "is_fenced": not b.registered})
        return {"throttle_time_ms": 0, "error_code": NONE, "error_message": None, "endpoint_type": 1,
                "cluster_id": self.c.cluster_id, "controller_id": controller_for_clients(self.c),
                "brokers": brokers}

    # ------------------------------------------------------------------ configs
    def describe_configs(self, node_id: int, req: Request) -> Mapping[str, Any]:
        body = req.body
        synonyms = bool(getattr(body, "include_synonyms", False))
        results = []
        for res in body.resources:
            keys = res.configuration_keys
            if res.resource_type == RESOURCE_TOPIC:
                if res.resource_name not in self.c.topics:
                    results.append({"error_code": UNKNOWN_TOPIC_OR_PARTITION,
                                    "error_message": f"Topic {res.resource_name} does not exist",
                                    "resource_type": res.resource_type, "resource_name": res.resource_name,
                                    "configs": []})
                    continue
                configs = self._topic_configs(res.resource_name, keys, synonyms)
            elif res.resource_type == RESOURCE_BROKER:
                configs = self._broker_configs(keys, synonyms)
            else:
                results.append({"error_code": INVALID_REQUEST, "error_message": "unsupported resource type",
                                "resource_type": res.resource_type, "resource_name": res.resource_name,
                                "configs": []})
                continue
            results.append({"error_code": NONE, "error_message": None, "resource_type": res.resource_type,
                            "resource_name": res.resource_name, "configs": configs})
        return {"throttle_time_ms": 0, "results": results}

    def _topic_configs(self, topic: str, keys: list[str] | None, synonyms: bool) -> list[dict[str, Any]]:
        out = []
        for key, (synonym, default, ctype) in kd.TOPIC_CONFIGS.items():
            if keys and key not in keys:
                continue
            value, source = self.c.topic_config(topic, key)
            syn = []
            if synonyms:
                if key in self.c.topics[topic].configs:
                    syn.append({"name": key, "value": value, "source": kd.SOURCE_DYNAMIC_TOPIC})
                if synonym in self.c.broker_config:
                    syn.append({"name": synonym, "value": self.c.broker_config[synonym],
                                "source": kd.SOURCE_STATIC_BROKER})
                syn.append({"name": synonym, "value": default, "source": kd.SOURCE_DEFAULT})
            out.append({"name": key, "value": value, "read_only": False, "config_source": source,
                        "is_default": source == kd.SOURCE_DEFAULT, "is_sensitive": False, "synonyms": syn,
                        "config_type": ctype, "documentation": None})
        return out

    def _broker_configs(self, keys: list[str] | None, synonyms: bool) -> list[dict[str, Any]]:
        out = []
        for key, (default, ctype) in kd.BROKER_DEFAULTS.items():
            if keys and key not in keys:
                continue
            static = key in self.c.broker_config
            sensitive = key in kd.SENSITIVE_BROKER_CONFIGS
            value = None if sensitive else (self.c.broker_config[key] if static else default)
            source = kd.SOURCE_STATIC_BROKER if static else kd.SOURCE_DEFAULT
            syn = [{"name": key, "value": value, "source": source}] if synonyms else []
            out.append({"name": key, "value": value, "read_only": True, "config_source": source,
                        "is_default": not static, "is_sensitive": sensitive, "synonyms": syn,
                        "config_type": ctype, "documentation": None})
        return out

    # ------------------------------------------------------------------ groups
    def _coordinator_error(self, node_id: int, key: str, key_type: int) -> int:
        """NOT_COORDINATOR unless this broker leads the key's internal partition."""
        injected = self.c.coordinator_errors.get(node_id)
        if injected:
            return injected
        if key_type == 0 and self.c.loading_offsets:
            held_in = kd.coordinator_partition(key, len(self.c.topics[CONSUMER_OFFSETS].partitions))
            if held_in in self.c.loading_offsets:
                return COORDINATOR_LOAD_IN_PROGRESS
        coord = self.c.coordinator_for(key, key_type)
        if coord < 0:
            return COORDINATOR_NOT_AVAILABLE
        return NONE if coord == node_id else NOT_COORDINATOR

    def _groups_led_by(self, node_id: int) -> list[Group]:
        return [g for g in self.c.groups.values()
                if not g.deleted and self.c.coordinator_for(g.group_id, 0) == node_id]

    def list_groups(self, node_id: int, req: Request) -> Mapping[str, Any]:
        states = set(getattr(req.body, "states_filter", None) or [])
        types = {t.lower() for t in (getattr(req.body, "types_filter", None) or [])}
        groups = []
        if types and "classic" not in types:
            return {"throttle_time_ms": 0, "error_code": NONE, "groups": []}
        for g in self._groups_led_by(node_id):
            if states and g.state not in states:
                continue
            groups.append({"group_id": g.group_id, "protocol_type": "consumer", "group_state": g.state,
                           "group_type": "classic"})
        return {"throttle_time_ms": 0, "error_code": NONE, "groups": groups}

    def describe_groups(self, node_id: int, req: Request) -> Mapping[str, Any]:
        out = []
        for gid in req.body.groups:
            err = self._coordinator_error(node_id, gid, 0)
            g = self.c.groups.get(gid)
            if err:
                out.append({"error_code": err, "group_id": gid, "group_state": "", "protocol_type": "",
                            "protocol_data": "", "members": []})
                continue
            if g is None or g.deleted:
                code = GROUP_ID_NOT_FOUND if req.api_version >= 6 else NONE
                out.append({"error_code": code, "error_message": None, "group_id": gid, "group_state": "Dead",
                            "protocol_type": "", "protocol_data": "", "members": []})
                continue
            members = [{
                "member_id": member_id(g, i), "group_instance_id": None,
                "client_id": client_id(g, i), "client_host": client_host(i),
                "member_metadata": ConsumerProtocolSubscription(topics=g.reads, user_data=b"", version=0).encode(),
                "member_assignment": ConsumerProtocolAssignment(assigned_partitions=[
                    ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps) for t, ps in held.items()],
                    user_data=b"", version=0).encode(),
            } for i, held in enumerate(self.c.assignment(g))]
            out.append({"error_code": NONE, "error_message": None, "group_id": gid, "group_state": g.state,
                        "protocol_type": "consumer", "protocol_data": "range" if g.members else "",
                        "members": members})
        return {"throttle_time_ms": 0, "groups": out}

    def find_coordinator(self, node_id: int, req: Request) -> Mapping[str, Any]:
        body = req.body
        key_type = getattr(body, "key_type", 0) or 0
        if req.api_version >= 4:
            coords = [self._coordinator_entry(k, key_type) for k in body.coordinator_keys]
            return {"throttle_time_ms": 0, "coordinators": coords}
        entry = self._coordinator_entry(body.key, key_type)
        return {"throttle_time_ms": 0, "error_code": entry["error_code"], "error_message": None,
                "node_id": entry["node_id"], "host": entry["host"], "port": entry["port"]}

    def _coordinator_entry(self, key: str, key_type: int) -> dict[str, Any]:
        node = self.c.coordinator_for(key, key_type)
        if node < 0:
            return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": COORDINATOR_NOT_AVAILABLE,
                    "error_message": "The coordinator is not available."}
        b = self.c.brokers[node]
        return {"key": key, "node_id": node, "host": b.host, "port": b.port, "error_code": NONE,
                "error_message": None}

    def offset_fetch(self, node_id: int, req: Request) -> Mapping[str, Any]:
        body = req.body
        if req.api_version >= 8:
            groups = []
            for rg in body.groups:
                topics_req: list[TopicAsk] | None = None
                if rg.topics is not None:
                    topics_req = []
                    for t in rg.topics:
                        name = getattr(t, "name", None)
                        if req.api_version >= 10:
                            name = self.c.topic_ids.get(t.topic_id)
                        topics_req.append((name, list(t.partition_indexes)))
                err, topics = self._fetch_group_offsets(node_id, rg.group_id, topics_req, req.api_version)
                groups.append({"group_id": rg.group_id, "topics": topics, "error_code": err})
            return {"throttle_time_ms": 0, "groups": groups}
        asked: list[TopicAsk] | None = None
        if body.topics is not None:
            asked = [(t.name, list(t.partition_indexes)) for t in body.topics]
        err, topics = self._fetch_group_offsets(node_id, body.group_id, asked, req.api_version)
        return {"throttle_time_ms": 0, "topics": topics, "error_code": err}

    def _fetch_group_offsets(self, node_id: int, group_id: str, topics_req: list[TopicAsk] | None,
                             version: int) -> tuple[int, list[dict[str, Any]]]:
        """Committed offsets for the (topic name, partitions) asked; None asks for every committed one."""
        err = self._coordinator_error(node_id, group_id, 0)
        if err:
            return err, []
        g = self.c.groups.get(group_id)
        committed = {} if g is None or g.deleted else g.committed
        by_topic: dict[str, dict[int, int]] = {}
        for (topic, idx), off in committed.items():
            by_topic.setdefault(topic, {})[idx] = off
        if topics_req is None:
            topics_req = [(t, sorted(parts)) for t, parts in by_topic.items()]
        topics = []
        for name, parts in topics_req:
            t = self.c.topics.get(name) if name else None
            plist = []
            for idx in parts:
                off = by_topic.get(name, {}).get(idx, -1) if name else -1
                p = self.c.partition(name, idx) if name else None
                plist.append({"partition_index": idx, "committed_offset": off,
                              "committed_leader_epoch": p.leader_epoch if (p and off >= 0) else -1,
                              "metadata": "", "error_code": NONE if p else UNKNOWN_TOPIC_OR_PARTITION})
            entry: dict[str, Any] = {"partitions": plist}
            if version >= 10:
                entry["topic_id"] = t.topic_id if t else None
            else:
                entry["name"] = name
            topics.append(entry)
        return NONE, topics

    # ------------------------------------------------------------------ offsets
    def list_offsets(self, node_id: int, req: Request) -> Mapping[str, Any]:
        body = req.body
        read_committed = (getattr(body, "isolation_level", 0) or 0) == 1
        topics = []
        for t in body.topics:
            known = self.c.topics.get(t.name)
            parts = known.partitions if known is not None else []
            topics.append({"name": t.name, "partitions": [
                self._offset_for(node_id, parts[rp.partition_index] if 0 <= rp.partition_index < len(parts) else None,
                                 rp.partition_index, rp.timestamp, read_committed)
                for rp in t.partitions]})
        return {"throttle_time_ms": 0, "topics": topics}

    def offset_for_leader_epoch(self, node_id: int, req: Request) -> Mapping[str, Any]:
        """Where an epoch ends in this leader's log (KIP-101; asked by consumers for truncation, KIP-320)."""
        topics = []
        for t in req.body.topics:
            known = self.c.topics.get(t.topic)
            parts = known.partitions if known is not None else []
            out = []
            for rp in t.partitions:
                p = parts[rp.partition] if 0 <= rp.partition < len(parts) else None
                current = getattr(rp, "current_leader_epoch", -1)
                if p is None or not p.online or p.leader != node_id:
                    code = (UNKNOWN_TOPIC_OR_PARTITION if p is None else
                            LEADER_NOT_AVAILABLE if not p.online else NOT_LEADER_OR_FOLLOWER)
                    out.append({"error_code": code, "partition": rp.partition, "leader_epoch": -1, "end_offset": -1})
                elif current >= 0 and current != p.leader_epoch:
                    code = FENCED_LEADER_EPOCH if current < p.leader_epoch else UNKNOWN_LEADER_EPOCH
                    out.append({"error_code": code, "partition": rp.partition, "leader_epoch": -1, "end_offset": -1})
                else:
                    epoch, end = p.epoch_end(rp.leader_epoch)
                    out.append({"error_code": NONE, "partition": rp.partition, "leader_epoch": epoch,
                                "end_offset": end})
            topics.append({"topic": t.topic, "partitions": out})
        return {"throttle_time_ms": 0, "topics": topics}

    def _offset_for(self, node_id: int, p: Partition | None, idx: int, ts: int,
                    read_committed: bool) -> dict[str, Any]:
        """One partition of a ListOffsets answer (`p` None: no such partition)."""
        if p is None or not p.online or p.leader != node_id:
            code = (UNKNOWN_TOPIC_OR_PARTITION if p is None else
                    LEADER_NOT_AVAILABLE if not p.online else NOT_LEADER_OR_FOLLOWER)
            return {"partition_index": idx, "timestamp": -1, "offset": -1, "leader_epoch": -1, "error_code": code}
        if ts == LIST_OFFSETS_LATEST:
            hw = p.visible_hwm(self.c.now)  # lower than the true one during a KIP-207 dip
            off = min(p.lso, hw) if read_committed else hw
        elif ts == LIST_OFFSETS_EARLIEST or ts == -4:
            off = p.log_start
        elif ts == LIST_OFFSETS_MAX_TIMESTAMP:
            off = max(p.hwm - 1, p.log_start)
        elif ts >= 0:
            off = self._offset_at_time(p, ts / 1000.0)
        else:
            off = p.hwm
        return {"partition_index": idx, "timestamp": ts if ts >= 0 else -1, "offset": off,
                "leader_epoch": p.leader_epoch, "error_code": NONE}

    def _offset_at_time(self, p: Partition, when: float) -> int:
        """Earliest offset whose timestamp is >= `when`, from the segment roll points."""
        if when > self.c.now:
            return p.hwm
        prev_t, prev_o = None, p.log_start
        for t, o in p.segments:
            if t >= when:
                if prev_t is None:
                    return max(o, p.log_start)
                frac = (when - prev_t) / max(t - prev_t, 1e-9)
                return max(p.log_start, int(prev_o + frac * (o - prev_o)))
            prev_t, prev_o = t, o
        if prev_t is None:
            return p.log_start
        frac = (when - prev_t) / max(self.c.now - prev_t, 1e-9)
        return min(p.hwm, max(p.log_start, int(prev_o + frac * (p.hwm - prev_o))))

    # ------------------------------------------------------------------ transactions
    def list_transactions(self, node_id: int, req: Request) -> Mapping[str, Any]:
        body = req.body
        states = set(body.state_filters or [])
        pids = set(body.producer_id_filters or [])
        min_duration = getattr(body, "duration_filter", -1)
        known = {"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
                 "Dead", "PrepareEpochFence"}
        out = []
        for tp in self.c.txn_producers.values():
            if self.c.coordinator_for(tp.transactional_id, 1) != node_id:
                continue
            if states and (tp.reported_state or tp.state) not in states:
                continue
            if pids and tp.producer_id not in pids:
                continue
            if min_duration is not None and min_duration >= 0 and (
                    tp.state != "Ongoing" or (self.c.now - tp.txn_start) * 1000 < min_duration):
                continue
            out.append({"transactional_id": tp.transactional_id, "producer_id": tp.producer_id,
                        "transaction_state": tp.reported_state or tp.state})
        return {"throttle_time_ms": 0, "error_code": NONE,
                "unknown_state_filters": sorted(states - known), "transaction_states": out}

    def describe_transactions(self, node_id: int, req: Request) -> Mapping[str, Any]:
        out = []
        for tid in req.body.transactional_ids:
            err = self._coordinator_error(node_id, tid, 1)
            tp = self.c.txn_producers.get(tid)
            if not err and tp is None:
                err = TRANSACTIONAL_ID_NOT_FOUND
            if err:
                out.append({"error_code": err, "transactional_id": tid, "transaction_state": "",
                            "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                            "producer_epoch": -1, "topics": []})
                continue
            topics: dict[str, list[int]] = {}
            for topic, idx in sorted(tp.partitions):
                topics.setdefault(topic, []).append(idx)
            open_states = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
            start = int(tp.txn_start * 1000) if tp.state in open_states else -1
            out.append({"error_code": NONE, "transactional_id": tid,
                        "transaction_state": tp.reported_state or tp.state,
                        "transaction_timeout_ms": tp.timeout_ms, "transaction_start_time_ms": start,
                        "producer_id": tp.producer_id, "producer_epoch": tp.epoch,
                        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]})
        return {"throttle_time_ms": 0, "transaction_states": out}

    def describe_producers(self, node_id: int, req: Request) -> Mapping[str, Any]:
        topics = []
        for t in req.body.topics:
            parts = []
            for idx in t.partition_indexes:
                p = self.c.partition(t.name, idx)
                if p is None:
                    parts.append({"partition_index": idx, "error_code": UNKNOWN_TOPIC_OR_PARTITION,
                                  "error_message": None, "active_producers": []})
                    continue
                if p.leader != node_id:
                    parts.append({"partition_index": idx, "error_code": NOT_LEADER_OR_FOLLOWER,
                                  "error_message": None, "active_producers": []})
                    continue
                producers = [{"producer_id": e.producer_id, "producer_epoch": e.epoch,
                              "last_sequence": e.last_sequence, "last_timestamp": e.last_timestamp_ms,
                              "coordinator_epoch": e.coordinator_epoch,
                              "current_txn_start_offset": e.txn_start_offset}
                             for e in p.producers.values()]
                parts.append({"partition_index": idx, "error_code": NONE, "error_message": None,
                              "active_producers": producers})
            topics.append({"name": t.name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    # ------------------------------------------------------------------ KRaft
    def describe_quorum(self, node_id: int, req: Request) -> Mapping[str, Any]:
        """A broker forwards DescribeQuorum to the active controller (KafkaApis: forwardToController), and only the
        Raft leader answers it (KafkaRaftClient.handleDescribeQuorumRequest). Without a leader a real cluster
        answers NOT_LEADER_OR_FOLLOWER where the request reaches a controller that is not (or no longer) the
        leader, and nothing in time where the broker knows no controller at all (its forwarding queue waits);
        the sandbox gives the first: the error on the partition, every other field zero, as Kafka 3.3+ does."""
        c = self.c
        if c.quorum_leader not in c.brokers or not c.brokers[c.quorum_leader].process_up:
            part = {"partition_index": 0, "error_code": NOT_LEADER_OR_FOLLOWER, "error_message": NOT_LEADER_MESSAGE,
                    "leader_id": 0, "leader_epoch": 0, "high_watermark": 0, "current_voters": [], "observers": []}
            return {"error_code": NONE, "error_message": None,
                    "topics": [{"topic_name": "__cluster_metadata", "partitions": [part]}], "nodes": []}
        voters = [{"replica_id": v.node_id, "replica_directory_id": None, "log_end_offset": int(v.leo),
                   "last_fetch_timestamp": int(v.last_fetch * 1000),
                   "last_caught_up_timestamp": int(v.last_caught_up * 1000)} for v in c.voters.values()]
        observers = [_observer(b.node_id, c.metadata_hwm, c.now, b.process_up, b.metadata_stopped)
                     for b in c.brokers.values() if b.node_id not in c.voters and not (
                         b.metadata_stopped and c.now - b.metadata_stopped[1] >= KRAFT_OBSERVER_SESSION_S)]
        part = {"partition_index": 0, "error_code": NONE, "error_message": None,
                "leader_id": c.quorum_leader, "leader_epoch": c.quorum_epoch,
                "high_watermark": int(c.metadata_hwm), "current_voters": voters, "observers": observers}
        nodes = [{"node_id": v.node_id, "listeners": [{"name": "CONTROLLER", "host": c.brokers[v.node_id].host,
                                                       "port": c.brokers[v.node_id].port}]}
                 for v in c.voters.values()]
        return {"error_code": NONE, "error_message": None,
                "topics": [{"topic_name": "__cluster_metadata", "partitions": [part]}], "nodes": nodes}

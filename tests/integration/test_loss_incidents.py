"""The three scripted loss incidents of the sandbox against what the collector records, over TCP.

Ground truth is the sandbox's own line for each lost leader ("leader lost scripted-0: ... N committed messages
lost ..., M acks=1-only messages lost above it") and for the dip ("leader change scripted-2: ... 0 messages
lost"). One partition each, on a topic with min.insync.replicas 2, so once the stalled followers leave the ISR
the leader alone may not append and the high watermark the collector sees is the one the model loses from:

* ``unclean_election`` (scripted-0): the ledger's truncation is the model's committed loss, exactly, within
  2 polls of it, with the unclean election beside it and the group that had read the lost messages;
* ``acks1_leader_loss`` (scripted-1): the model loses an acks=1 tail that no high watermark ever held; the
  ledger says nothing, because nothing a monitor can read shows it (docs/loss-ledger.md says so);
* ``leader_change_hw_dip`` (scripted-2): the collector sees the high watermark go back for a few seconds after
  a clean leader change and records nothing;
* ``topic_recreate`` (reborn): the topic is deleted and created again under its name, a new log from offset 0
  and leader epoch 0; at its first leader change the old epoch 0 ends far below what the old topic had
  committed. The ledger records nothing: the collector tells the two logs apart by the topic id.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from collectors.model.records import LossRecord
from collectors.runtime.poller import ClusterPoller, PollResult
from tests.support.monitor import make_poller, poll_until
from tests.support.sandbox import running_sandbox, scenario

pytestmark = pytest.mark.integration

CLUSTER = {
    "brokers": 3,
    "broker_config": {"min.insync.replicas": "1", "replica.lag.time.max.ms": "10000"},
    "topics": [{"name": "scripted", "partitions": 3, "replication_factor": 3, "produce_rate": 30,
                "configs": {"min.insync.replicas": "2"}},
               {"name": "reborn", "partitions": 1, "replication_factor": 3, "produce_rate": 40}],
    "groups": [{"group_id": "billing", "topics": ["scripted"], "commit_interval_s": 1},
               {"group_id": "audit", "topics": ["reborn"], "commit_interval_s": 1}],
}
INCIDENTS = [
    {"type": "unclean_election", "at": 20, "duration": 20, "topic": "scripted", "partition": 0},
    {"type": "acks1_leader_loss", "at": 50, "duration": 4, "topic": "scripted", "partition": 1},
    {"type": "leader_change_hw_dip", "at": 62, "duration": 9, "topic": "scripted", "partition": 2,
     "messages": 100},
    {"type": "topic_recreate", "at": 40, "topic": "reborn"},
    {"type": "leader_change_hw_dip", "at": 55, "duration": 2, "topic": "reborn", "partition": 0, "messages": 1},
]
END_AT = 80.0  # simulated seconds after the start: everything has happened and been polled
LOST = re.compile(r"leader lost scripted-(\d): .* ([\d,]+) committed messages? lost .* ([\d,]+) acks=1-only")
DIP = re.compile(r"leader change scripted-2: .*reads ([\d,]+), ([\d,]+) below .* 0 messages lost")
REBORN = re.compile(r"topic recreated reborn: id (\S+) -> (\S+); .* the old ([\d,]+) messages deleted on purpose; "
                    r"0 messages lost")


@dataclass
class Run:
    events: list[tuple[float, str]]  # the sandbox's event log: (simulated seconds since its start, line)
    polls: list[tuple[float, PollResult]] = field(default_factory=list)  # (simulated seconds since start, poll)
    watches: dict = field(default_factory=dict)  # the collector's epoch watches at the end

    @property
    def losses(self) -> list[LossRecord]:
        return [x for _, r in self.polls for x in r.snapshot.losses]

    def hws(self, partition: int, topic: str = "scripted") -> list[int]:
        return [p.high_watermark for _, r in self.polls for p in r.snapshot.partitions
                if (p.topic, p.partition) == (topic, partition) and p.high_watermark is not None]


@pytest.fixture(scope="module")
def run() -> Iterator[Run]:
    with running_sandbox(scenario(CLUSTER, INCIDENTS), speed=10.0) as sb:
        t0 = sb.cluster.start
        sb.advance_to(t0 + 10)
        poller: ClusterPoller = make_poller(sb)
        out = Run([])
        try:
            poll_until(poller, sb, lambda r: out.polls.append((r.snapshot.time - t0, r)) or
                       r.snapshot.time >= t0 + END_AT, timeout=60, every=0.2)
            out.watches = dict(poller.state.epoch_watch)
        finally:
            poller.close()
        out.events = [(when - t0, what) for _, when, what in sb.call(lambda c: list(c.events))]
        yield out


def _truth(run: Run, partition: int) -> tuple[float, int, int]:
    when, m = next((w, m) for w, what in run.events if (m := LOST.search(what)) and int(m.group(1)) == partition)
    return when, int(m.group(2).replace(",", "")), int(m.group(3).replace(",", ""))


def test_unclean_election_is_in_the_ledger_with_the_models_loss_within_two_polls(run: Run) -> None:
    when, committed, tail = _truth(run, 0)
    assert committed > 0 and tail == 0  # the followers had left the ISR: what was lost had been committed
    truncations = [x for x in run.losses if x.kind == "truncation"]
    assert [(x.subject, x.messages) for x in truncations] == [("scripted-0", committed)]
    assert [x.subject for x in run.losses if x.kind == "unclean_election"] == ["scripted-0"]
    after = [r for t, r in run.polls if t >= when]
    first = next(i for i, r in enumerate(after) if any(x.kind == "truncation" for x in r.snapshot.losses))
    assert first < 2, f"reported at the {first + 1}th poll after the truncation"
    beyond = [x for x in run.losses if x.kind == "offset_beyond_log_end"]
    assert [(x.group_id, x.subject) for x in beyond] == [("billing", "scripted-0")]
    assert 0 < (beyond[0].messages or 0) <= committed


def test_acks1_tail_is_lost_in_the_model_and_nothing_a_monitor_reads_shows_it(run: Run) -> None:
    _, committed, tail = _truth(run, 1)
    assert committed == 0 and tail > 0  # real loss, but only of messages above the high watermark
    assert not [x for x in run.losses if x.subject == "scripted-1"]
    hws = run.hws(1)
    assert hws == sorted(hws)  # the high watermark never went back: there is nothing to see


def test_high_watermark_dip_after_a_clean_leader_change_is_seen_and_not_reported(run: Run) -> None:
    m = next(m for _, what in run.events if (m := DIP.search(what)))
    floor = int(m.group(1).replace(",", ""))
    hws = run.hws(2)
    dipped = [b for a, b in itertools.pairwise(hws) if b < a]
    assert dipped and floor in dipped  # the collector did see the high watermark go back...
    assert not [x for x in run.losses if x.subject == "scripted-2"]  # ...and records nothing: no loss


def test_a_topic_deleted_and_created_again_is_a_new_log_and_nothing_is_recorded(run: Run) -> None:
    m = next(m for _, what in run.events if (m := REBORN.search(what)))
    new_id, deleted = m.group(2), int(m.group(3).replace(",", ""))
    hws = run.hws(0, "reborn")
    assert deleted > 0 and max(hws[:hws.index(min(hws))]) >= deleted * 0.8  # the collector saw the old log...
    assert min(hws) < deleted / 2  # ...and the new one, far below it
    w = run.watches[("reborn", 0)]
    assert (w.epoch, w.topic_id) == (1, new_id)  # the new log's first leader change was asked about and settled
    assert not [x for x in run.losses if (x.subject or "").startswith("reborn") or x.group_id == "audit"]

"""The topic id the adapter keeps per partition: Metadata's id as text, None where the broker has none."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from collectors.sources.metadata_epochs import topic_id as _topic_id


def test_an_id_is_kept_as_text_and_a_missing_or_all_zero_one_is_none() -> None:
    tid = uuid.uuid5(uuid.NAMESPACE_URL, "c/orders")
    assert _topic_id(SimpleNamespace(topic_id=tid)) == str(tid)
    assert _topic_id(SimpleNamespace(topic_id=uuid.UUID(int=0))) is None  # ZooKeeper-mode brokers before 2.8
    assert _topic_id(SimpleNamespace(topic_id=None)) is None
    assert _topic_id(SimpleNamespace()) is None  # Metadata before v10

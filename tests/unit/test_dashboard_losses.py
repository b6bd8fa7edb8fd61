"""dashboard.views.losses: the week's ledger in words, and the coverage behind a zero."""

from __future__ import annotations

import pandas as pd

from dashboard.views import losses as lv

T = 1_800_000_000.0


def test_coverage_counts_polls_and_lists_gaps_at_the_edges_too() -> None:
    c = lv.coverage([T + 60 * k for k in range(10)] + [T + 3_000], T, T + 3_600, 60.0)
    assert (c.polls, c.expected) == (11, 60)
    assert c.gaps == [(T + 540, T + 3_000), (T + 3_000, T + 3_600)]
    full = lv.coverage([T + 60 * k for k in range(60)], T, T + 3_600, 60.0)
    assert full.share == 1.0 and full.gaps == []
    assert "100%" in lv.coverage_text(full, 60.0) and "gap" not in lv.coverage_text(full, 60.0)
    assert "2 gaps (longest 41m 00s" in lv.coverage_text(c, 60.0)


def test_headline_counts_messages_by_kind_and_names_who() -> None:
    events = pd.DataFrame([
        {"time": T, "cluster": "c", "kind": "truncation", "topic": "orders", "partition": 3, "group_id": None,
         "messages": 1_240, "evidence": "..."},
        {"time": T, "cluster": "c", "kind": "unclean_election", "topic": "orders", "partition": 3,
         "group_id": None, "messages": None, "evidence": "..."},
        {"time": T + 5, "cluster": "c", "kind": "retention_skipped", "topic": "clicks", "partition": 0,
         "group_id": "analytics", "messages": 300, "evidence": "..."},
        {"time": T + 9, "cluster": "c", "kind": "retention_skipped", "topic": "clicks", "partition": 1,
         "group_id": "analytics", "messages": 20, "evidence": "..."}])
    assert lv.headline(events) == ("1,240 messages truncated after a leader change (orders); 320 messages deleted "
                                   "unread by retention (analytics); 1 unclean election")
    rows = lv.ledger_frame(events)
    assert list(rows["subject"]) == ["clicks-1", "clicks-0", "orders-3", "orders-3"]  # newest first
    assert rows["messages"].tolist()[:2] == [20, 300] and rows["group"].iloc[0] == "analytics"
    assert lv.headline(pd.DataFrame()) == "" and list(lv.ledger_frame(pd.DataFrame()).columns) == lv.LEDGER_COLUMNS


def test_a_leader_changes_loss_recorded_again_is_counted_once() -> None:
    """A collector killed between its ledger write and its checkpoint recorded the same truncation, and the group
    that read past it, again after its restart: the panel counts each once, from its first record, as the weekly
    report does. A retention skip recorded twice is two (each is the messages deleted since the last)."""
    def loss(t: float, kind: str, cut: int | None, n: int | None, group: str | None = None, before: int = 5,
             after: int = 7) -> dict[str, object]:
        return {"time": T + t, "cluster": "c", "kind": kind, "topic": "orders", "partition": 3, "group_id": group,
                "epoch_before": before if kind != "retention_skipped" else None,
                "epoch_after": after if kind != "retention_skipped" else None, "offset": cut, "messages": n,
                "evidence": f"at {t}"}

    events = pd.DataFrame([
        loss(0, "truncation", 48_800, 1_200), loss(0, "unclean_election", None, None),
        loss(0, "offset_beyond_log_end", 48_800, 90, "billing"),
        loss(60, "truncation", 48_800, 1_200, after=8), loss(60, "unclean_election", None, None),  # again
        loss(60, "offset_beyond_log_end", 48_800, 90, "billing"),
        loss(70, "offset_beyond_log_end", 48_800, 40, "audit"),  # another group
        loss(900, "truncation", 49_500, 300, before=7, after=9),  # the next epoch's cut: another loss
        loss(100, "retention_skipped", None, 30, "analytics"), loss(160, "retention_skipped", None, 30, "analytics")])
    once = lv.first_records(events)
    assert sorted(once["evidence"]) == sorted(["at 0", "at 0", "at 0", "at 70", "at 900", "at 100", "at 160"])
    assert lv.headline(once) == ("1,500 messages truncated after a leader change (orders); 60 messages deleted "
                                 "unread by retention (analytics); 1 unclean election; 2 reads past a truncation")
    older = events.drop(columns=["epoch_before", "epoch_after", "offset"])  # a frame without them: as it is
    assert len(lv.first_records(older)) == len(older)
    assert lv.first_records(pd.DataFrame()).empty
    # the panel reads the week before as context: a loss first recorded before its window is not counted again
    assert list(lv.first_records(events, since=T + 30)["evidence"]) == ["at 70", "at 100", "at 160", "at 900"]
    assert list(lv.first_records(events[events["time"] >= T + 30])["evidence"]) == [
        "at 60", "at 60", "at 60", "at 70", "at 100", "at 160", "at 900"]  # without it, counted from the repeats

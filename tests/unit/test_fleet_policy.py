"""Fleet policy: filters, per-group and per-topic policy, and groups nobody runs (pure parts and the snapshot)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from collectors.alerting.evaluation import judge
from collectors.alerting.thresholds import Thresholds
from collectors.config import MonitorConfig
from collectors.model.activity import GroupLife, classify
from collectors.model.observations import KafkaObservation, PartitionMeta
from collectors.model.patterns import NameFilter
from collectors.model.policy import Policies, PolicyRule, in_idle_window, parse_window
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState
from collectors.sources.settings import FiltersConfig

T0 = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC
DAY = 86_400.0


# ----------------------------------------------------------------------------- filters
def test_filter_is_unanchored_like_the_peers_and_deny_wins() -> None:
    f = NameFilter(allow=["^payments", "orders$"], deny=["-dlq"])
    assert f("payments-eu") and f("eu-orders") and not f("eu-orders-x")
    assert not f("payments-dlq")  # allowed, but denied
    assert f.why_not("payments-dlq") == "denied by '-dlq'"
    assert "matches no allow pattern" in (f.why_not("billing") or "")
    assert NameFilter()("anything") and NameFilter().passes_everything


def test_internal_topics_follow_their_own_switch_not_the_allow_list() -> None:
    watch = FiltersConfig.model_validate({"topics": {"allow": ["^orders$"], "deny": ["^__transaction"]}}).topic_filter()
    assert watch is not None
    assert watch("orders", False) and not watch("payments", False)
    assert watch("__consumer_offsets", True)  # not in the allow list, watched all the same
    assert not watch("__transaction_state", True)  # a deny pattern still leaves it out
    off = FiltersConfig.model_validate({"internal_topics": False}).topic_filter()
    assert off is not None and not off("__consumer_offsets", True) and off("orders", False)
    assert FiltersConfig().topic_filter() is None and FiltersConfig().group_filter() is None


@pytest.mark.parametrize(("bad", "message"), [
    ({"groups": {"deny": ["(unclosed"]}}, "not a regular expression"),
    ({"groups": {"allow": [""]}}, "empty pattern"),
    ({"topics": {"alow": ["x"]}}, "Extra inputs"),
])
def test_bad_filters_are_rejected_with_the_reason(bad: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        FiltersConfig.model_validate(bad)


# ----------------------------------------------------------------------------- policy
def test_first_matching_rule_wins_and_cluster_scopes_it() -> None:
    p = Policies([PolicyRule(group="^pay", cluster="^prod", team="payments", lag_seconds_slo=10),
                  PolicyRule(group="^pay", team="payments-dev", lag_seconds_slo=60),
                  PolicyRule(topic="^dev\\.", max_severity="info", team="platform")])
    assert (p.for_group("prod-eu", "payments").rule, p.for_group("prod-eu", "payments").lag_seconds_slo) == (
        "policies[0]", 10)
    assert p.for_group("staging", "payments").team == "payments-dev"
    assert p.for_group("prod-eu", "billing").rule is None  # no rule: the thresholds decide
    assert p.for_topic("prod-eu", "dev.orders").max_severity == "info"
    assert p.for_topic("prod-eu", "payments").rule is None  # group rules never match topics
    assert p.for_group("prod-eu", "payments") is p.for_group("prod-eu", "payments")  # remembered


@pytest.mark.parametrize(("rule", "message"), [
    ({"lag_seconds_slo": 10}, "exactly one of 'group' or 'topic'"),
    ({"group": "a", "topic": "b"}, "exactly one of 'group' or 'topic'"),
    ({"topic": "a", "lag_seconds_slo": 10}, "apply to consumer groups"),
    ({"group": "a", "idle_windows": ["25:00-01:00"]}, "HH:MM-HH:MM"),
    ({"group": "a", "max_severity": "page"}, "critical"),
    ({"group": "[", "team": "x"}, "not a regular expression"),
])
def test_bad_policy_rules_say_what_is_wrong(rule: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        PolicyRule.model_validate(rule)


def test_a_bad_policy_is_reported_with_its_line(tmp_path: object) -> None:
    from pathlib import Path

    from collectors.config import ConfigError, load_config

    path = Path(str(tmp_path)) / "c.yaml"
    path.write_text("clusters:\n  - name: a\n    bootstrap_servers: x:1\npolicies:\n  - group: ok\n"
                    "  - group: '(bad'\n    team: x\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert "c.yaml:6: policies[1].group: not a regular expression" in str(info.value)


def test_idle_windows_wrap_midnight() -> None:
    assert parse_window("22:00-06:00") == (1320, 360)
    night = [parse_window("22:00-06:00")]
    midnight = 1_800_000_000 - 1_800_000_000 % 86_400  # 00:00 UTC
    assert in_idle_window(night, midnight + 3600) and in_idle_window(night, midnight + 23 * 3600)
    assert not in_idle_window(night, midnight + 12 * 3600)


def test_policy_min_points_may_not_exceed_the_window_kept() -> None:
    with pytest.raises(ValidationError, match="lag_window_points"):
        MonitorConfig.model_validate({"clusters": [{"name": "a", "bootstrap_servers": "x:1"}],
                                      "policies": [{"group": "a", "lag_min_points": 50}]})


# ----------------------------------------------------------------------------- activity
def test_activity_pages_on_what_was_seen_happen() -> None:
    life, a = classify(None, members=0, commit_moved=False, now=T0, abandoned_after_s=7 * DAY)
    assert a == "inactive" and life.last_active is None  # found Empty: not news
    life, a = classify(life, 0, False, T0 + 6 * DAY, 7 * DAY)
    assert a == "inactive"
    life, a = classify(life, 0, False, T0 + 7 * DAY, 7 * DAY)
    assert a == "abandoned"
    life, a = classify(life, 2, False, T0 + 8 * DAY, 7 * DAY)
    assert a == "active" and life.last_active == T0 + 8 * DAY  # it came back
    life, a = classify(life, 0, False, T0 + 8 * DAY + 600, 7 * DAY)
    assert a == "active"  # seen consuming, then stopped: judged (STOP pages)
    _, a = classify(GroupLife(T0, None), 0, True, T0 + 60, 7 * DAY)
    assert a == "active"  # a commit that moves without members (an offset reset) is someone acting


# ----------------------------------------------------------------------------- in the snapshot and rules
def observation(now: float, groups: dict[str, tuple[int, int]], hw: int) -> KafkaObservation:
    """One topic `orders` with one partition; `groups`: id -> (members, committed offset)."""
    obs = KafkaObservation(time=now)
    obs.brokers = [(1, "b1", 9092, None)]
    obs.controller_id = 1
    obs.partitions = [PartitionMeta("orders", 0, 1, 1, [1], [1], [])]
    obs.high_watermark[("orders", 0)] = hw
    obs.log_start[("orders", 0)] = 0
    for gid, (members, committed) in groups.items():
        obs.groups[gid] = {"state": "Stable" if members else "Empty", "members": members, "protocol_type": "consumer"}
        obs.commits[gid] = {("orders", 0): committed}
    return obs


def test_abandoned_and_left_behind_groups_never_alert_but_a_stopped_consumer_still_pages() -> None:
    th = Thresholds(consumer_stop_after_s=60, lag_seconds_slo=30)
    st = ClusterState()
    alerts: list[set[tuple[str, str, str]]] = []
    for k in range(12):
        now = T0 + 30 * k
        running = k < 4  # 'worker' consumes for two minutes, then its members leave
        groups = {"old-etl": (0, 1_000), "console-consumer-42": (0, 5),
                  "worker": (2 if running else 0, 100 * k if running else 300)}
        snap = build_snapshot("c", observation(now, groups, 24_000 + 100 * k), None, st, th, now)
        alerts.append({(a.rule, a.subject, a.severity) for a in judge(snap, st, th, now)})
    by_id = {g.group_id: g for g in snap.groups}
    assert by_id["old-etl"].status == "INACTIVE" and by_id["old-etl"].activity == "inactive"
    assert by_id["console-consumer-42"].status == "INACTIVE"
    assert all(gp.status == "INACTIVE" and "first seen" in (gp.status_reason or "")
               for gp in snap.group_partitions if gp.group_id == "old-etl")
    assert not any(subject in ("old-etl", "console-consumer-42") for poll in alerts for _, subject, _ in poll)
    assert by_id["worker"].status == "ERR" and ("consumer_lag_status", "worker", "critical") in alerts[-1]
    gp = next(gp for gp in snap.group_partitions if gp.group_id == "worker")
    assert gp.status == "STOP" and "no members" in (gp.status_reason or "")


def test_policy_sets_the_slo_caps_the_severity_labels_the_team_and_lets_batch_jobs_idle() -> None:
    th = Thresholds(consumer_stop_after_s=60, lag_seconds_slo=3600)
    policies = Policies([PolicyRule(group="^pay", lag_seconds_slo=10, team="payments"),
                         PolicyRule(group="^report", max_severity="warning", team="bi"),
                         PolicyRule(group="^hourly", idle_max_s=4000)])
    st = ClusterState()
    for k in range(12):
        now = T0 + 30 * k
        moving = k < 3
        groups = {g: (1, 100 * k if moving else 200) for g in ("payments", "reporting", "hourly-rollup")}
        snap = build_snapshot("c", observation(now, groups, 1_000 + 100 * k), None, st, th, now, policies)
        fired = {(a.rule, a.subject): a for a in judge(snap, st, th, now)}
    by_id = {g.group_id: g for g in snap.groups}
    assert (by_id["payments"].team, by_id["payments"].policy, by_id["payments"].lag_seconds_slo) == (
        "payments", "policies[0]", 10)
    assert by_id["reporting"].lag_seconds_slo == 3600  # no SLO in its rule: the threshold's
    slo = fired[("consumer_lag_seconds", "payments")]
    assert slo.team == "payments" and "(SLO 10s)" in slo.summary
    stall = fired[("consumer_lag_status", "reporting")]
    assert stall.severity == "warning" and stall.team == "bi"  # STALL is critical; the policy caps it
    assert ("consumer_lag_status", "payments") in fired and fired[("consumer_lag_status", "payments")].severity == (
        "critical")
    assert by_id["hourly-rollup"].status == "OK"  # standing still 270 s < idle_max_s 4000: between runs
    assert ("consumer_lag_status", "hourly-rollup") not in fired


def test_idle_window_suppresses_stall_and_lag_seconds_only_inside_it() -> None:
    th = Thresholds(consumer_stop_after_s=60, lag_seconds_slo=30)
    hour = int((T0 % DAY) // 3600)
    window = f"{hour:02d}:00-{(hour + 1) % 24:02d}:00"
    policies = Policies([PolicyRule(group="^nightly", idle_windows=[window])])
    st = ClusterState()
    for k in range(12):
        now = T0 + 30 * k
        snap = build_snapshot("c", observation(now, {"nightly": (1, 100 if k else 0)}, 1_000 + 100 * k), None,
                              st, th, now, policies)
        fired = judge(snap, st, th, now)
    gp = snap.group_partitions[0]
    assert snap.groups[0].idle and gp.status == "OK" and (gp.status_reason or "").startswith("idle by schedule")
    assert not fired


def test_explain_says_what_applies_and_where_it_comes_from(capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from collectors.config.cli import main

    example = Path(__file__).resolve().parents[2] / "collectors" / "config.example.yaml"
    monkeypatch.setenv("KAFKA_PASSWORD", "pw-not-shown")
    lines = example.read_text().splitlines()
    rule_line = next(i + 1 for i, x in enumerate(lines) if x.strip().startswith("- group: '^payments-'"))
    assert main(["explain", str(example), "--group", "payments-eu", "--cluster", "prod-eu-1"]) == 0
    out = capsys.readouterr().out
    assert "group payments-eu: watched" in out
    assert f"lag_seconds_slo: 10.0  (policies[0] (line {rule_line}))" in out
    assert "max_severity: -" in out
    assert main(["explain", str(example), "--group", "console-consumer-1", "--cluster", "prod-eu-1"]) == 0
    out = capsys.readouterr().out
    assert "NOT watched (denied by '^console-consumer-'" in out and "lag_seconds_slo: 300.0  (thresholds)" in out
    assert "pw-not-shown" not in out
    with pytest.raises(SystemExit):
        main(["explain", str(example)])  # neither --group nor --topic


def test_patterns_with_global_flags_still_combine() -> None:
    f = NameFilter(allow=["(?i)^PAY", "^orders$"])
    assert f("payments") and f("orders") and not f("billing")
    p = Policies([PolicyRule(group="(?i)^REPORT", team="bi"), PolicyRule(group="^x", team="x")])
    assert p.for_group("c", "reporting-eu").team == "bi" and p.for_group("c", "other").rule is None


def test_metrics_carry_the_team_and_count_groups_nobody_runs_without_series_of_their_own() -> None:
    from collectors.alerting.lifecycle import AlertTracker
    from collectors.outputs.exporter import SnapshotCollector

    th = Thresholds(consumer_stop_after_s=60, lag_seconds_slo=3600)
    policies = Policies([PolicyRule(group="^pay", lag_seconds_slo=10, team="payments")])
    st, tracker = ClusterState(), AlertTracker()
    for k in range(8):
        now = T0 + 30 * k
        snap = build_snapshot("c", observation(now, {"payments": (1, 100 * k), "old-etl": (0, 5)},
                                               1_000 + 200 * k), None, st, th, now, policies)
        snap.alerts, _, _ = tracker.update("c", judge(snap, st, th, now), now)
    col = SnapshotCollector(clock=lambda: T0 + 300)
    col.update([snap])
    text = col.render_text().decode()
    assert 'kafka_monitor_alert{cluster="c",rule="consumer_lag_seconds",severity="warning",subject="payments",' \
           'team="payments"} 1' in text
    assert 'kafka_consumergroup_info{cluster="c",consumergroup="payments",team="payments",policy="policies[0]"} 1' \
           in text
    assert 'kafka_consumergroup_lag_seconds_slo{cluster="c",consumergroup="payments"} 10' in text
    assert 'kafka_consumergroups{cluster="c",status="INACTIVE"} 1' in text
    assert 'consumergroup="old-etl"' not in text  # counted, never exported one by one


def test_owners_reach_the_snapshot_and_are_metric_labels_only_when_asked() -> None:
    from collectors.model.observations import Owner
    from collectors.outputs.exporter import SnapshotCollector

    obs = observation(T0, {"billing": (1, 10)}, 100)
    obs.group_owners = {"billing": {("orders", 0): Owner(member_id="m-1", client_id="billing-0", host="/10.0.0.7")}}
    snap = build_snapshot("c", obs, None, ClusterState(), Thresholds(), T0)
    gp = snap.group_partitions[0]
    assert (gp.owner_member_id, gp.owner_client_id, gp.owner_host) == ("m-1", "billing-0", "/10.0.0.7")
    plain = SnapshotCollector(clock=lambda: T0, granularity="partition")
    owned = SnapshotCollector(clock=lambda: T0, owner_labels=True, granularity="partition")
    plain.update([snap])
    owned.update([snap])
    assert 'client_id="billing-0"' not in plain.render_text().decode()  # off by default: a series per rebalance
    assert ('kafka_consumergroup_partition_owner{cluster="c",consumergroup="billing",topic="orders",partition="0",'
            'client_id="billing-0",host="/10.0.0.7",member_id="m-1"} 1') in owned.render_text().decode()


def test_a_weekly_job_that_misses_its_run_pages_before_it_counts_as_abandoned() -> None:
    """idle_max_s 8 days for a weekly job: the abandoned clock (7 days) starts counting after its allowed idle, so
    the missed run is a STOP that pages, and only a week after that is the group left to info."""
    th = Thresholds(consumer_stop_after_s=60, group_abandoned_after_s=7 * DAY)
    policies = Policies([PolicyRule(group="^weekly", idle_max_s=8 * DAY)])
    st = ClusterState()
    seen: dict[float, tuple[str, str, set[str]]] = {}
    for k, now in enumerate([T0, T0 + 30, T0 + 60, T0 + 7.5 * DAY, T0 + 8.5 * DAY, T0 + 14 * DAY,
                             T0 + 15.1 * DAY]):
        groups = {"weekly-report": (1, 100 * k) if k < 3 else (0, 200)}
        snap = build_snapshot("c", observation(now, groups, 10_000 + k), None, st, th, now, policies)
        fired = {a.rule for a in judge(snap, st, th, now) if a.subject == "weekly-report"}
        seen[now] = (snap.groups[0].activity, snap.groups[0].status, fired)
    assert seen[T0 + 7.5 * DAY][:2] == ("active", "OK")  # between runs
    assert seen[T0 + 8.5 * DAY][:2] == ("active", "ERR") and "consumer_lag_status" in seen[T0 + 8.5 * DAY][2]
    assert seen[T0 + 14 * DAY][0] == "active"
    assert seen[T0 + 15.1 * DAY][:2] == ("abandoned", "ABANDONED") and not seen[T0 + 15.1 * DAY][2]

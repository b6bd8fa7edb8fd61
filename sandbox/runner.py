"""Runs a sandbox: the model, one listener per broker, the incident timeline, and ZooKeeper.

The model and the listeners share one asyncio loop on a background thread, so
the CLI, the demo and the tests drive a sandbox the same way: start it, read
its bootstrap servers, and reach into the model only through `call`, which
runs on the loop and therefore sees a consistent state.

With `cluster.security` set, start() also makes a throwaway CA and server
certificate (TLS protocols; `ca_file` is the CA clients must trust) and the
listeners demand SASL authentication (SASL protocols); `client_settings` gives
the librdkafka settings a client needs to get in.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from sandbox import incidents
from sandbox.auth import SaslConfig
from sandbox.clock import SimClock
from sandbox.handlers import Handlers
from sandbox.model import Cluster
from sandbox.server import BrokerListener, InFlight
from sandbox.spec import Scenario
from sandbox.timeline import Action, Timeline
from sandbox.tls import TlsMaterial, make_tls_material

if TYPE_CHECKING:  # start() imports them only when ZooKeeper is wanted
    from sandbox.znodes import ZnodeMirror
    from sandbox.zookeeper import ZooKeeperEnsemble

log = logging.getLogger(__name__)
T = TypeVar("T")


class Sandbox:
    def __init__(self, scenario: Scenario, speed: float = 1.0, zookeeper: bool | None = None,
                 tick_s: float = 0.2, host: str = "127.0.0.1", clock: SimClock | None = None) -> None:
        self.scenario = scenario
        self.clock = clock or SimClock(speed)
        self.tick_s = tick_s
        self.host = host
        self.cluster = Cluster(scenario.cluster, self.clock.now(), host)
        self.handlers = Handlers(self.cluster)
        self.security = scenario.cluster.security
        sec = self.security
        sasl = (SaslConfig(sec.sasl_mechanisms, sec.users, sec.scram_iterations,
                           oauth_key=sec.oauth_key.encode() if sec.oauth_key else None, oauth_issuer=sec.oauth_issuer)
                if sec.sasl else None)
        self.in_flight = InFlight()  # requests outstanding across every broker of this sandbox
        self.listeners: dict[int, BrokerListener] = {
            i: BrokerListener(i, self.handlers, host, sasl=sasl, in_flight=self.in_flight)
            for i in self.cluster.brokers}
        self.tls: TlsMaterial | None = None
        self.want_zookeeper = scenario.cluster.mode == "zookeeper" if zookeeper is None else zookeeper
        self.ensemble: ZooKeeperEnsemble | None = None
        self.mirror: ZnodeMirror | None = None
        self.zk_killed: list[int] = []  # ZooKeeper servers a zk_leader_kill incident stopped, to restart at its end
        self.zk_paused: list[int] = []  # and those a zk_follower_pause incident paused, to resume
        self.config_before: dict[tuple[str, str], str | None] = {}  # topic configs an incident set, to restore
        self.timeline = Timeline(scenario.incidents, scenario.repeat_every)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._blocking = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="sandbox-io")
        self._ticks = 0
        self._process_lock = asyncio.Lock()
        self._calls: set[asyncio.Task[None]] = set()  # `call`s running on the loop (a task needs a reference)
        self._zk_write: concurrent.futures.Future[None] | None = None

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> Sandbox:
        """Start ZooKeeper (if wanted), the listeners and the model loop; the simulated clock stands still
        meanwhile, so the scenario's times count from a sandbox that answers. (A ZooKeeper ensemble takes a
        second or two of real time to start: at speed 10 that used to be the first 15-20 simulated seconds of
        the timeline, so an incident scripted at 20 s could happen before a test's first poll.)"""
        hold = not self.clock.paused  # a clock the caller paused stays paused
        if hold:
            self.clock.pause()
        try:
            return self._start()
        finally:
            if hold:
                self.clock.resume()

    def _start(self) -> Sandbox:
        if self.security.tls and self.tls is None:
            self.tls = make_tls_material(self.host)  # raises TlsSetupError naming the fix if openssl is missing
            context = self.tls.server_context()
            for ln in self.listeners.values():
                ln.ssl_context = context
            log.info("sandbox TLS: clients must trust %s", self.tls.ca_file)
        if self.want_zookeeper:
            from sandbox.znodes import ZnodeMirror
            from sandbox.zookeeper import ZooKeeperEnsemble

            self.ensemble = ZooKeeperEnsemble(size=3)
            self.ensemble.start()
            self.mirror = ZnodeMirror(self.ensemble.connect_string)
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._open_listeners())
            except BaseException as e:  # surfaced to start()'s caller
                errors.append(e)
                ready.set()
                return
            ready.set()
            loop.run_until_complete(self._tick_forever())
            loop.run_until_complete(self._close_listeners())
            left = asyncio.all_tasks(loop)  # calls still waiting: cancelled, so none is left pending at close
            for task in left:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.close()

        self._thread = threading.Thread(target=run, name="sandbox-loop", daemon=True)
        self._thread.start()
        ready.wait(30)
        if errors:
            self.stop()
            raise errors[0]
        self._sync_zookeeper_now()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self._blocking.shutdown(wait=False, cancel_futures=True)
        if self.mirror is not None:
            self.mirror.close()
            self.mirror = None
        if self.ensemble is not None:
            self.ensemble.stop()
            self.ensemble = None
        if self.tls is not None:
            self.tls.remove()
            self.tls = None

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------- accessors
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{ln.port}" for ln in self.listeners.values())

    @property
    def ca_file(self) -> Path | None:
        """The PEM CA certificate that signed the listeners' certificate (TLS protocols, while running)."""
        return self.tls.ca_file if self.tls is not None else None

    def client_settings(self, user: str | None = None, mechanism: str | None = None) -> dict[str, str]:
        """librdkafka settings (a monitor cluster's `kafka:` block) that get a client into this sandbox.

        `user` defaults to the first configured user, `mechanism` to the first enabled one. The result holds the
        user's password. For OAUTHBEARER only the mechanism is set: the sasl.oauthbearer.* settings name the
        token endpoint, which the caller runs.
        """
        sec = self.security
        out: dict[str, str] = {"security.protocol": sec.protocol}
        if sec.tls:
            if self.ca_file is None:
                raise RuntimeError("the sandbox is not started: no CA certificate yet")
            out["ssl.ca.location"] = str(self.ca_file)
        if sec.sasl:
            mechanism = mechanism or sec.sasl_mechanisms[0]
            out["sasl.mechanism"] = mechanism
            if mechanism != "OAUTHBEARER":
                name = user if user is not None else next(iter(sec.users))
                out.update({"sasl.username": name, "sasl.password": sec.users[name]})
        return out

    @property
    def zk_connect(self) -> str | None:
        return self.ensemble.connect_string if self.ensemble is not None else None

    def call(self, fn: Callable[[Cluster], T], timeout: float = 10.0) -> T:
        """Run fn(cluster) on the sandbox loop and return its result, once the listeners match the broker processes
        `fn` left. A real broker listens before it registers: restarted here, it was registered at once and listened
        only at the next tick, so a client asking in between was refused by a broker the metadata named. Nothing is
        opened once the sandbox is stopping."""
        if self._loop is None or self._thread is None:
            return fn(self.cluster)
        if self._stopping.is_set():
            raise RuntimeError("the sandbox stopped")
        loop = self._loop
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()

        async def job() -> None:
            try:
                result = fn(self.cluster)
            except BaseException as e:
                fut.set_exception(e)
                return
            try:
                await self._apply_process_state()
            except Exception:  # a port taken meanwhile: the tick retries and logs it; `fn`'s result stands
                log.exception("sandbox listeners not matched to the broker processes")
            fut.set_result(result)

        def stopped(task: asyncio.Task[None]) -> None:
            self._calls.discard(task)
            if not fut.done():  # cancelled: the sandbox stopped before it could finish
                fut.set_exception(RuntimeError("the sandbox stopped"))

        def start() -> None:  # on the loop: no coroutine is made for a loop that never runs it
            if self._stopping.is_set():  # nor once it is winding down (the last tasks are being cancelled)
                fut.set_exception(RuntimeError("the sandbox stopped"))
                return
            task = loop.create_task(job())
            self._calls.add(task)
            task.add_done_callback(stopped)

        loop.call_soon_threadsafe(start)
        return fut.result(timeout)

    def advance_to(self, sim_time: float) -> None:
        """Wait (in real time) until the simulated clock has reached `sim_time` and a tick ran."""
        import time

        while self.clock.now() < sim_time:
            time.sleep(min(0.05, max(0.0, self.clock.real_seconds(sim_time - self.clock.now()))))
        target = self._ticks + 2
        while self._ticks < target:
            time.sleep(0.01)

    def wait_for(self, predicate: Callable[[Cluster], bool], timeout: float = 30.0) -> bool:
        """Poll a predicate over the model (on the loop) until true or `timeout` real seconds pass."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.call(predicate):
                return True
            time.sleep(0.05)
        return False

    # ----------------------------------------------------------------- the loop
    async def _open_listeners(self) -> None:
        for node_id, ln in self.listeners.items():
            await ln.start()
            self.cluster.brokers[node_id].port = ln.port

    async def _close_listeners(self) -> None:
        async with self._process_lock:  # not while a `call` opens one, nor to be opened again by one
            for ln in self.listeners.values():
                await ln.stop()

    async def _tick_forever(self) -> None:
        while not self._stopping.is_set():
            try:
                await self._tick()
            except Exception:
                log.exception("sandbox tick failed")
            await asyncio.sleep(self.tick_s)

    async def _tick(self) -> None:
        now = self.clock.now()
        for action in self.timeline.due(now - self.cluster.start):
            await self._run_incident_action(action)
        self.cluster.advance(now)
        await self._apply_process_state()
        self._push_zookeeper()
        self._ticks += 1

    async def _run_incident_action(self, action: Action) -> None:
        log.info("incident %s: %s", "start" if action.starting else "end", action.spec.type)
        blocking = incidents.apply(self, action.spec, action.starting)
        if blocking is not None:
            await asyncio.get_running_loop().run_in_executor(self._blocking, blocking)

    async def _apply_process_state(self) -> None:
        """Open or close listeners to match broker processes; apply response delays. One at a time: the tick and a
        `call` may both find a listener to open, and opening it twice would bind its port twice."""
        async with self._process_lock:
            if self._stopping.is_set():
                return  # the listeners are closing for good
            for node_id, b in self.cluster.brokers.items():
                ln = self.listeners[node_id]
                ln.response_delay_s = b.response_delay_s
                if b.process_up and not ln.running:
                    await ln.start()
                elif not b.process_up and ln.running:
                    await ln.stop()

    def _push_zookeeper(self) -> None:
        if self.mirror is None:
            self.cluster.changes.drain()
            return
        if self._zk_write is not None and not self._zk_write.done():
            return  # one write at a time; changes keep accumulating in the model's change log
        changes = self.cluster.changes.drain()
        if self.mirror.needs_full:
            snapshot = self.mirror.full_snapshot(self.cluster)
        elif changes.partitions or changes.brokers or changes.controller:
            snapshot = self.mirror.snapshot_of(self.cluster, changes)
        else:
            return
        self._zk_write = self._blocking.submit(self.mirror.apply, snapshot)

    def _sync_zookeeper_now(self) -> None:
        mirror = self.mirror
        if mirror is not None:
            mirror.apply(self.call(mirror.full_snapshot))

    def request_counts(self) -> dict[int, dict[str, int]]:
        return self.call(lambda c: {i: dict(ln.request_counts) for i, ln in self.listeners.items()})

    def authentications(self, failed: bool = False) -> dict[tuple[str, str, str], int]:
        """SASL logins over all listeners: (client software, mechanism, user) -> count (failed ones if `failed`)."""

        def gather(_: Cluster) -> dict[tuple[str, str, str], int]:
            out: Counter[tuple[str, str, str]] = Counter()
            for ln in self.listeners.values():
                out.update(ln.failed_authentications if failed else ln.authentications)
            return dict(out)

        return self.call(gather)

    def reset_request_counts(self) -> None:
        def reset(_: Cluster) -> None:
            for ln in self.listeners.values():
                ln.request_counts.clear()

        self.call(reset)

"""The probe Jobs of a run are created (and the last run's deleted) a few at a time, and
every refused Job is reported, not only the first (#49: one create after another is about
0.11 s each, two minutes at a thousand nodes before the first poll). Fakes here; the real
API server sees the same creates in tests/engine/test_checks_polling_cluster.py."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from support import checkdata as cd
from test_checks_polling import fleet, props

from gpuplane.checks.create import WORKERS
from gpuplane.checks.live import KubeCluster
from gpuplane.checks.manifests import job_name, plan_checks
from gpuplane.checks.provider import ProbeJobCheckProvider
from gpuplane.checks.settings import ChecksSettings


class Crowded(cd.FakeKube):
    """Each create and delete of a Job waits until `WORKERS` of them are in flight at
    once (a barrier: one at a time never gets past it), and counts the most in flight."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.barrier = threading.Barrier(WORKERS, timeout=10)
        self.lock = threading.Lock()
        self.flying = self.most = 0

    def _crowd(self) -> None:
        with self.lock:
            self.flying += 1
            self.most = max(self.most, self.flying)
        try:
            self.barrier.wait()
        finally:
            with self.lock:
                self.flying -= 1

    def create_namespaced_job(self, namespace: str, body: dict[str, Any]) -> Any:
        self._crowd()
        return super().create_namespaced_job(namespace, body)

    def delete_namespaced_job(self, name: str, namespace: str,
                              propagation_policy: str = "") -> Any:
        self._crowd()
        return super().delete_namespaced_job(name, namespace, propagation_policy)


def _provider(fake: cd.FakeKube) -> ProbeJobCheckProvider:
    p = ProbeJobCheckProvider()
    clock = cd.FakeClock()
    p.cluster_factory = lambda kubeconfig, context: KubeCluster(fake, fake, cd._API)
    p.clock, p.sleep, p.poll_seconds = clock, clock.sleep, 5.0
    return p


def test_the_jobs_are_created_and_deleted_a_few_at_a_time() -> None:
    """24 Jobs: `WORKERS` creates in flight at once, never more; the next run deletes
    the last run's 24 the same way. The Jobs are recorded in the checks' order."""
    intent, names = fleet(3 * WORKERS)
    fake = Crowded(jobs={name: [cd.job(name)] for name in names},
                   pods={name: [[cd.pod(f"{name}-p", job=name)]] for name in names},
                   logs={f"{name}-p": cd.probe_log() for name in names})
    first = _provider(fake).create(props(intent))
    assert first.outs["jobNames"] == names
    assert sorted(fake.created) == sorted(names)
    assert fake.most == WORKERS, fake.most
    fake.most = 0
    _provider(fake).update("id", first.outs, props(intent))
    assert sum(c.startswith("delete job") for c in fake.calls) == len(names)
    assert fake.most == WORKERS, fake.most


def test_every_refused_job_is_reported_at_once() -> None:
    """Three of nine creates refused (RBAC): the report names each of the three, the
    others are made and recorded for the next run to delete."""
    intent, names = fleet(9)
    fake = cd.FakeKube()
    refused = names[1::3]
    fake.create_errors.update(dict.fromkeys(refused, 403))
    outs = _provider(fake).create(props(intent)).outs
    report = outs["result"]["report"]
    assert outs["passed"] is False
    assert "could not use the cluster: ApiException on create of 3 of 9 check Jobs" in report
    for name in refused:
        assert f"Job {name}: (403) refused" in report, report
    assert outs["jobNames"] == [n for n in names if n not in refused]
    assert "may create and delete Jobs" in report


def test_a_run_whose_names_are_taken_moves_on_with_every_job() -> None:
    """Two of six names held by Jobs of an interrupted run (409): this run's four are
    deleted and all six made under the next run's names."""
    intent, names = fleet(6)
    second = [job_name("checks", c.key, cd.FP, 2)
              for c in plan_checks(intent, ChecksSettings())]
    fake = cd.FakeKube()
    fake.create_errors.update(dict.fromkeys(names[:2], 409))
    outs = _provider(fake).create(props(intent)).outs
    assert outs["run"] == 2
    deleted = sorted(c.split(" ")[2] for c in fake.calls if c.startswith("delete job"))
    assert deleted == sorted(names[2:])
    assert outs["jobNames"] == second


def test_an_error_that_is_not_the_clusters_is_raised() -> None:
    """A bug in a create is not turned into a refused Job."""
    intent, _ = fleet(3)

    class Broken(cd.FakeKube):
        def create_namespaced_job(self, namespace: str, body: dict[str, Any]) -> Any:
            raise KeyError("bug")

    with pytest.raises(KeyError, match="bug"):
        _provider(Broken()).create(props(intent))

"""The probe Jobs of a check run, created (and the last run's deleted) a few at a time.

Why: each create is one round trip to the API server (about 0.11 s against the tests'
kube-apiserver: docs/benchmarks.md), so a thousand GPU nodes spent two minutes making
Jobs one after another before the first poll, and as long again deleting the last run's.
A small pool sends `WORKERS` requests at once. The pool's workers share one client: the
kubernetes client's `ApiClient` sends every request through one urllib3 `PoolManager`
(kubernetes/client/rest.py `RESTClientObject`, kubernetes 37.0.2), which is meant to be
shared between threads and keeps up to `connection_pool_maxsize` connections per host
(5 per CPU by default: kubernetes/client/configuration.py). The bound keeps a fleet's
checks a small share of the API server's in-flight requests.

Every Job is tried even when one fails, and what failed is reported per Job, all at once:
a refused create (RBAC, quota) names each Job it refused, not only the first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import urllib3
from kubernetes.client.exceptions import ApiException

WORKERS = 8
"""Requests in flight at once."""

Create = Callable[[str, Callable[[], None]], None]
"""Creates what one check needs (its claim template, then its Job) for the Job's name;
calls its second argument once anything of it exists (a claim template made before its
Job was refused is still there to delete)."""
Clock = Callable[[], float]

ERRORS = (ApiException, urllib3.exceptions.HTTPError)
"""What the cluster answers with: kept per Job. Anything else is a bug and is raised."""


@dataclass
class Created:
    """The outcome of one run's creates, in the order the Jobs were asked for."""

    made: list[str] = field(default_factory=list)
    """The Jobs created (or with anything of theirs created), in the order asked."""
    started: dict[str, float] = field(default_factory=dict)
    """When each Job's create was sent: its wait is measured from then (never later than
    the Job was made)."""
    errors: dict[str, Exception] = field(default_factory=dict)
    """What each refused create raised, by Job name, in the order asked."""

    @property
    def conflicts_only(self) -> bool:
        """Every refusal was AlreadyExists (409): Jobs of an interrupted run hold the
        names."""
        return bool(self.errors) and all(
            isinstance(e, ApiException) and e.status == 409 for e in self.errors.values())


class JobsFailed(Exception):
    """Some Jobs could not be created or deleted; str() names each with what the cluster
    said."""

    def __init__(self, errors: dict[str, Exception], total: int, verb: str = "create"):
        self.errors = errors
        kinds = "/".join(sorted({type(e).__name__ for e in errors.values()}))
        if len(errors) == 1:
            [(name, error)] = errors.items()
            text = f"{kinds} on {verb} of Job {name}: {_reason(error)}"
        else:
            text = "\n".join([f"{kinds} on {verb} of {len(errors)} of {total} check Jobs:",
                              *(f"    Job {name}: {_reason(error)}"
                                for name, error in errors.items())])
        super().__init__(text)


def _reason(error: Exception) -> str:
    if isinstance(error, ApiException):
        return f"({error.status}) {error.reason}"
    return str(error) or type(error).__name__


def each(names: Sequence[str], action: Callable[[str], None],
         workers: int = WORKERS) -> dict[str, Exception]:
    """Run `action` for every name, `workers` at a time (in this thread for one); what
    the cluster refused, by name in `names`' order. Anything else is raised once every
    action has returned."""
    errors: dict[str, Exception] = {}

    def one(name: str) -> None:
        try:
            action(name)
        except ERRORS as error:
            errors[name] = error

    if len(names) <= 1 or workers <= 1:
        for name in names:
            one(name)
    else:
        with ThreadPoolExecutor(max_workers=min(workers, len(names)),
                                thread_name_prefix="gpuplane-checks") as pool:
            futures = [pool.submit(one, name) for name in names]
        for future in futures:
            future.result()
    return {n: errors[n] for n in names if n in errors}


def create_jobs(names: Sequence[str], create: Create, clock: Clock,
                workers: int = WORKERS) -> Created:
    """`create` every Job, `workers` at a time, each refusal kept by Job."""
    out = Created()
    partial: set[str] = set()

    def one(name: str) -> None:
        out.started[name] = clock()
        create(name, lambda: partial.add(name))

    out.errors = each(names, one, workers)
    out.made = [n for n in names if n not in out.errors or n in partial]
    return out


def delete_jobs(names: Sequence[str], delete: Callable[[str], None],
                workers: int = WORKERS) -> None:
    """`delete` every Job, `workers` at a time; JobsFailed names each refused one."""
    errors = each(names, delete, workers)
    if errors:
        raise JobsFailed(errors, len(names), "delete")


__all__ = ["WORKERS", "Created", "JobsFailed", "create_jobs", "delete_jobs", "each"]

"""The probe Jobs of a check run, created a few at a time.

Why: each create is one round trip to the API server (about 0.11 s measured against the
tests' kube-apiserver, benchmarks/check_rounds.py), so a thousand GPU nodes made one
after another spent two minutes before the first poll. A small pool sends `WORKERS` of
them at once: the kubernetes client's `ApiClient` sends each request through urllib3's
`PoolManager`, which is safe to share between threads and keeps up to
`connection_pool_maxsize` connections per host (kubernetes/client/rest.py,
kubernetes/client/configuration.py, kubernetes 31.0.0), so the pool's workers share one
client. The bound keeps a fleet's checks from flooding the API server (its default
max-requests-inflight is 400 mutating, 200 non-mutating).

Every Job is tried even when one fails, and what failed is reported per Job, all at once:
a refused create (RBAC, quota) names each Job it refused, not only the first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

WORKERS = 8

Create = Callable[[str, dict[str, Any]], None]
"""Creates what one check needs (its claim template, then its Job) for the Job's name."""
Clock = Callable[[], float]

ERRORS = (ApiException, urllib3.exceptions.HTTPError)


@dataclass
class Created:
    """The outcome of one round of creates, in the order the Jobs were asked for."""

    made: list[str] = field(default_factory=list)
    """The Jobs created (or with anything of theirs created), in the order asked."""
    started: dict[str, float] = field(default_factory=dict)
    """When each Job's create was sent (its wait is measured from then)."""
    errors: dict[str, Exception] = field(default_factory=dict)
    """What each refused create raised, by Job name, in the order asked."""

    @property
    def conflicts_only(self) -> bool:
        """Every refusal was AlreadyExists (409): Jobs of an interrupted run hold the
        names."""
        return bool(self.errors) and all(
            isinstance(e, ApiException) and e.status == 409 for e in self.errors.values())


class CreateFailed(Exception):
    """Some Jobs could not be created; str() names each with what the API said."""

    def __init__(self, errors: dict[str, Exception], total: int):
        self.errors = errors
        first = next(iter(errors.values()))
        kinds = sorted({type(e).__name__ for e in errors.values()})
        lines = [f"{'/'.join(kinds)} on {len(errors)} of {total} check Jobs:"]
        lines += [f"  Job {name}: {_reason(error)}" for name, error in errors.items()]
        super().__init__("\n".join(lines) if len(errors) > 1 else
                         f"{type(first).__name__} on Job {next(iter(errors))}: "
                         f"{_reason(first)}")


def _reason(error: Exception) -> str:
    if isinstance(error, ApiException):
        return f"({error.status}) {error.reason}"
    return str(error) or type(error).__name__


def create_jobs(names: Sequence[str], create: Create, clock: Clock,
                workers: int = WORKERS) -> Created:
    """Run `create` for every name, `workers` at a time; collect every refusal (an API or
    HTTP error) per Job rather than stopping at the first. Anything else (a bug) is
    raised once every create has returned."""
    out = Created()
    partial: set[str] = set()

    def one(name: str) -> None:
        out.started[name] = clock()
        try:
            create(name, partial)   # type: ignore[arg-type]
        except ERRORS as error:
            out.errors[name] = error

    if len(names) <= 1 or workers <= 1:
        for name in names:
            one(name)
    else:
        with ThreadPoolExecutor(max_workers=min(workers, len(names)),
                                thread_name_prefix="gpuplane-check-create") as pool:
            futures = [pool.submit(one, name) for name in names]
        for future in futures:
            future.result()
    out.errors = {n: out.errors[n] for n in names if n in out.errors}
    out.made = [n for n in names if n not in out.errors or n in partial]
    return out


__all__ = ["WORKERS", "Created", "CreateFailed", "create_jobs"]

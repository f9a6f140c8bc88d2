"""Which value of a runtime's `options` table the runc shim really gets.

`containerd config dump` prints a runtime's `options` as written (any key spelling), so
the effective view keeps them raw. The CRI plugin only decodes them into runc's options
struct when it starts a container, and the TOML library it uses matches keys to the
struct's field names loosely, differently per release line:

- 1.6 / 1.7 (`pkg/cri/server/helpers.go` `generateRuntimeOptions`@v1.7.24, go-toml
  v1.9.5 `marshal.go`): the first key present of `Name`, `name` (all lower case), `NAME`
  (all upper case) and `nAME` (first letter lowered). So Kubespray's `systemdCgroup` and
  `binaryName` work; `systemdcgroup` does too, `SystemdCGroup` does not.
- 2.x (`internal/cri/config/config.go` `GenerateRuntimeOptions`@v2.1.4, go-toml/v2
  v2.2.x `unmarshaler.go`): any spelling equal ignoring case. The options are first
  re-marshalled with their keys sorted, then decoded in that order, so when several
  spellings are present the last in byte order wins (`binaryName` over `BinaryName`).

Measured against the real daemons in tests/real/test_options_real.py.
"""

from __future__ import annotations

from typing import Any

from gpuplane.containerd.versions import ContainerdVersion


def spellings(field: str) -> list[str]:
    """The keys 1.x tries for `field`, in its order (2.x takes any case: see `key_for`)."""
    return [field, field.lower(), field.upper(), field[:1].lower() + field[1:]]


def key_for(options: dict[str, Any], field: str, line: ContainerdVersion) -> str | None:
    """The key of `options` whose value the shim gets as `field`, or None (unset)."""
    if line.major >= 2:
        matches = sorted(k for k in options if k.lower() == field.lower())
        return matches[-1] if matches else None
    return next((k for k in spellings(field) if k in options), None)


def decoded(options: dict[str, Any], field: str, line: ContainerdVersion) -> Any:
    """The value runc's options get for `field` (None when no key matches)."""
    key = key_for(options, field, line)
    return None if key is None else options[key]


def odd_spellings(options: dict[str, Any], field: str) -> list[str]:
    """Keys that mean `field` to some containerd but are not spelled `field`."""
    return sorted(k for k in options if k.lower() == field.lower() and k != field)


def set_option(options: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    """`options` with `field` set to `value` for every containerd line: every other
    spelling already present is set too, since 2.x may read that one instead."""
    out = dict(options)
    for key in odd_spellings(out, field):
        out[key] = value
    out[field] = value
    return out

"""The device database: every tile and threshold the planner uses, as data, with its evidence.

``devices.json`` (beside this module) holds a tree of devices (``any`` -> ``gpu`` -> ``NVIDIA
GPU`` -> ``H100``; ``any`` -> ``OpenCL CPU``) and, per device, a section per kernel family
(``regblock``, ``split-k``, ``matvec``, ...) of named settings: a value, why, and the evidence
(date, device, command, record) behind it.  A device is the deepest node whose ``match`` words
all occur in its description; a setting is looked up from there towards ``any``, so a device
says only where it differs.  The tuner's measured regblock tiles (the user's tuning file, see
:mod:`polymm.kernels.params`) are read before the table.

Code keeps the formulas; the numbers live here.  Every plan records the settings it read
(:func:`recording`), so ``polymm explain`` can say which entry decided.
"""

from __future__ import annotations

import contextvars
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

__all__ = ["Setting", "DeviceSettings", "settings_for", "recording", "database", "entry", "write"]


@dataclass(frozen=True)
class Setting:
    """One database entry as a lookup found it: ``device`` is the database node that holds it
    (or the tuning file), ``evidence`` what was measured to choose it (may be empty)."""

    device: str
    family: str
    name: str
    value: object
    why: str = ""
    evidence: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def cite(self) -> str:
        """``device / family.name``: how explain names the entry."""
        return f"{self.device} / {self.family}.{self.name}"

    def describe(self) -> str:
        """One line: where it is, its value, and the measurement behind it when there is one."""
        ev = self.evidence
        measured = ", ".join(str(ev[k]) for k in ("date", "device") if k in ev)
        source = (
            f" [{measured}: {ev['record']}]" if measured and "record" in ev else f" [{measured}]" if measured else ""
        )
        return f"{self.cite} = {_short(self.value)}{source}"


def _short(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={v}" for k, v in value.items()) + "}"
    return json.dumps(value)


@lru_cache(maxsize=1)
def database() -> dict:
    """``devices.json``, read once."""
    return json.loads(resources.files(__package__).joinpath("devices.json").read_text())


def entry(device: str, family: str, name: str) -> dict:
    """The live entry ``device / family.name`` of the database (``value``, ``why``, ``evidence``):
    what the tuner writes into and a test changes for a while (``monkeypatch.setitem(entry(...),
    "value", v)``); plans made before keep what they read."""
    return database()["settings"][device][family][name]


def write(device: str, family: str, name: str, value, why: str, evidence: dict, path=None) -> str:
    """Store ``device / family.name`` (value, why, evidence) in ``devices.json`` (``path``: another
    copy of it), as the tuners do with ``--database``; returns the path written.  The file is
    written whole (its layout kept: one-space indents) and the cached database dropped."""
    path = str(path or resources.files(__package__).joinpath("devices.json"))
    with open(path) as f:
        data = json.load(f)
    if device not in data["devices"]:
        raise KeyError(f"no device {device!r} in the database; known: {', '.join(data['devices'])}")
    data["settings"].setdefault(device, {}).setdefault(family, {})[name] = {
        "value": value,
        "why": why,
        "evidence": evidence,
    }
    with open(path, "w") as f:
        f.write(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    database.cache_clear()
    _settings.cache_clear()
    return path


def _chain(words: str) -> tuple[str, ...]:
    """The database devices that describe a device with these words, the most specific first."""
    devices = database()["devices"]

    def depth(name):
        parent = devices[name].get("parent")
        return 0 if parent is None else 1 + depth(parent)

    matching = [n for n, d in devices.items() if all(w in words for w in d["match"].split())]
    node = max(matching, key=depth)
    chain = []
    while node is not None:
        chain.append(node)
        node = devices[node].get("parent")
    return tuple(chain)


_recorder: contextvars.ContextVar[dict | None] = contextvars.ContextVar("polymm_settings_read", default=None)


@contextmanager
def recording():
    """Collect every :class:`Setting` read in this context (in order, once each) into the dict
    it yields (``cite -> Setting``); the planner wraps each plan in one (nested, the outer one
    collects)."""
    outer = _recorder.get()
    if outer is not None:  # a plan within a plan (a complex product as a real one): one record
        yield outer
        return
    found: dict = {}
    token = _recorder.set(found)
    try:
        yield found
    finally:
        _recorder.reset(token)


def _note(setting: Setting) -> None:
    found = _recorder.get()
    if found is not None:
        found.setdefault((setting.device, setting.family, setting.name), setting)


class DeviceSettings:
    """The settings of one device: ``settings("split-k", "deep_k")`` is the value (and, while
    :func:`recording`, notes which entry gave it); :meth:`setting` the whole entry."""

    def __init__(self, words: str):
        self.chain = _chain(words)
        self._where: dict = {}  # (family, name, default) -> the node and key that hold it

    def setting(self, family: str, name: str, default_name: str | None = None) -> Setting:
        """The entry for ``name`` in ``family`` from the most specific device that has it (or,
        at each device, ``default_name`` of the family: regblock's ``other`` dtype).  Where it is
        found is remembered (a plan asks some thirty times); its value is read live, so an entry
        changed in place (:func:`entry`) is seen at once."""
        where = self._where.get((family, name, default_name))
        if where is None:
            found = next(self.candidates(family, name, default_name), None)
            if found is None:
                raise KeyError(f"the device database has no {family}.{name} for {' -> '.join(self.chain)}")
            self._where[family, name, default_name] = (found.device, found.name)
            return found
        node, key = where
        e = database()["settings"][node][family][key]
        return Setting(node, family, key, e["value"], e.get("why", ""), e.get("evidence", {}))

    def candidates(self, family: str, name: str, default_name: str | None = None):
        """Every entry for ``name`` along the chain, the most specific first (a caller that must
        skip an entry the device cannot run, as regblock tiles that do not fit, takes the next)."""
        sections = database()["settings"]
        for node in self.chain:
            entries = sections.get(node, {}).get(family, {})
            key = name if name in entries else default_name if default_name in entries else None
            if key is not None:
                e = entries[key]
                yield Setting(node, family, key, e["value"], e.get("why", ""), e.get("evidence", {}))

    def __call__(self, family: str, name: str):
        found = self.setting(family, name)
        _note(found)
        return found.value


@lru_cache(maxsize=64)
def _settings(words: str) -> DeviceSettings:
    return DeviceSettings(words)


def settings_for(device) -> DeviceSettings:
    """The settings of ``device`` (a :class:`~polymm.kernels.params.DeviceInfo`)."""
    return _settings(device.words())


def shared_settings() -> DeviceSettings:
    """The settings every device shares (the database's ``any`` node): what the runtime weighs
    where it has no device's description (``ArrayKind.launch_bytes``)."""
    return _settings("")


def note(setting: Setting) -> Setting:
    """Count ``setting`` as read by the plan being recorded (for lookups made through
    :meth:`DeviceSettings.candidates`)."""
    _note(setting)
    return setting

"""Properties of the persisted tuning file over generated files (hypothesis).

Whatever a tuning file holds (bytes, odd JSON, deep nesting, NaN, near-miss entries):

* loading never raises, and warns only :class:`TuningFileWarning` (at most one);
* every entry of a readable file is loaded or counted as skipped;
* saving either refuses (another schema version: nothing written) or writes strict JSON that
  keeps every entry of the old file it could keep, and warns about anything it did not keep;
* the paths that only read (``load_tuning_file``, ``autotune(False, tuning_file=...)``, a block that
  tuned nothing new) leave the directory exactly as it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import warnings
from pathlib import Path

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flashinfer.autotuner import (
    MAX_DEPTH,
    READABLE_SCHEMAS,
    SCHEMA_VERSION,
    AutoTuner,
    TuningFileError,
    TuningFileWarning,
    autotune,
    load_tuning_file,
    save_tuning_file,
)
from flashinfer.autotuner import persist as cache_module

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(autouse=True)
def fast_tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


# One op for the whole module: a file's entries may name it, its backends and tactics.
OP = make_op({"a": FakeRunner("a", [(64, 2), (32, 4)]), "b": FakeRunner("b", [None])})


def valid_entry(shape: int = 4, backend: str = "a", tactic=(64, 2)) -> dict:
    return {
        "op": OP.api_key,
        "inputs": [{"shape": [shape], "dtype": "float32"}],
        "device": "cpu",
        "compute_capability": None,
        "backend": backend,
        "tactic": list(tactic) if tactic is not None else None,
        "median_ms": 1.0,
        "experimental": False,
        "fingerprint": {"device": "cpu", "compute_capability": None},  # the rest: any
    }


# ---- strategies ------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = [
    "op",
    "inputs",
    "device",
    "compute_capability",
    "backend",
    "tactic",
    "median_ms",
    "fingerprint",
]


@st.composite
def near_miss_entries(draw) -> object:
    """A valid entry, possibly with some fields replaced or removed; or anything at all."""
    if draw(st.integers(0, 5)) == 0:
        return draw(values)
    e = valid_entry(
        shape=draw(st.sampled_from([1, 2, 4, 8, 16])),
        backend=draw(st.sampled_from(["a", "b", "gone"])),
        tactic=draw(st.sampled_from([(64, 2), (32, 4), (1, 1), None])),
    )
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=3, unique=True)):
        if draw(st.booleans()):
            del e[name]
        else:
            e[name] = draw(values)
    return e


def deep(n: int, closed: bool) -> str:
    return "[" * n + ("]" * n if closed else "")


@st.composite
def cache_files(draw) -> bytes:
    """The bytes of a file found where a cache is expected."""
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(st.binary(max_size=200))
    if kind == 1:  # deep nesting, bare or inside a cache
        text = deep(draw(st.integers(MAX_DEPTH - 2, 3000)), draw(st.booleans()))
        if draw(st.booleans()):
            text = f'{{"schema_version": 1, "entries": [{text}]}}'
        return text.encode()
    if kind == 2:
        return json.dumps(draw(values)).encode()
    version = draw(st.sampled_from([SCHEMA_VERSION] * 4 + [1, 1, 3, 0, True, 1.0, "1", None]))
    doc = {"schema_version": version, "entries": draw(st.lists(near_miss_entries(), max_size=6))}
    if kind == 3 and draw(st.booleans()):
        del doc[draw(st.sampled_from(["schema_version", "entries"]))]
    data = json.dumps(doc).encode()
    if kind == 4:  # truncated, or a byte flipped
        cut = draw(st.integers(0, len(data)))
        return data[:cut] if draw(st.booleans()) else data[:cut] + b"\x00" + data[cut + 1 :]
    return data


# ---- oracles ---------------------------------------------------------------------------


def readable_cache(data: bytes):
    """The spec of a readable cache: UTF-8 JSON, an object with an integer (not bool)
    schema_version and an entries list, nested no deeper than MAX_DEPTH."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or type(doc.get("schema_version")) is not int:
        return None
    if depth(doc) > MAX_DEPTH:
        return None
    if doc["schema_version"] in READABLE_SCHEMAS and not isinstance(doc.get("entries"), list):
        return None
    return doc  # another version's layout is its own business


def depth(value) -> int:
    """Levels of arrays/objects (breadth-first: a deep value cannot overflow the stack)."""
    level, layer = 0, [value]
    while layer:
        layer = [v for v in layer if isinstance(v, (dict, list))]
        if layer:
            level += 1
        layer = [c for v in layer for c in (v.values() if isinstance(v, dict) else v)]
    return level


def strict(text: str):
    def refuse(token):
        raise AssertionError(f"non-JSON token {token} written")

    return json.loads(text, parse_constant=refuse)


def identity(e: dict) -> str:
    return json.dumps({k: e.get(k) for k in ("op", "inputs", "device", "compute_capability")})


@contextlib.contextmanager
def cache_dir(data: bytes):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "c.json"
        path.write_bytes(data)
        yield Path(d), path


@contextlib.contextmanager
def recorded():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def listing(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


# ---- properties ------------------------------------------------------------------------


@SETTINGS
@given(cache_files())
def test_loading_any_file_warns_at_most_once_and_accounts_for_every_entry(data):
    AutoTuner.get().clear()
    with cache_dir(data) as (directory, path), recorded() as caught:
        before = listing(directory)
        report = load_tuning_file(path)  # never raises
        assert listing(directory) == before  # reads only
    assert all(issubclass(w.category, TuningFileWarning) for w in caught)
    assert len(caught) <= 1
    doc = readable_cache(data)
    if doc is None or not isinstance(doc.get("entries"), list):
        assert report.error and report.loaded == 0 and len(caught) == 1
        assert AutoTuner.get().choices() == {}
    else:
        assert report.error is None
        assert report.loaded + report.total_skipped == len(doc["entries"])
        assert len(caught) == (1 if report.total_skipped else 0)
        assert len(AutoTuner.get().choices()) <= report.loaded  # equal keys: the later wins


@SETTINGS
@given(cache_files(), st.booleans())
def test_saving_over_any_file_never_loses_entries_silently(data, tune):
    AutoTuner.get().clear()
    if tune:
        with autotune():
            OP(torch.zeros(4))
    tuner = AutoTuner.get()
    ours = {
        identity(cache_module.entry_record(k, c, tuner, {})) for k, c in tuner.choices().items()
    }
    doc = readable_cache(data)
    with cache_dir(data) as (directory, path), recorded() as caught:
        try:
            count = save_tuning_file(path)
        except TuningFileError as exc:
            # Refused only for a cache of a schema version it cannot read: nothing changed.
            assert doc is not None and doc["schema_version"] not in READABLE_SCHEMAS
            assert f"schema version {doc['schema_version']}" in str(exc)
            assert path.read_bytes() == data
            assert not [p for p in directory.iterdir() if p.name.endswith(".tmp")]
            return
        written = strict(path.read_text())  # strict JSON, whatever came in
    assert all(issubclass(w.category, TuningFileWarning) for w in caught)
    assert len(caught) <= 1
    assert written["schema_version"] == SCHEMA_VERSION and len(written["entries"]) == count
    kept = {identity(e) for e in written["entries"]}
    assert ours <= kept
    if doc is None:  # unreadable content is replaced, and said so, unless there was none
        assert len(caught) == (0 if not data.strip() else 1)
        return
    assert doc["schema_version"] in READABLE_SCHEMAS  # schema 1 is upgraded, never refused
    old = doc["entries"]
    keepable = [e for e in old if isinstance(e, dict) and _is_strict(e)]
    assert {identity(e) for e in keepable} <= kept
    assert len(caught) == (1 if len(keepable) < len(old) else 0)
    if caught:
        assert f"{len(old) - len(keepable)} of its entries were dropped" in str(caught[0].message)


def _is_strict(value) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return False
    return True


@SETTINGS
@given(cache_files(), st.sampled_from(["disabled", "nothing-new", "empty-block", "nested"]))
def test_paths_that_only_read_never_write_lock_or_create_files(data, how):
    AutoTuner.get().clear()
    with cache_dir(data) as (directory, path), recorded():
        before = listing(directory)
        if how == "disabled":  # a serving process: tuning off, calls of any key
            with autotune(False, tuning_file=path):
                OP(torch.zeros(4))
                OP(torch.zeros(1024))
        elif how == "nothing-new":  # tuning on, but the key was tuned before the block
            with autotune():
                OP(torch.zeros(4))
            with autotune(tuning_file=path):
                OP(torch.zeros(4))
        elif how == "empty-block":
            with autotune(tuning_file=path):
                pass
        else:
            with autotune(False, tuning_file=path), autotune(False), autotune(tuning_file=path):
                pass
        assert listing(directory) == before
    assert not os.path.exists(str(path) + ".lock")

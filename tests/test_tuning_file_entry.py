"""The tuning file's types are its schema: what a save writes is exactly a
:class:`TuningFileDocument` of :class:`TuningFileEntry` items, field for field and in their order,
and the entry the docs show is one too (so neither can drift from the type)."""

from __future__ import annotations

import json
import textwrap

import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op

from flashinfer.autotuner import autotune, load_tuning_file, save_tuning_file
from flashinfer.autotuner.tuning_file import TuningFileDocument, TuningFileEntry


def test_a_saved_file_holds_exactly_the_fields_of_its_types_in_their_order(tmp_path):
    op = make_op({"a": FakeRunner("a", [(64, 2), (32, 4)]), "b": FakeRunner("b", [None])})
    with clean_tuner(warmup=0, repeat=1):
        with autotune():
            op(torch.zeros(3))
            op(torch.zeros(9))
        path = tmp_path / "tuned.json"
        assert save_tuning_file(path) == 2
        doc = json.loads(path.read_text())
        assert list(doc) == list(TuningFileDocument.__annotations__)
        assert len(doc["entries"]) == 2
        for entry in doc["entries"]:
            assert list(entry) == list(TuningFileEntry.__annotations__)
        # What the writer wrote, the reader reads back.
        assert load_tuning_file(path).loaded == 2


def test_the_documented_entry_shows_every_field_of_the_type_in_its_order():
    # The example in TuningFileEntry's docstring, which the API reference shows.
    doc = TuningFileEntry.__doc__ or ""
    example = textwrap.dedent(doc.split("::\n\n", 1)[1].split("\n\n", 1)[0])
    assert list(json.loads(example)) == list(TuningFileEntry.__annotations__)

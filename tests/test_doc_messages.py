"""The docs show flashinfer's messages as ``gating/messages.py`` builds them, never a copy.

A sample warning or error in ``docs/`` is a builder's call between double braces, which
``docs/_ext/flashinfer_messages.py`` renders at build time (in doctests, so the example's
real output is compared with the builder's text).  Here every builder is rendered with
stand-in arguments; the text between the arguments is the builder's own, and a phrase of it
found in the docs, README.md, the policy, CONTRIBUTING.md or a docstring outside a placeholder
is a hand-written copy that rewording the message would leave stale: the test fails, naming
the file and the builder.  The one kind of copy allowed is one a test compares with the
program's real output (``CHECKED``).
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from pathlib import Path

import pytest

from flashinfer.gating import messages

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import flashinfer_messages  # noqa: E402  (docs/_ext: the placeholders' renderer)

_STAND_IN = "Zq{}Zq"
_STAND_INS = re.compile(r"""['"]?Zq\d+Zq['"]?""")

# A copy of a builder's text that a test compares with the program's real output, so a
# reworded message fails that test: (file, builder) -> the test.
CHECKED = {
    ("README.md", "gate_verdict"): "tests/test_explain_example.py",
    ("docs/backend_control.rst", "gate_verdict"): "tests/test_explain_example.py",
}


def _stand_in_arguments(fn) -> list[object]:
    """One distinct stand-in per parameter, shaped as its annotation asks."""
    args: list[object] = []
    for i, param in enumerate(inspect.signature(fn).parameters.values()):
        word = _STAND_IN.format(i)
        kind = str(param.annotation)
        if kind in ("str", "str | None"):
            args.append(word)
        elif kind.startswith(("Sequence[", "Iterable[")):
            args.append([word])
        elif kind.startswith("Mapping["):
            args.append({word: _STAND_IN.format(i + 100)})
        else:
            raise AssertionError(f"messages.{fn.__name__}: no stand-in for a {kind} parameter")
    return args


_WINDOW = 6  # words each side of an argument that a copy shows with it
_LONG = 8  # a run of a builder's own text this long is searched for alone


def _words(text: str) -> int:
    return len(re.findall(r"[A-Za-z0-9_]+", text))


def _patterns(text: str) -> set[str]:
    """What a hand-written copy of a builder's ``text`` (rendered with stand-ins) would
    contain, as regular expressions: the builder's own words each side of an argument (any
    argument: a run of non-blanks), a run of its own text of ``_LONG`` words or more, or,
    for a builder without arguments, its whole text.  Shorter runs of its words alone are
    left alone: prose may say "may change or disappear without deprecation" too."""
    pieces = [re.sub(r"\s+", " ", p) for p in _STAND_INS.split(text)]
    found = set()
    if len(pieces) == 1 and _words(pieces[0]) >= 3:
        found.add(re.escape(pieces[0].strip()))
    for piece in pieces:
        for sentence in re.split(r"(?<=[.;:])\s", piece):
            if _words(sentence) >= _LONG:
                found.add(re.escape(sentence.strip()))
    for left, right in zip(pieces, pieces[1:], strict=False):  # each argument's two sides
        # Punctuation at the window's far ends left out: a quote may stop mid-sentence.
        tail = re.sub(r"^[^\w']+", "", " ".join(left.split(" ")[-_WINDOW:]))
        head = re.sub(r"[^\w']+$", "", " ".join(right.split(" ")[:_WINDOW]))
        if _words(tail + " " + head) >= 3:
            found.add(re.escape(tail) + r"\S{1,80}?" + re.escape(head))
    return found


def builder_patterns() -> dict[str, set[str]]:
    table = flashinfer_messages.builders()
    return {
        name: _patterns(fn(*_stand_in_arguments(fn)))
        for name, fn in table.items()
        if name != "plain_name"  # a name's last part: no text of its own
    }


def _doc_sources() -> dict[str, str]:
    """Every text a reader is shown: the docs, README.md, the policy, CONTRIBUTING.md and
    the package's docstrings (autodoc shows them), placeholders left out, blanks as one space."""
    paths = [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
    paths += sorted((ROOT / "flashinfer" / "experimental").glob("*.md"))
    for pattern in ("*.rst", "*.md"):
        paths += [
            p
            for p in sorted((ROOT / "docs").rglob(pattern))
            if "_build" not in p.parts and "generated" not in p.parts
        ]
    texts = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in paths}
    for path in sorted((ROOT / "flashinfer").rglob("*.py")):
        if path.name == "messages.py" and path.parent.name == "gating":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = [
            ast.get_docstring(node) or ""
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        texts[path.relative_to(ROOT).as_posix()] = "\n".join(docs)
    return {
        name: " ".join(flashinfer_messages.PLACEHOLDER.sub(" ", text).split())
        for name, text in texts.items()
    }


def _copies() -> dict[tuple[str, str], list[str]]:
    sources = _doc_sources()
    found: dict[tuple[str, str], list[str]] = {}
    for builder, patterns in builder_patterns().items():
        for name, text in sources.items():
            hits = sorted(m.group(0) for p in patterns if (m := re.search(p, text)))
            if hits:
                found[(name, builder)] = hits
    return found


def test_every_builder_has_text_to_search_for():
    patterns = builder_patterns()
    assert {"explicit_selection", "automatic_selection"} <= set(patterns)
    for builder, found in patterns.items():
        assert found, f"messages.{builder}: no text of its own to search the docs for"
    # A copy with other arguments is found, whatever the wording.
    for builder in ("explicit_selection", "automatic_selection"):
        copy = "It warns: " + getattr(messages, builder)("mod.f", "x") + " Then..."
        assert any(re.search(p, copy) for p in patterns[builder]), builder
    prose = "an experimental API may change or disappear without deprecation."
    assert not any(re.search(p, prose) for p in patterns["experimental_api_used"])


def test_no_message_is_copied_by_hand():
    unchecked = {key: hits for key, hits in _copies().items() if key not in CHECKED}
    assert not unchecked, "\n".join(
        f"{name}: a hand-written copy of messages.{builder} ({hits}); write it as "
        f"{{{{messages.{builder}(...)}}}} in a doctest, or :flashinfer-message:`...` inline "
        "(docs/_ext/flashinfer_messages.py), or describe it without quoting"
        for (name, builder), hits in sorted(unchecked.items())
    )


def test_the_checked_copies_exist_and_their_test_reads_them():
    copies = _copies()
    for (name, builder), test in CHECKED.items():
        assert (name, builder) in copies, f"{name} no longer copies messages.{builder}"
        assert Path(name).name in (ROOT / test).read_text(), f"{test} does not read {name}"


def test_the_docs_use_placeholders_and_each_renders():
    calls = []
    for path in sorted((ROOT / "docs").rglob("*.rst")):
        if "_build" not in path.parts:
            calls += flashinfer_messages.PLACEHOLDER.findall(path.read_text(encoding="utf-8"))
    assert any("explicit_selection" in c for c in calls)
    assert any("automatic_selection" in c for c in calls)
    for call in calls:
        assert flashinfer_messages.render_call(call)


def test_a_placeholder_renders_the_builders_text():
    text = "ExperimentalWarning: {{messages.explicit_selection('example.f', 'fast')}}"
    expected = "ExperimentalWarning: " + messages.explicit_selection("example.f", "fast")
    assert flashinfer_messages.render(text) == expected
    nested = (
        "{{messages.only_experimental_fit('f', ['x'], {'x': messages.gate_exclusion_reason()})}}"
    )
    reason = messages.gate_exclusion_reason()
    assert flashinfer_messages.render(nested) == messages.only_experimental_fit(
        "f", ["x"], {"x": reason}
    )
    short = flashinfer_messages.render("{{messages.every_candidate_rejected('f', {})}}", short=True)
    assert short == "No suitable auto backends found for f; every candidate was rejected"


@pytest.mark.parametrize(
    "call, says",
    [
        ("messages.no_such_builder()", "has no builder 'no_such_builder'"),
        ("messages.explicit_selection(name, 'x')", "literal"),
        ("__import__('os').getcwd()", "literal"),
        ("messages.ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV", "literal"),
        ("messages.explicit_selection(", "not a Python expression"),
    ],
)
def test_a_bad_placeholder_is_an_error_that_says_why(call, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        flashinfer_messages.render("{{" + call + "}}")

"""The docs' sample messages, rendered from :mod:`flashinfer.gating.messages` at build time.

A warning or error the docs show is written as a call of its builder between double braces,
``{{messages.explicit_selection('example.double', 'fast')}}``, and this extension puts the
builder's text there, so rewording a message is an edit of ``gating/messages.py`` only:

* in a ``.. doctest::`` block (this module registers the ``doctest`` directive over
  ``sphinx.ext.doctest``'s, which it subclasses): the block's text, shown and run, has each
  call replaced by the full message, so the example's output is compared with the builder's
  current text;
* inline, the role ``:flashinfer-message:`BackendSupportedError: {{messages.X(...)}}```
  renders as literal text with each call replaced by its message's headline (its first line,
  up to the end of its first sentence).

A page that renders a message depends on ``gating/messages.py``: an incremental build
re-reads it when that file changes.

A call takes literals (strings, numbers, lists, tuples, dicts, None) and other builders'
calls as arguments, nothing else.  ``tests/test_doc_messages.py`` fails on a copy of a
builder's text left written by hand in the docs.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.ext.doctest import DoctestDirective

PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}")
"""A builder's call in the docs: ``{{messages.<builder>(<literal arguments>)}}``."""


def builders() -> dict[str, Any]:
    """The message builders a placeholder may call: the public functions of ``messages``
    (``unrecognised_value`` is the reader's, :mod:`flashinfer.settings`)."""
    import inspect

    from flashinfer.gating import messages

    return {
        name: fn
        for name, fn in vars(messages).items()
        if inspect.isfunction(fn) and not name.startswith("_")
    }


def _evaluate(node: ast.AST, table: dict[str, Any], expr: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_evaluate(e, table, expr) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {
            _evaluate(k, table, expr): _evaluate(v, table, expr)
            for k, v in zip(node.keys, node.values, strict=True)  # type: ignore[arg-type]
        }
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "messages"
    ):
        name = node.func.attr
        if name not in table:
            known = ", ".join(sorted(table))
            raise ValueError(f"{{{{{expr}}}}}: messages has no builder {name!r} ({known})")
        args = [_evaluate(a, table, expr) for a in node.args]
        kwargs = {k.arg: _evaluate(k.value, table, expr) for k in node.keywords if k.arg}
        return table[name](*args, **kwargs)
    raise ValueError(
        f"{{{{{expr}}}}}: a placeholder is a call messages.<builder>(...) with literal "
        f"arguments; {ast.unparse(node)!r} is not"
    )


def render_call(expr: str) -> str:
    """The text of one placeholder's call, ``messages.<builder>(...)``."""
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"{{{{{expr}}}}}: not a Python expression ({exc.msg})") from None
    text = _evaluate(tree.body, builders(), expr.strip())
    if not isinstance(text, str):
        raise ValueError(f"{{{{{expr}}}}}: gave {type(text).__name__}, not a message")
    return text


def note_messages_dependency(env: Any) -> None:
    """Rebuild the page when ``gating/messages.py`` changes: Sphinx keeps a page's doctree
    between builds, and the text rendered into it would otherwise outlive a rewording."""
    from flashinfer.gating import messages

    env.note_dependency(messages.__file__)


def headline(message: str) -> str:
    """A message's first line, up to the end of its first sentence, without a closing
    colon: what a heading or a sentence quotes."""
    first = message.split("\n", 1)[0]
    first = re.split(r"(?<=\.)\s", first, maxsplit=1)[0]
    return first.rstrip(":")


def render(text: str, *, short: bool = False) -> str:
    """``text`` with every placeholder replaced by its message (its headline if ``short``)."""
    return PLACEHOLDER.sub(
        lambda m: headline(render_call(m.group(1))) if short else render_call(m.group(1)),
        text,
    )


class MessageDoctest(DoctestDirective):
    """``.. doctest::``, with each placeholder of the block replaced by its message."""

    def run(self) -> list[Any]:
        source, offset = self.content.info(0) if self.content else (None, 0)
        joined = "\n".join(self.content)
        if PLACEHOLDER.search(joined):
            note_messages_dependency(self.state.document.settings.env)
            try:
                lines = render(joined).split("\n")
            except ValueError as exc:
                raise self.error(str(exc)) from None
            self.content = StringList(lines, source=source)
        return super().run()


def message_role(
    name: str,
    rawtext: str,
    text: str,
    lineno: int,
    inliner: Any,
    options: dict[str, Any] | None = None,
    content: list[str] | None = None,
) -> tuple[list[Any], list[Any]]:
    """``:flashinfer-message:`Kind: {{messages.X(...)}}```: the text as a literal, each
    placeholder replaced by its message's headline."""
    note_messages_dependency(inliner.document.settings.env)
    try:
        shown = render(text, short=True)
    except ValueError as exc:
        msg = inliner.reporter.error(str(exc), line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    return [nodes.literal(rawtext, shown)], []


def setup(app: Any) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.doctest")
    app.add_directive("doctest", MessageDoctest, override=True)
    app.add_role("flashinfer-message", message_role)
    # env_version: a new one makes Sphinx drop the doctrees an older rendering left.
    return {"env_version": 1, "parallel_read_safe": True, "parallel_write_safe": True}

"""The dispatcher's internals, one job per module; import from ``flashinfer.backend_dispatch``
(``flashinfer.backend_families`` and ``flashinfer.aliasing`` for the families and the overlap
rules).

Imports flow one way, each module only from those above it (code generation is the leaf
package ``flashinfer.codegen``; the op registry is ``flashinfer.gating.op_registry``):

- ``overlap``: :class:`OverlapRule`, whether an op's written tensors may overlap.
- ``families``: what the torch and Triton backend families support, as data.
- ``errors``: the exceptions a call raises.
- ``markers``: the compute capabilities a backend's support checker declares.
- ``capability``: the compute capability of a call and what a checker's marks say about it.
- ``call_specs``: how to call a checker or the heuristic with the API's arguments, and
  what a check may return (a checker: a bool; a heuristic: a list of names).
- ``thread_state``: each thread's record of its last ``"auto"`` call (and of the call whose
  body runs, for calls nested in it).
- ``tuner_view``: what the dispatcher may ask the autotuner, without importing it.
- ``backend_names``: API and backend names as users write them, checked.
- ``restrictions``: ``use_backends`` and ``FLASHINFER_BACKENDS``: what ``"auto"`` may use.
- ``choice_log``: one log line per automatic choice (``flashinfer.dispatch``).
- ``declarations``: :class:`Backend` (a backend's name, checker and implementation as one
  value) and the reading of a backend table, names checked.
- ``verdicts``: the verdict cache (what a call signature's checks decided) and how a
  signature is read.
- ``plan``: what is decided once, at decoration: the facts and checks of an API.
- ``selection``: the one selection: which backends may run an ``"auto"`` call, in what
  order, and why not the others (the texts about the gate are built by
  ``flashinfer.gating.messages``).
- ``explain``: ``op.explain()``, what an ``"auto"`` call would do and why.
- ``emitter``: the op's generated public function (the happy path only).
- ``op``: :class:`BackendRequirementOp` (the Python paths of a call, routing, upstream's
  query API), recorded in ``flashinfer.gating.op_registry`` when built.
"""

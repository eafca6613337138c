"""Code generation, a leaf of the package: it imports nothing else of ``flashinfer``.

``compiler``: the one compiler of generated code (the package's only ``exec``) and the
parameter lists it re-declares; ``generated``: the package under which each generated
namespace is a module.  Gating (the experimental marker's wrappers), dispatch (the fast path,
the function for compilers) and the autotuner (routers, key readers) all import it.
"""

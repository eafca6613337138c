"""The package of generated code: each generated namespace is a module under this one.

The dispatcher's fast path, the experimental marker's wrappers, the autotuner's routers and
key readers and each API's function for compilers are compiled into module namespaces made
by :func:`flashinfer.codegen.compiler.module_namespace`, registered in :data:`sys.modules`
as ``flashinfer.codegen.generated.<name>`` and set as attributes here, so that a function's
``__module__`` and its frame's ``__name__`` name a module that holds its globals.
"""

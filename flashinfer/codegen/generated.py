"""The package of generated code: each generated namespace is a module under this one."""

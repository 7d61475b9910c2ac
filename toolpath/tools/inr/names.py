"""The activations an INR can use, by name: torch-free, so the tools' module (imported by `toolpath tools list`)
can check an argument without loading torch. activations.LAYERS maps each name to its layer."""

ACTIVATIONS = ("cosmo", "siren", "wire", "gauss", "finer")

"""What ``polymm.backends()`` lists for ``cpu``, apart from the backend so that listing it
imports neither Numba nor the kernels."""

#: The backend's listing; :class:`~polymm_numba.backend.CPUBackend` takes its attributes from here.
INFO = {
    "array_library": "numpy",
    "default_for": ("numpy",),
    "priority": 0,
    "algorithms": ("naive", "tiled", "auto"),
}

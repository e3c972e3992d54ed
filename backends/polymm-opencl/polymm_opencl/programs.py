"""OpenCL programs: rendered from the shared kernel source, built, and kept.

Each program is built once per (context, device, kernel variant); a build that fails is
remembered as its :class:`KernelBuildError` and raised again, never retried. A first failure
is retried once under a new driver-cache key, since a driver's on-disk cache can hand back a
corrupted build of a good source.
"""

from __future__ import annotations

import time
import warnings

from polymm.compilation import compiled
from polymm.kernels import kernel_name, render

__all__ = ["KernelBuildError", "ProgramCache"]


class KernelBuildError(RuntimeError):
    """An OpenCL program failed to build; the message carries the compiler log.

    ``variant`` names what failed (kernel, dtype, parameters), ``device`` where."""

    __module__ = "polymm_opencl"  # the name it is caught by, and printed by tracebacks, as before the split

    def __init__(self, message, variant="", device=""):
        super().__init__(message)
        self.variant, self.device = variant, device


#: Appended to a source whose first build failed: a new key for the driver's on-disk cache.
#: (A comment would not do: drivers key compiled code by the program's IR, not its text.)
_REBUILT = "\n__constant int polymm_rebuilt_after_a_failed_build = 1;\n"


class ProgramCache:
    """The programs one backend built, or the error their build raised, by (context, device,
    kernel, dtype, parameters, fast-path flags)."""

    __slots__ = ("_programs",)

    def __init__(self):
        self._programs: dict = {}

    def program(self, facts, kernel, dtype, params, **flags):
        """The built program; built once per (context, device, variant); ``flags``: the
        vector paths :func:`polymm.kernels.fast_path` allows."""
        key = (facts.program_key, kernel, dtype.str, params, tuple(sorted(flags.items())))
        found = self._programs.get(key)
        if found is not None:
            if isinstance(found, KernelBuildError):  # failed before: not built again
                raise found
            return found
        try:
            program = self._build(facts, kernel, dtype, params, flags)
        except KernelBuildError as exc:
            exc.variant = f"{kernel} {dtype} {params}" + (" (vector loads)" if any(flags.values()) else "")
            exc.device = facts.name
            self._programs[key] = exc.with_traceback(None)  # keeps no frames (nor programs) alive
            raise
        self._programs[key] = program
        return program

    def _build(self, facts, kernel, dtype, params, flags):
        """Build the variant; a failure is tried once more under a new driver-cache key.

        Drivers keep compiled programs on disk (PoCL's kernel cache, NVIDIA's
        ComputeCache), keyed by the source: a corrupted entry hands back a broken
        program every time.  A marker constant makes the program a new key, so the
        second build compiles afresh (and is cached).  If that one fails too, the
        source itself does not build here, and the error stands."""
        source = render("opencl", kernel, dtype, params, **flags)
        try:
            return self._build_source(facts, source, kernel, dtype, params)
        except KernelBuildError as exc:
            first = str(exc).splitlines()[0]
        program = self._build_source(facts, source + _REBUILT, kernel, dtype, params)
        warnings.warn(
            f"polymm opencl: the driver's build of the {kernel} kernel for {dtype} on {facts.name} "
            f"was unusable, probably a corrupted cache entry ({first}); built again afresh",
            RuntimeWarning,
            stacklevel=5,
        )
        return program

    def _build_source(self, facts, source, kernel, dtype, params):
        import pyopencl as cl

        queue = facts.queue
        options = []
        if params is not None and params.maxrreg and facts.nvidia:
            options.append(f"-cl-nv-maxrregcount={params.maxrreg}")
        start = time.perf_counter()
        try:
            program = cl.Program(queue.context, source).build(options=options, devices=[facts.device])
        except cl.RuntimeError as exc:  # build failure: PyOpenCL's message holds the log
            raise KernelBuildError(
                f"polymm: building the OpenCL {kernel} kernel for {dtype} on {facts.name} failed ({params}):\n{exc}"
            ) from exc
        try:
            cl.Kernel(program, kernel_name(kernel))
            compiled("opencl", dtype, kernel, time.perf_counter() - start)  # or loaded from the driver's cache
            return program
        except cl.Error as exc:  # e.g. PoCL silently dropping a kernel it cannot lower
            log = program.get_build_info(facts.device, cl.program_build_info.LOG)
            error = KernelBuildError(
                f"polymm: the OpenCL {kernel} kernel for {dtype} is missing from the program built on "
                f"{facts.name} ({params}): {exc}\ncompiler log:\n{log}"
            )
        # Released now, not at exit: PoCL aborts the process if a program it
        # could not lower is still alive when it shuts down.
        del program
        raise error

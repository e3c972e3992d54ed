"""polymm's tools, on top of the runtime: the ``polymm`` command line (:mod:`.cli`), benchmarks
(:mod:`.bench`, the cliff suite :mod:`.cliffs`, :mod:`.timing`), :mod:`.explain`, the tuner
(:mod:`.tune`), the fuzzer (:mod:`.fuzz`) and the memory soak (:mod:`.soak`).

They use the runtime's public API and the backends through the registry; the runtime
(dispatch, registry, arrays, precision, kernels, dask) never imports them.
"""

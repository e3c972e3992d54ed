#!/usr/bin/env bash
# Session 8 of 2026-11-26 on the H100 (float64 wide tiles in m16n8k16, complex128 in the wide
# tiles unswapped): session 7's script (copied into .device/ beside this one) with new fuzz seeds,
# 20262161-2 for every dtype and 20262171-2 for int8/uint8.  `session8.sh proof|cliffs $OUT`.
FUZZ_SEEDS=20262160 FUZZ_SEEDS_8BIT=20262170 exec bash .device/session7.sh "$@"

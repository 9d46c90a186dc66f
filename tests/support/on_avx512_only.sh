#!/bin/sh
# Runs its arguments where the CPU has AVX-512F; elsewhere exits 77, which CTest reports as
# skipped: capping such a CPU at AVX2 (WPK_MAX_ISA=avx2) changes nothing, so a capped run would
# only repeat the uncapped one.
grep -qw avx512f /proc/cpuinfo 2>/dev/null || { echo "no AVX-512F: the AVX2 cap changes nothing here"; exit 77; }
exec "$@"

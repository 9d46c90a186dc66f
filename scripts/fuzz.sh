#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, AddressSanitizer, oneDNN on) into build-fuzz/ and runs each
# for a bounded time from its seed corpus; fails on any crash, leak, timeout or out-of-memory.
# scripts/test.sh runs it (60 s a target); longer runs: scripts/fuzz.sh 600.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET ...]     (targets: import tensor cache)
# Findings are written to build-fuzz/findings/; a new one belongs in tests/fuzz/regressions
# (import) with the fix, where the unit tests replay it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(import tensor cache)

scripts/install_packages.sh clang libclang-rt-14-dev libomp-14-dev cmake ccache
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DWPK_BUILD_FUZZERS=ON \
  -DWPK_BUILD_TESTS=OFF > build-fuzz.cmake.log 2>&1 || { cat build-fuzz.cmake.log; exit 1; }
cmake --build build-fuzz -j2 --target $(printf 'wpk_%s_fuzz ' "${targets[@]}")

# Seeds: the inputs fuzzing once failed on, small models with constant weights that the oneDNN
# and cpu backends prepare kernels for (scripts/make_fuzz_seeds.py), and ONNX node tests (models
# and tensor files from libonnx-testdata) covering the ops that build shapes from data, and a few
# opset-6 models.
node_tests=/usr/share/libonnx-testdata/data/node
import_seeds=(reshape_extended_dims reshape_negative_dim expand_dim_changed constantofshape_int_zeros tile
  range_float_type_positive_delta_expanded resize_upsample_sizes_nearest constant_pad edge_pad slice concat_1d_axis_0
  conv_with_strides_padding convtranspose_pads maxpool_2d_pads averagepool_2d_ceil gemm_all_attributes
  matmul_4d batchnorm_example layer_normalization_3d_axis_negative_3_epsilon_expanded softmax_axis_1
  split_equal_parts_1d unsqueeze_negative_axes squeeze_negative_axes gather_1 scatternd where_example
  transpose_all_permutations_0 reduce_mean_keepdims_example lrn instancenorm_example
  qlinearconv qlinearmatmul_2D quantizelinear_axis dequantizelinear_axis dynamicquantizelinear matmulinteger
  if loop11 scan9_sum scan_sum loop13_seq sequence_insert_at_back optional_get_element)
# Models of opset 6, which the importer rewrites to opset 7 (src/graph/onnx_upgrade.cpp).
old_opset_tests=(pytorch-converted/test_PReLU_2d_multiparam pytorch-converted/test_BatchNorm2d_eval
  pytorch-converted/test_Softsign pytorch-operator/test_operator_addmm pytorch-operator/test_operator_add_broadcast)
seeds_for() {
  case "$1" in
    import) echo tests/fuzz/regressions tests/fuzz/seeds/import; for s in "${import_seeds[@]}"; do [ -d "$node_tests/test_$s" ] && echo "$node_tests/test_$s"; done
      for s in "${old_opset_tests[@]}"; do [ -d "$node_tests/../$s" ] && echo "$node_tests/../$s"; done ;;
    tensor) for s in add cast_FLOAT_to_FLOAT16 gather_1 reshape_extended_dims; do echo "$node_tests/test_$s/test_data_set_0"; done ;;
    cache) echo tests/fuzz/seeds/cache ;;
  esac
}

mkdir -p build-fuzz/findings
status=0
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t
  mkdir -p "$corpus"
  echo "fuzz: wpk_${t}_fuzz for ${seconds} s"
  # A fixed seed (FUZZ_SEED, default 1): a run explores the same inputs each time, so what fails
  # in CI fails here too.
  if ! build-fuzz/tests/wpk_${t}_fuzz -seed="${FUZZ_SEED:-1}" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 \
      -print_final_stats=1 -artifact_prefix=build-fuzz/findings/${t}- "$corpus" $(seeds_for "$t") \
      > "build-fuzz/$t.log" 2>&1; then
    echo "fuzz: wpk_${t}_fuzz FAILED (build-fuzz/$t.log, inputs in build-fuzz/findings/):"
    grep -E "ERROR|SUMMARY|Test unit written" "build-fuzz/$t.log" | head -20
    status=1
  fi
  grep -E "^stat::number_of_executed_units|^stat::new_units_added|cov: " "build-fuzz/$t.log" | tail -3
done
exit $status

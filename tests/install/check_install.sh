#!/usr/bin/env bash
# Installs a built wpk into a fresh prefix and uses it as a new user's project would:
#   tests/install/check_install.sh BUILD_DIR MODELS_DIR
# Checks: each public header compiles alone and names no dependency's header; a CMake project
# with find_package(wpk) (wpk::wpk, and wpk::wpk_static beside a shared libwpk) and plain
# compiler lines from pkg-config (and --static) build and run ResNet-18 against PyTorch's output; a shared
# libwpk has a versioned soname and exports only wpk:: symbols; the installed `wpk` tool runs.
set -euo pipefail
build=$(cd "$1" && pwd)
models=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" > "$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
libdir=$(dirname "$(find "$prefix" -name wpk.pc)")/..
model=$models/resnet18.onnx
data=$models/resnet18/test_data_set_0
cxx=${CXX:-c++}
launcher=$(command -v ccache || true)

echo "== public headers: each compiles alone, none includes a dependency's header"
for h in "$prefix"/include/wpk/*.hpp; do
  echo "#include <wpk/$(basename "$h")>" | $launcher "$cxx" -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I "$prefix/include" -x c++ - \
    || fail "$(basename "$h") does not compile alone"
done
if grep -nE '#include *[<"](google|onnx|dnnl|oneapi|Eigen|unsupported|spdlog|fmt|omp)' "$prefix"/include/wpk/*.hpp; then
  fail "a public header includes a dependency's header"
fi

run_consumer() {  # BINARY LABEL
  "$1" "$model" "$data/input_0.pb" "$data/output_0.pb" || fail "$2: the consumer's run"
}

echo "== find_package(wpk): wpk::wpk"
cmake -S "$here/consumer" -B "$work/cmake-shared" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher} > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure with find_package"; }
cmake --build "$work/cmake-shared" > "$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build with find_package"; }
run_consumer "$work/cmake-shared/consumer" "find_package wpk::wpk"

if [ -e "$libdir/libwpk.so" ]; then
  echo "== find_package(wpk): wpk::wpk_static"
  cmake -S "$here/consumer" -B "$work/cmake-static" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release -DWPK_TARGET=wpk::wpk_static \
    ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher} > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure for wpk::wpk_static"; }
  cmake --build "$work/cmake-static" > "$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build with wpk::wpk_static"; }
  readelf -d "$work/cmake-static/consumer" | grep -q 'libwpk\.so' && fail "wpk::wpk_static linked the shared library"
  run_consumer "$work/cmake-static/consumer" "find_package wpk::wpk_static"

  echo "== shared libwpk: soname and exports"
  soname=$(readelf -d "$libdir/libwpk.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
  [[ "$soname" =~ ^libwpk\.so\.[0-9]+\.[0-9]+$ ]] || fail "soname '$soname' is not libwpk.so.MAJOR.MINOR"
  readelf -d "$work/cmake-shared/consumer" | grep -q "$soname" || fail "wpk::wpk did not link the shared library"
  exported=$(nm -D --defined-only "$libdir/libwpk.so" | awk '{print $3}' | c++filt)
  [ "$(echo "$exported" | grep -c 'wpk::Session::run')" -ge 1 ] || fail "wpk::Session::run is not exported"
  others=$(echo "$exported" | grep -vE '^(typeinfo for |typeinfo name for |vtable for )?wpk::' | grep -vE '^(_init|_fini|_edata|_end|__bss_start)$' || true)
  [ -z "$others" ] || fail "libwpk.so exports more than the wpk:: API: $(echo "$others" | head -5)"
  echo "$(echo "$exported" | wc -l) symbols exported, all wpk::"
fi

echo "== pkg-config"
export PKG_CONFIG_PATH=$libdir/pkgconfig
pkg-config --modversion wpk > /dev/null || fail "pkg-config does not find wpk.pc"
pkg-config --print-errors --exists wpk || fail "wpk.pc"
link=(--libs)
[ -e "$libdir/libwpk.so" ] || link=(--libs --static)
# shellcheck disable=SC2046
$launcher "$cxx" -std=c++17 -O2 "$here/consumer/consumer.cpp" -o "$work/pkg-consumer" $(pkg-config --cflags "${link[@]}" wpk) \
  || fail "build with pkg-config"
LD_LIBRARY_PATH=$libdir run_consumer "$work/pkg-consumer" "pkg-config"
if [ -e "$libdir/libwpk.so" ]; then
  # The static library through pkg-config too: its private dependencies must be listed.
  # shellcheck disable=SC2046
  $launcher "$cxx" -std=c++17 -O2 "$here/consumer/consumer.cpp" -o "$work/pkg-static-consumer" $(pkg-config --cflags wpk) \
    $(pkg-config --libs --static wpk | sed 's/-lwpk /-l:libwpk.a /') || fail "static build with pkg-config --static"
  readelf -d "$work/pkg-static-consumer" | grep -q 'libwpk\.so' && fail "pkg-config --static linked the shared library"
  run_consumer "$work/pkg-static-consumer" "pkg-config --static"
fi
grep -q MIT "$PKG_CONFIG_PATH/wpk.pc" || fail "wpk.pc does not name the licence"
[ -f "$prefix/share/doc/wpk/LICENSE" ] || fail "LICENSE is not installed"

echo "== the installed wpk tool"
"$prefix/bin/wpk" info "$model" > "$work/info.log" || fail "installed wpk info"
echo "install check passed"

#!/bin/sh
# The install test: install the build tree into a fresh prefix, then, against that prefix alone,
# build and run an application (find_package -> parenchyma::core), check pkg-config, build an
# out-of-tree plugin (find_package -> parenchyma::sdk + parenchyma_add_plugin), and check that
# the application discovers, ranks and uses it through PARENCHYMA_PLUGIN_PATH. The application
# and the plugin are built from the examples installed in share/parenchyma/examples. The
# installed parenchyma-conformance must pass the installed plugins (the framework suite and, per
# bundle suite, the cases that show each bundle found and computing), the out-of-tree plugin and the
# installed mock example (framework and its example bundle, built against the installed SDK),
# and must report a deliberately broken plugin failing by name: a mock whose fill is wrong
# (PARENCHYMA_MOCK_BREAK=fill) and a file that is no library at all. A program built with
# nothing but pkg-config's flags (and a -std= of its own: the flags carry none) must start
# without LD_LIBRARY_PATH, and the documentation (with its plots), licence and changelog must be
# installed; parenchyma-info --help names the installed documentation.
#   run.sh <build dir> <source dir> <work dir> <cmake generator> <c++ compiler> [extra flags]
#          [toolchain file] [emulator]
# extra flags: compile and link flags for the two projects (the sanitizer flags of a sanitizer
# build, whose installed library needs its runtime in the programs that load it). A cross build
# (aarch64 under qemu) passes its toolchain file, which the projects configure with, and the
# emulator that runs every program built for the target.
set -eu
build=$1 src=$2 work=$3 generator=$4 cxx=$5 san_flags=${6:-} toolchain=${7:-} emulator=${8:-}
# Release as a user builds; in a sanitizer build, Debug (-O0): these programs only have to build
# and load the installed library, whose own build is what the sanitizer checks (CI time: the three
# projects take a minute under ASan at -O3).
build_type=Release
[ -z "$san_flags" ] || build_type=Debug
here=$src/tests/install
prefix=$work/prefix

step() { printf '\n== %s\n' "$*"; }
# How the projects find the compiler: the user's compiler, or the cross build's toolchain file.
if [ -n "$toolchain" ]; then
  compiler_arg=-DCMAKE_TOOLCHAIN_FILE=$toolchain
else
  compiler_arg=-DCMAKE_CXX_COMPILER=$cxx
fi
# A program for the target: itself, or a wrapper that runs it under the emulator.
target_program() {
  if [ -z "$emulator" ]; then
    printf '%s\n' "$1"
    return
  fi
  w=$work/emulated/$(basename "$1")
  mkdir -p "$work/emulated"
  printf '#!/bin/sh\nexec %s %s "$@"\n' "$emulator" "$1" > "$w"
  chmod 755 "$w"
  printf '%s\n' "$w"
}
# An empty environment, except the sanitizer runtimes' own options in a sanitizer build.
# No parenchyma variable and no library path; PATH and HOME stay (PoCL runs the linker to build
# kernels, and keeps its cache below HOME).
clean_env() {
  env -i PATH="$PATH" ${HOME:+HOME=$HOME} ${POCL_CACHE_DIR:+POCL_CACHE_DIR=$POCL_CACHE_DIR} \
    ${ASAN_OPTIONS:+ASAN_OPTIONS=$ASAN_OPTIONS} ${LSAN_OPTIONS:+LSAN_OPTIONS=$LSAN_OPTIONS} \
    ${UBSAN_OPTIONS:+UBSAN_OPTIONS=$UBSAN_OPTIONS} ${TSAN_OPTIONS:+TSAN_OPTIONS=$TSAN_OPTIONS} "$@"
}
fail() { printf 'FAILED: %s\n' "$*"; exit 1; }

rm -rf "$work"
mkdir -p "$work"
chmod 755 "$work"

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" > "$work/install.log" || { cat "$work/install.log"; fail "install"; }
libdir=$prefix/lib
[ -d "$libdir" ] || libdir=$(dirname "$(find "$prefix" -name 'libparenchyma-core.so' | head -n 1)")
ls "$libdir"/libparenchyma-core.so* > /dev/null || fail "no libparenchyma-core.so under $prefix"
ls "$libdir/parenchyma/plugins/" | grep -q '^parenchyma-native\.so$' \
  || fail "the native plugin is not installed in $libdir/parenchyma/plugins"
[ -f "$prefix/share/doc/parenchyma/abi.md" ] && [ -f "$prefix/share/doc/parenchyma/config.md" ] \
  || fail "the documentation (docs/) is not installed in $prefix/share/doc/parenchyma"
for f in LICENSE LICENSE-MIT LICENSE-APACHE CHANGELOG.md CONTRIBUTING.md; do
  [ -f "$prefix/share/doc/parenchyma/$f" ] || fail "$f is not installed in $prefix/share/doc/parenchyma"
done
# parenchyma-info names the documentation of the prefix it was installed into, not the one
# configured at build time.
help=$(clean_env "$(target_program "$prefix/bin/parenchyma-info")" --help) || fail "parenchyma-info --help"
printf '%s\n' "$help" | grep -q "Documentation: $prefix/share/doc/parenchyma " \
  || { printf '%s\n' "$help"; fail "parenchyma-info --help does not name $prefix/share/doc/parenchyma"; }
[ -f "$prefix/share/doc/parenchyma/plots/c1_native_dispatch.svg" ] \
  || fail "the plots the pages show are not installed in $prefix/share/doc/parenchyma/plots"
conformance=$prefix/bin/parenchyma-conformance
[ -x "$conformance" ] || fail "parenchyma-conformance is not installed in $prefix/bin"
conformance=$(target_program "$conformance")
examples=$prefix/share/parenchyma/examples
for f in oot_plugin/CMakeLists.txt oot_plugin/oot.cpp consumer/CMakeLists.txt consumer/main.cpp \
         mock/CMakeLists.txt mock/mock.hpp mock/entry.cpp mock/bundle/blas_mock.cpp mock/README.md; do
  [ -f "$examples/$f" ] || fail "the example $f is not installed in $examples"
done

# The framework suite whole, and from each bundle suite the cases that show an installed bundle
# is found, serves every op and computes (gemm, the reductions, a convolution): the full bundle
# suites run on these same plugins in the build tree (blas_conformance_*, nn_conformance_*); here
# they took 100 of this test's 155 s under ThreadSanitizer.
step "the installed parenchyma-conformance on the installed plugins ($libdir/parenchyma/plugins)"
out=$(clean_env "$conformance" "$libdir/parenchyma/plugins" --quiet --filter framework/ \
  --filter "blas/gemm f32 NN m=33 n=65 k=17 ld+3" --filter "blas/dot/asum/nrm2 f32 n=1000 inc=1" \
  --filter "nn/every op and dtype is served" --filter "nn/convolution f32 N3 C3 7x5 K4 3x3" 2>&1) \
  || { printf '%s\n' "$out"; fail "the installed plugins do not pass parenchyma-conformance"; }
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q '^native: [0-9]* passed, 0 failed' || fail "native was not tested"

step "consumer: configure and build the installed example against the installed package"
cmake -S "$examples/consumer" -B "$work/consumer" -G "$generator" "$compiler_arg" \
  -DCMAKE_CXX_FLAGS="$san_flags" -DCMAKE_EXE_LINKER_FLAGS="$san_flags" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=$build_type > "$work/consumer.log" 2>&1 \
  || { cat "$work/consumer.log"; fail "consumer configure"; }
cmake --build "$work/consumer" -j 2 >> "$work/consumer.log" 2>&1 \
  || { cat "$work/consumer.log"; fail "consumer build"; }
consumer=$(target_program "$work/consumer/consumer")

step "consumer with an empty environment: plugins found next to the installed core"
out=$(clean_env "$consumer" 2>&1) || { printf '%s\n' "$out"; fail "consumer run"; }
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q '^ranking:.* native' || fail "native is not in the ranking"
printf '%s\n' "$out" | grep -q '^backend: [a-z0-9_]*:0 ' || fail "no backend selected"
printf '%s\n' "$out" | grep -q '^tensor: ok$' || fail "tensor round trip"

step "oot_plugin: the installed example, an out-of-tree plugin built against the installed SDK alone"
cmake -S "$examples/oot_plugin" -B "$work/oot" -G "$generator" "$compiler_arg" \
  -DCMAKE_CXX_FLAGS="$san_flags" -DCMAKE_MODULE_LINKER_FLAGS="$san_flags" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=$build_type > "$work/oot.log" 2>&1 \
  || { cat "$work/oot.log"; fail "oot configure"; }
cmake --build "$work/oot" -j 2 >> "$work/oot.log" 2>&1 || { cat "$work/oot.log"; fail "oot build"; }
drop=$work/dropped-plugins
mkdir -p "$drop"
chmod 755 "$drop"
cp "$work/oot/plugins/parenchyma-oot.so" "$drop/"
chmod 755 "$drop/parenchyma-oot.so"
exported=$(nm -D --defined-only "$drop/parenchyma-oot.so" | awk '$2 ~ /[TD]/ {print $3}' | grep -v '^_' || true)
[ "$exported" = "pcy_framework_entry" ] || fail "the plugin exports more than its entry symbol: $exported"

step "consumer with PARENCHYMA_PLUGIN_PATH=$drop: oot discovered and ranked by device kind"
out=$(clean_env PARENCHYMA_PLUGIN_PATH="$drop" "$consumer" 2>&1) || { printf '%s\n' "$out"; fail "consumer run with oot"; }
printf '%s\n' "$out"
ranking=$(printf '%s\n' "$out" | sed -n 's/^ranking://p')
case " $ranking " in
  *" oot "*) ;;
  *) fail "oot is not in the ranking:$ranking" ;;
esac
# oot is unlisted with a GPU: by device kind it ranks before native (a listed CPU framework),
# unless native serves an extension (BLAS) that oot lacks: then oot is demoted after it
# (docs/config.md, "Coverage").
if [ -e "$libdir/parenchyma/plugins/parenchyma-blas-native.so" ]; then
  case " $ranking " in
    *" native oot "* | *" native "*" oot "*) ;; # adjacent, or with others between
    *) fail "oot (GPU, no BLAS ops) is not demoted after native (CPU, BLAS):$ranking" ;;
  esac
else
  case " $ranking " in
    *" oot native "* | *" oot "*" native "*) ;;
    *) fail "oot (GPU, unlisted) does not rank before native (CPU):$ranking" ;;
  esac
fi

step "consumer oot: an explicit request selects and uses it"
out=$(clean_env PARENCHYMA_PLUGIN_PATH="$drop" "$consumer" oot 2>&1) || { printf '%s\n' "$out"; fail "consumer oot"; }
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q '^backend: oot:0 ' || fail "oot was not selected"
printf '%s\n' "$out" | grep -q '^tensor: ok$' || fail "tensor round trip on oot"

step "without PARENCHYMA_PLUGIN_PATH an explicit oot request is an error, not a fallback"
if out=$(clean_env "$consumer" oot 2>&1); then
  printf '%s\n' "$out"
  fail "oot was selected although it was not on the search path"
fi
printf '%s\n' "$out" | grep -q 'oot' || fail "the error does not name oot: $out"
printf '%s\n' "$out"

step "the installed parenchyma-conformance on the out-of-tree plugin ($drop)"
out=$(clean_env "$conformance" "$drop" --required 2>&1) \
  || { printf '%s\n' "$out"; fail "oot does not pass parenchyma-conformance"; }
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q '^oot: [0-9]* passed, 0 failed' || fail "oot was not tested"

step "ctest in the out-of-tree plugin's build: parenchyma::conformance from the CMake package"
out=$(clean_env "$(command -v ctest)" --test-dir "$work/oot" --output-on-failure 2>&1) \
  || { printf '%s\n' "$out"; fail "the oot project's conformance test (parenchyma::conformance)"; }
printf '%s\n' "$out" | grep -q '100% tests passed' || { printf '%s\n' "$out"; fail "ctest ran no test"; }
printf '%s\n' "$out" | tail -n 3

step "mock: the installed example (framework and bundle) built against the installed SDK"
cmake -S "$examples/mock" -B "$work/mock" -G "$generator" "$compiler_arg" \
  -DCMAKE_CXX_FLAGS="$san_flags" -DCMAKE_MODULE_LINKER_FLAGS="$san_flags" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=$build_type > "$work/mock.log" 2>&1 \
  || { cat "$work/mock.log"; fail "mock example configure"; }
cmake --build "$work/mock" -j 2 >> "$work/mock.log" 2>&1 || { cat "$work/mock.log"; fail "mock example build"; }
mock=$work/mock/plugins
ls "$mock/parenchyma-mock.so" "$mock/parenchyma-blas-mock.so" > /dev/null || fail "the mock example built no plugins in $mock"

step "the installed parenchyma-conformance on the mock example, as built and with 3 devices"
out=$(clean_env "$conformance" "$mock" --require-load --require-devices --quiet 2>&1) \
  || { printf '%s\n' "$out"; fail "the mock example does not pass parenchyma-conformance"; }
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q '^mock: [0-9]* passed, 0 failed' || fail "mock was not tested"
out=$(clean_env PARENCHYMA_MOCK_DEVICES=3 "$conformance" "$mock" --suite framework 2>&1) \
  || { printf '%s\n' "$out"; fail "the mock example with 3 devices does not pass"; }
printf '%s\n' "$out" | grep -q ': 3 device(s), first: Mock GPU 0$' || fail "PARENCHYMA_MOCK_DEVICES=3 was not seen"
printf '%s\n' "$out" | grep -q '^  ok    framework/every device keeps its own bytes$' || fail "the per-device case did not pass"
printf '%s\n' "$out" | tail -n 2

step "a broken plugin is reported failing by name: a mock whose fill is wrong, a file that is no library"
if out=$(clean_env PARENCHYMA_MOCK_BREAK=fill "$conformance" "$mock" --suite framework 2>&1); then
  printf '%s\n' "$out"
  fail "a mock with a broken fill passed parenchyma-conformance"
fi
printf '%s\n' "$out" | grep -q '^  FAIL  framework/fill with 1, 2, 4, 8 and 16-byte patterns$' \
  || { printf '%s\n' "$out"; fail "the broken fill is not reported by its case"; }
printf '%s\n' "$out" | grep -q '^mock: [0-9]* passed, 1 failed' || fail "the broken mock's summary is wrong"
broken=$work/broken-plugins
mkdir -p "$broken"
chmod 755 "$broken"
cp "$drop/parenchyma-oot.so" "$broken/"
printf 'not a shared library\n' > "$broken/parenchyma-garbage.so"
chmod 644 "$broken/parenchyma-garbage.so"
if out=$(clean_env "$conformance" "$broken" --json 2>&1); then
  printf '%s\n' "$out"
  fail "a directory with a file that is no library passed parenchyma-conformance"
fi
printf '%s\n' "$out" | grep -q '"name": "load/parenchyma-garbage.so"' \
  || { printf '%s\n' "$out"; fail "the refused file is not reported by name"; }
printf '%s\n' "$out" | grep -q 'failed at stage load' || fail "the loader's reason is not in the report"
printf '%s\n' "$out" | grep -q '"failed": 1,' || fail "oot should still pass beside the refused file"
printf '%s\n' "$out" | grep '"reason":' | head -n 2

step "pkg-config --cflags --libs parenchyma (PKG_CONFIG_PATH=$libdir/pkgconfig)"
if command -v pkg-config > /dev/null 2>&1; then
  flags=$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags --libs parenchyma) \
    || fail "pkg-config does not know parenchyma"
  printf '%s\n' "$flags"
  incdir=$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --variable=includedir parenchyma)
  pclibdir=$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --variable=libdir parenchyma)
  [ -f "$incdir/parenchyma/parenchyma.hpp" ] \
    || fail "pkg-config's includedir $incdir lacks parenchyma/parenchyma.hpp: the .pc file must be relocatable (prefix from \${pcfiledir}), since the package was installed with --prefix $prefix"
  [ -e "$pclibdir/libparenchyma-core.so" ] || fail "pkg-config's libdir $pclibdir lacks libparenchyma-core.so"
  # The language standard is the user's choice (C++20 or newer): a -std= in the flags would
  # override a newer one given before it.
  case " $flags " in *" -std="*) fail "pkg-config's flags carry a language standard: $flags" ;; esac
  # Nothing but pkg-config's flags and a standard (the sanitizer's own aside), and run with no
  # LD_LIBRARY_PATH: the prefix is not in the loader's path, so the flags must say where the
  # library is.
  # shellcheck disable=SC2086
  "$cxx" -std=c++20 -o "$work/consumer-pc" "$here/consumer/main.cpp" $san_flags $flags \
    || fail "building the consumer with pkg-config's flags"
  out=$(clean_env "$(target_program "$work/consumer-pc")" 2>&1) \
    || { printf '%s\n' "$out"; fail "the program built with pkg-config's flags does not run without LD_LIBRARY_PATH (an rpath in the .pc file's Libs?)"; }
  printf '%s\n' "$out" | grep -q '^tensor: ok$' || fail "pkg-config consumer tensor round trip"
else
  printf 'pkg-config is not installed: step not run\n'
fi

printf '\nPASSED: install, docs, examples, consumer, pkg-config, out-of-tree plugin, parenchyma-conformance\n'

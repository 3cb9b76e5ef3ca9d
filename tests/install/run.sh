#!/bin/sh
# The install test: install the build tree into a fresh prefix, then, against that prefix alone,
# build and run an application (find_package -> parenchyma::core), check pkg-config, build an
# out-of-tree plugin (find_package -> parenchyma::sdk + parenchyma_add_plugin), and check that
# the application discovers, ranks and uses it through PARENCHYMA_PLUGIN_PATH, and that it passes
# the framework conformance suite. A program built with nothing but pkg-config's flags must start
# without LD_LIBRARY_PATH, and the documentation must be installed.
#   run.sh <build dir> <source dir> <work dir> <cmake generator> <c++ compiler> [extra flags]
# extra flags: compile and link flags for the two projects (the sanitizer flags of a sanitizer
# build, whose installed library needs its runtime in the programs that load it).
set -eu
build=$1 src=$2 work=$3 generator=$4 cxx=$5 san_flags=${6:-}
here=$src/tests/install
prefix=$work/prefix

step() { printf '\n== %s\n' "$*"; }
# An empty environment, except the sanitizer runtimes' own options in a sanitizer build.
clean_env() {
  env -i ${ASAN_OPTIONS:+ASAN_OPTIONS=$ASAN_OPTIONS} ${LSAN_OPTIONS:+LSAN_OPTIONS=$LSAN_OPTIONS} \
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

step "consumer: configure and build against the installed package"
cmake -S "$here/consumer" -B "$work/consumer" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS="$san_flags" -DCMAKE_EXE_LINKER_FLAGS="$san_flags" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work/consumer.log" 2>&1 \
  || { cat "$work/consumer.log"; fail "consumer configure"; }
cmake --build "$work/consumer" -j 2 >> "$work/consumer.log" 2>&1 \
  || { cat "$work/consumer.log"; fail "consumer build"; }
consumer=$work/consumer/consumer

step "consumer with an empty environment: plugins found next to the installed core"
out=$(clean_env "$consumer" 2>&1) || { printf '%s\n' "$out"; fail "consumer run"; }
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q '^ranking:.* native' || fail "native is not in the ranking"
printf '%s\n' "$out" | grep -q '^backend: [a-z0-9_]*:0 ' || fail "no backend selected"
printf '%s\n' "$out" | grep -q '^tensor: ok$' || fail "tensor round trip"

step "oot_plugin: an out-of-tree plugin built against the installed SDK alone"
cmake -S "$here/oot_plugin" -B "$work/oot" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS="$san_flags" -DCMAKE_MODULE_LINKER_FLAGS="$san_flags" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work/oot.log" 2>&1 \
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
    *" native "*" oot "*) ;;
    *) fail "oot (GPU, no BLAS ops) is not demoted after native (CPU, BLAS):$ranking" ;;
  esac
else
  case " $ranking " in
    *" oot "*" native "*) ;;
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

step "the conformance suite on the out-of-tree plugin"
conformance=$build/bin/test_conformance
if [ -x "$conformance" ]; then
  PARENCHYMA_PLUGIN_PATH="$drop" "$conformance" oot --required || fail "oot does not pass the conformance suite"
else
  printf '%s is not built: step not run\n' "$conformance"
fi

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
  # Nothing but pkg-config's flags (the sanitizer's own aside), and run with no LD_LIBRARY_PATH:
  # the prefix is not in the loader's path, so the flags must say where the library is.
  # shellcheck disable=SC2086
  "$cxx" -o "$work/consumer-pc" "$here/consumer/main.cpp" $san_flags $flags \
    || fail "building the consumer with pkg-config's flags"
  out=$(clean_env "$work/consumer-pc" 2>&1) \
    || { printf '%s\n' "$out"; fail "the program built with pkg-config's flags does not run without LD_LIBRARY_PATH (an rpath in the .pc file's Libs?)"; }
  printf '%s\n' "$out" | grep -q '^tensor: ok$' || fail "pkg-config consumer tensor round trip"
else
  printf 'pkg-config is not installed: step not run\n'
fi

printf '\nPASSED: install, docs, consumer, pkg-config, out-of-tree plugin\n'

#!/usr/bin/env bash
# Builds llama.cpp's RPC server (tools/rpc) and tests/device/llama_rpc_check.cpp (a client of
# ggml's RPC backend, no model needed) from the llama.cpp that PyPI's llama-cpp-python sdist
# vendors ($LLAMA_CPP_PY_VERSION), for tests/device/test_llama_rpc.py, and prints the install
# directory on its last line: bin/rpc-server and bin/llama_rpc_check.
#
# Only ggml is built: its base, the CPU backend and the RPC backend, with the RPC transport's
# RDMA (GGML_RPC_RDMA: ggml/src/ggml-rpc/transport.cpp, libibverbs) forced on, against
# Debian's libibverbs-dev, as a user of the distribution builds it. Static libraries, no
# OpenMP, and no x86 extension beyond x86-64's baseline: the binaries run in the test VM's
# emulated CPU whatever the build machine's is.
#
# Cached under $TBV_CACHE/llama-rpc-<key>, key = hash of the version, this script, the client's
# source, the compiler and libibverbs-dev: a warm cache makes this a hash check. The sdist
# (75 MB) is kept in $TBV_CACHE/src. Cold: the download, then ~1.5 min of build on 2 cores
# (ninja -j2, under nice).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/env.sh
. "$here/scripts/env.sh"

log() { printf 'build-llama-rpc: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

ver=$LLAMA_CPP_PY_VERSION
client=$here/tests/device/llama_rpc_check.cpp
tarball=$TBV_CACHE/src/llama_cpp_python-$ver.tar.gz

key=$( (echo "$ver"; cat "$0" "$client"; gcc --version | head -n 1;
	dpkg-query -W -f '${Package} ${Version}\n' libibverbs-dev 2>/dev/null || true) |
	sha256sum | cut -c1-16)
out=$TBV_CACHE/llama-rpc-$key
if [ -x "$out/bin/rpc-server" ] && [ -x "$out/bin/llama_rpc_check" ]; then
	echo "$out"
	exit 0
fi

for tool in cmake ninja gcc g++; do
	command -v "$tool" >/dev/null || die "$tool not found (apt-get install cmake ninja-build g++)"
done
[ -f /usr/include/infiniband/verbs.h ] || die "no libibverbs headers (apt-get install libibverbs-dev)"

mkdir -p "$TBV_CACHE/src" "$TBV_CACHE/build"
exec 9>"$TBV_CACHE/build/.llama-rpc.lock"
flock 9
if [ -x "$out/bin/rpc-server" ] && [ -x "$out/bin/llama_rpc_check" ]; then  # built while we waited
	echo "$out"
	exit 0
fi

if [ ! -s "$tarball" ]; then
	log "downloading the llama-cpp-python $ver sdist"
	if [ -x "$TBV_VENV/bin/pip" ]; then pip=("$TBV_VENV/bin/pip"); else pip=(python3 -m pip); fi
	# --no-binary llama-cpp-python, not :all:, which would also build pip's build dependencies
	# for the sdist's metadata step from source
	"${pip[@]}" download -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==$ver" \
		-d "$TBV_CACHE/src"
	[ -s "$tarball" ] || die "pip download did not produce $tarball"
fi

src=$TBV_CACHE/build/llama-rpc-$key
bld=$src/build
buildlog=$src/build.log
rm -rf "$src"
mkdir -p "$src"
log "extracting ggml and tools/rpc of llama.cpp from $(basename "$tarball")"
top=llama_cpp_python-$ver/vendor/llama.cpp
tar -xzf "$tarball" -C "$src" --strip-components=3 "$top/ggml" "$top/tools/rpc" "$top/LICENSE"
[ -f "$src/ggml/src/ggml-rpc/transport.cpp" ] ||
	die "no ggml/src/ggml-rpc/transport.cpp in $tarball: this llama.cpp has no RDMA transport"
grep -q 'RDMA activated' "$src/ggml/src/ggml-rpc/transport.cpp" ||
	die "ggml/src/ggml-rpc/transport.cpp in $tarball has no Linux RDMA transport"

# The two programs on top of ggml, as llama.cpp's tools/rpc/CMakeLists.txt builds rpc-server.
cat >"$src/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.14)
project(tbv_llama_rpc C CXX)
add_subdirectory(ggml)
add_executable(rpc-server tools/rpc/rpc-server.cpp)
target_link_libraries(rpc-server PRIVATE ggml)
target_compile_features(rpc-server PRIVATE cxx_std_17)
add_executable(llama_rpc_check $client)
target_link_libraries(llama_rpc_check PRIVATE ggml ggml-rpc)
target_compile_features(llama_rpc_check PRIVATE cxx_std_17)
EOF

# Run a build step with its output in $buildlog; show the end of it if the step fails.
run() {
	if ! nice -n 19 "$@" >>"$buildlog" 2>&1; then
		tail -n 40 "$buildlog" >&2
		die "'$1' failed; full log: $buildlog"
	fi
}

start=$(date +%s)
log "configuring (log: $buildlog)"
noext=()
for ext in SSE42 AVX AVX2 AVX_VNNI BMI2 FMA F16C AVX512; do noext+=("-DGGML_$ext=OFF"); done
run cmake -S "$src" -B "$bld" -GNinja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
	-DGGML_RPC=ON -DGGML_RPC_RDMA=ON -DGGML_CPU=ON -DGGML_NATIVE=OFF "${noext[@]}" \
	-DGGML_OPENMP=OFF -DGGML_CCACHE=OFF -DGGML_BACKEND_DL=OFF
grep -q 'RDMA transport enabled' "$buildlog" || die "CMake did not enable the RDMA transport; see $buildlog"
log "building rpc-server and llama_rpc_check (ninja -j2)"
run ninja -C "$bld" -j2 rpc-server llama_rpc_check

for prog in rpc-server llama_rpc_check; do
	# (grep reads all: with -q it could leave the writer a SIGPIPE, a failure under pipefail)
	readelf -d "$bld/$prog" | grep 'NEEDED.*libibverbs' >/dev/null || die "$prog is not linked to libibverbs"
	strings "$bld/$prog" | grep 'RDMA probed: dev=' >/dev/null || die "$prog has no RDMA transport"
done

tmp=$out.tmp
rm -rf "$tmp"
mkdir -p "$tmp/bin"
cp "$bld/rpc-server" "$bld/llama_rpc_check" "$tmp/bin/"
cp "$src/ggml/src/ggml-rpc/transport.cpp" "$src/LICENSE" "$tmp/"
printf 'llama-cpp-python %s (sdist), ggml built by scripts/build-llama-rpc.sh\n' "$ver" >"$tmp/VERSION"
rm -rf "$out"
mv "$tmp" "$out"
rm -rf "$src"
log "built in $(($(date +%s) - start)) s: $out"
echo "$out"

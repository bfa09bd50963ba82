#!/usr/bin/env bash
# Fuzzes the rank-file reader with libFuzzer (clang, ASan, UBSan).
#   scripts/fuzz.sh [SECONDS]     default 120
# Findings land in build/fuzz/findings; the corpus grows in build/fuzz/corpus.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-120}
"$root/scripts/setup.sh" --no-venv
if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  apt-get install -y -qq clang libclang-rt-14-dev >/dev/null
fi
build="$root/build/fuzz"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMESHSCOPE_FUZZ=ON -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build" --target fuzz_rank_reader fuzz_corpus_driver
mkdir -p "$build/corpus" "$build/findings"
[[ -f "$build/corpus/valid.msdb" ]] || "$build/tests/fuzz/fuzz_corpus_driver" --make-corpus "$build/corpus"
"$build/tests/fuzz/fuzz_rank_reader" -max_total_time="$seconds" -max_len=262144 \
  -artifact_prefix="$build/findings/" "$build/corpus"

# Helpers of the analysis benchmarks (sourced; the script sets $out, a
# scratch folder). measure NAME COMMAND...: runs the command once and prints
# its wall time and peak RSS on one line; its output is left in
# $out/stdout and $out/err. Exit 1 (findings) is a result, not a failure.
measure() {
  local name=$1
  shift
  /usr/bin/time -f "%e %M" -o "$out/time" "$@" >"$out/stdout" 2>"$out/err" || [[ $? -eq 1 ]]
  read -r secs kb < <(tail -n 1 "$out/time")
  printf '%-34s %7.2f s %8.0f MiB\n' "$name" "$secs" "$((kb / 1024))"
}

# Helpers of the CLI test scripts (sourced): counted checks of exit codes and
# output. The script sets $dir and reports "$checks" / "$failures" at the end.
failures=0
checks=0
check() {  # check NAME EXPECTED_RC COMMAND...; output in $out
    local name=$1 want=$2
    shift 2
    checks=$((checks + 1))
    out=$("$@" 2>&1)
    local rc=$?
    if [[ $rc -ne $want ]]; then
        echo "FAIL $name: exit $rc, expected $want"$'\n'"$out"
        failures=$((failures + 1))
        return 1
    fi
    echo "ok   $name"
}
expect() {  # expect NAME PATTERN: $out must match the extended regex
    checks=$((checks + 1))
    if ! grep -Eq -- "$2" <<<"$out"; then
        echo "FAIL $1: output does not match /$2/"$'\n'"$out"
        failures=$((failures + 1))
    fi
}
finish() {  # the summary line; the script's exit code
    echo "$((checks - failures)) passed, $failures failed"
    [[ $failures -eq 0 ]]
}

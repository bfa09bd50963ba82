#!/usr/bin/env bash
# Renders the hostile-fixture HTML report in headless Chromium: the DOM must
# hold no element the recorded strings tried to inject, and a screenshot is
# saved for a person to look at. Exit 77 (skipped) without Chromium.
set -euo pipefail
writer=$1 out=$2
browser=$(command -v chromium || command -v chromium-browser || true)
[[ -n "$browser" ]] || { echo "chromium not found: skipped"; exit 77; }
mkdir -p "$out"
"$writer" "$out/evil-report.html"
flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-extensions)
dom=$(timeout 120 "$browser" "${flags[@]}" --dump-dom "file://$out/evil-report.html" 2>/dev/null)
[[ "$dom" == *"meshscope report"* ]] || { echo "FAIL: report did not render"; exit 1; }
for tag in '<img' '<iframe' '<svg onload' '<b>label'; do
  if [[ "$dom" == *"$tag"* ]]; then echo "FAIL: injected $tag in the DOM"; exit 1; fi
done
if grep -Eq ' on[a-z]+=' <<<"$(grep -o '<[a-z][^>]*>' <<<"$dom")"; then
  echo "FAIL: an element carries an event handler attribute"; exit 1
fi
timeout 120 "$browser" "${flags[@]}" --screenshot="$out/evil-report.png" --window-size=1400,1800 \
  "file://$out/evil-report.html" >/dev/null 2>&1
[[ -s "$out/evil-report.png" ]] || { echo "FAIL: no screenshot"; exit 1; }
echo "ok: DOM clean; screenshot $out/evil-report.png"

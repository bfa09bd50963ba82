#!/usr/bin/env bash
# Installs everything meshscope needs on a Debian 12 machine. Idempotent: when
# the packages are present and the cached virtualenv matches requirements.txt
# it returns within seconds.
#
#   scripts/setup.sh            system packages + Python virtualenv
#   scripts/setup.sh --no-venv  system packages only (core/UI work)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
want_venv=1
[[ "${1:-}" == "--no-venv" ]] && want_venv=0

apt_packages=(
  build-essential cmake ninja-build pkg-config git
  libsqlite3-dev sqlite3 zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libfmt-dev
  qt6-base-dev qt6-base-dev-tools libqt6opengl6-dev libgl-dev
  libimgui-dev
  xvfb xauth libgl1-mesa-dri libglx-mesa0 fonts-dejavu-core
  python3-venv clang-format
  chromium time
)

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

((want_venv)) || exit 0

# The virtualenv lives in a cache folder keyed by the requirements' hash so a
# fresh clone on the same machine reuses it; .venv in the repo links to it.
hash=$(sha256sum "$root/requirements.txt" | cut -c1-16)
cache=${MESHSCOPE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/meshscope}
venv="$cache/venv-$hash"
if [[ ! -f "$venv/.complete" ]]; then
  echo "setup: building Python virtualenv in $venv (torch download takes minutes)" >&2
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -r "$root/requirements.txt"
  touch "$venv/.complete"
fi
# HTA and TensorBoard's profiler plugin for the torch-profiler export test,
# without the JupyterLab and TensorBoard their own requirements pull
# (requirements-trace-tools.txt); keyed by that file's hash.
tools=$(sha256sum "$root/requirements-trace-tools.txt" | cut -c1-16)
if [[ ! -f "$venv/.trace-tools-$tools" ]]; then
  echo "setup: installing HTA and torch-tb-profiler into $venv (requirements-trace-tools.txt)" >&2
  "$venv/bin/python" -m pip install -q --no-deps -r "$root/requirements-trace-tools.txt"
  rm -f "$venv"/.hta-* "$venv"/.trace-tools-*
  touch "$venv/.trace-tools-$tools"
fi
# The framework matrix's Hugging Face transformers (requirements-frameworks.txt),
# with --no-deps for the same reason; keyed by that file's hash.
frameworks=$(sha256sum "$root/requirements-frameworks.txt" | cut -c1-16)
if [[ ! -f "$venv/.frameworks-$frameworks" ]]; then
  echo "setup: installing transformers into $venv (requirements-frameworks.txt)" >&2
  "$venv/bin/python" -m pip install -q --no-deps -r "$root/requirements-frameworks.txt"
  rm -f "$venv"/.frameworks-*
  touch "$venv/.frameworks-$frameworks"
fi
ln -sfn "$venv" "$root/.venv"

"""The README as a manual that stays true: it opens with the title and the
two commands, stays within 500 lines, every file it links exists, and every
`meshscope SUBCOMMAND --option` it shows is one the CLI accepts (checked
against `meshscope SUBCOMMAND --help`).

Usage: python3 readme_test.py MESHSCOPE_CLI README.md"""

import re
import subprocess
import sys
from pathlib import Path

cli, readme = sys.argv[1], Path(sys.argv[2])
text = readme.read_text()
lines = text.splitlines()
failures = []

if lines[0] != "# meshscope" or lines[2] != "```sh" or not lines[3].startswith("scripts/demo.sh") \
        or not lines[4].startswith("scripts/test.sh"):
    failures.append("the README must open with its title and the two commands (demo, test)")
if len(lines) > 500:
    failures.append(f"the README has {len(lines)} lines; the manual keeps to 500")

for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
    if "://" not in target and not (readme.parent / target).exists():
        failures.append(f"link to {target}: no such file in the repository")

helps: dict[str, str] = {}
checked = 0
# commands as shown: indented code lines and `inline code`
shown = [line.split("#")[0] for line in lines
         if line.startswith("    ") and line.strip().startswith("meshscope ")]
shown += re.findall(r"`(meshscope [^`]*)`", text)
for line in shown:
    for match in re.finditer(r"(?:^|\s)meshscope ([a-z]+)((?:(?!\smeshscope ).)*)", line):
        sub, rest = match.group(1), match.group(2).split(" -- ")[0]
        if sub not in helps:
            run = subprocess.run([cli, sub, "--help"], capture_output=True, text=True)
            helps[sub] = run.stdout if run.returncode == 0 else ""
            if run.returncode != 0:
                failures.append(f"`meshscope {sub}` in the README: not a command ({run.stderr.strip()})")
        for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest):
            checked += 1
            if helps[sub] and not re.search(rf"(?<![\w-]){re.escape(option)}\b", helps[sub]):
                failures.append(f"`meshscope {sub} {option}` in the README: not an option of {sub}")

print(f"{len(helps)} commands, {checked} options checked")
for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)

#!/usr/bin/env bash
# The GPU tests on the GPU machine, after `source PACK/env.sh` (tools/gpu_pack.sh): test_cuda in
# gtest's brief mode (only failures print) with its results also written as XML, then the names
# of the failed tests, which brief mode does not repeat at the end (a log cut to its tail would
# lose them). Usage: tools/gpu_test.sh [XML] [gtest arguments...]; XML defaults to
# ${OUT:-/tmp}/test_cuda.xml. Exits with test_cuda's status.
set -uo pipefail
xml="${1:-${OUT:-/tmp}/test_cuda.xml}"
shift || true
test_cuda --gtest_brief=1 --gtest_output="xml:$xml" "$@"
status=$?
python3 - "$xml" <<'PY'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError) as e:
    sys.exit(f"gpu_test: no results in {sys.argv[1]} ({e})")
cases = list(root.iter("testcase"))
failed = [f"{case.get('classname')}.{case.get('name')}" for case in cases
          if case.find("failure") is not None]
skipped = sum(1 for case in cases if case.find("skipped") is not None or case.get("result") == "skipped")
print(f"gpu_test: {len(cases)} tests, {len(failed)} failed, {skipped} skipped, "
      f"{float(root.get('time', 0)):.0f} s")
for name in failed:
    print(f"gpu_test: FAILED {name}")
PY
exit $status

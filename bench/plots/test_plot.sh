#!/usr/bin/env bash
# CTest's check of bench/plot.sh on the committed samples in bench/plots/sample
# (no benchmark runs): each plot is written, is well-formed SVG and carries
# its title and legend; an input of the wrong kind is refused with a message
# naming the file.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sample=$here/sample
out=$(mktemp -d /tmp/dlock-plot-test-XXXXXX)
trap 'rm -rf "$out"' EXIT

"$here/../plot.sh" --peers "$sample/peers.csv" --bench "$sample/bench.jsonl" --history "$sample/history" --out "$out"

/usr/bin/python3 - "$out" <<'PY'
import sys
import xml.etree.ElementTree as ET

out = sys.argv[1]
expected = {  # file: words its title or legend must show
    "contention-cdf.svg": ["Time to acquire", "dlock (40 acquisitions)", "node-redlock", "redis-py Lock"],
    "throughput-threads.svg": ["acquisitions per second", "threads"],
    "history-timeline.svg": ["w1", "w5", "Redis", "SIGKILL of holder", "holds overlapping"],
}
for name, words in expected.items():
    root = ET.parse(f"{out}/{name}").getroot()  # raises on SVG that is not well-formed XML
    assert root.tag == "{http://www.w3.org/2000/svg}svg", f"{name}: root element is {root.tag}, not svg"
    text = " ".join(t for t in root.itertext())
    for word in words:
        assert word in text, f"{name}: '{word}' is not in its text"
    paths = root.findall(".//{http://www.w3.org/2000/svg}path")
    assert len(paths) > 10, f"{name}: only {len(paths)} paths drawn"
    print(f"{name}: well-formed, {len(paths)} paths")
PY

# A dlock-bench JSON file given as the peers' CSV: refused, naming the file.
if message=$("$here/../plot.sh" --peers "$sample/bench.jsonl" --out "$out" 2>&1); then
  echo "plot.sh accepted $sample/bench.jsonl as the peers' CSV" >&2
  exit 1
fi
grep -q "bench.jsonl: expected the header 'client,wait_us'" <<<"$message" ||
  { echo "plot.sh's refusal does not name the file and the header: $message" >&2; exit 1; }
echo "test_plot: all plots well-formed"

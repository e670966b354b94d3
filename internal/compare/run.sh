#!/usr/bin/env bash
# Regenerates internal/compare/results/: compare.md and goodput.png (every
# contender through every scenario for 60 virtual minutes) and overhead.md
# (the getContact benchmarks and the allocation breakdown). Run it from
# anywhere: bash internal/compare/run.sh
set -euo pipefail
cd "$(dirname "$0")"
go test -run '^TestCompare$' -update -count=1 -timeout 60m -v .
echo "wrote $(pwd)/results/compare.md, goodput.png and overhead.md"

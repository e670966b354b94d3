#!/usr/bin/env bash
# Regenerates internal/compare/results/: compare.md and goodput.png (every
# contender through every scenario for 60 virtual minutes), overhead.md
# (the getContact benchmarks and the allocation breakdown) and profiles.md
# (every contender against every server profile of the sandbox). Run it from
# anywhere: bash internal/compare/run.sh; with the argument "profiles" it
# regenerates profiles.md alone, with "compare" the rest alone.
set -euo pipefail
cd "$(dirname "$0")"
case "${1:-all}" in
all) tests='^(TestCompare|TestCompareProfiles)$' ;;
compare) tests='^TestCompare$' ;;
profiles) tests='^TestCompareProfiles$' ;;
*) echo "usage: $0 [all|compare|profiles]" >&2; exit 2 ;;
esac
go test -run "$tests" -update -count=1 -timeout 120m -v .
echo "wrote $(pwd)/results/ (${1:-all})"

#!/usr/bin/env bash
# Regenerates internal/compare/results/: compare.md and goodput.png (every
# contender through every scenario for 60 virtual minutes), overhead.md
# (bodo-go against the raw generated client, paired round by round, and the
# allocation breakdown) and profiles.md (every contender against every
# server profile of the sandbox). Run it from anywhere:
# bash internal/compare/run.sh; with the argument "profiles" it regenerates
# profiles.md alone, with "compare" compare.md and the charts alone. With
# BODO_RUNS=n in the environment, "compare" and "profiles" run everything n
# times and the tables of compare.md and profiles.md show the median of
# each cell and its spread (the lowest and the highest). BODO_SKIP_PROFILES=
# name,name leaves those profiles out of profiles.md.
#
# bash internal/compare/run.sh overhead measures the overhead alone (about
# a minute), rewrites overhead.md and prints, for 1 and for 64 goroutines,
# "time x.xx× (p25–p75), allocs +n": the median of bodo-go's wall time over
# the raw client's in paired rounds, and its allocations per call against
# the raw client's.
#
# bash internal/compare/run.sh stall runs TestBudgetStall, a 20 s diagnosis
# that logs, second by second, what bodo-go's calls waited for.
set -euo pipefail
cd "$(dirname "$0")"
case "${1:-all}" in
all) tests='^(TestCompare|TestCompareProfiles|TestOverhead)$' ;;
compare) tests='^TestCompare$' ;;
profiles) tests='^TestCompareProfiles$' ;;
overhead)
	lines=$(mktemp)
	trap 'rm -f "$lines"' EXIT
	log=$(go test -run '^TestOverhead$' -count=1 -timeout 30m . -args -overhead "$lines" 2>&1) || { printf '%s\n' "$log" >&2; exit 1; }
	cat "$lines"
	exit 0
	;;
stall) exec env BODO_DIAGNOSE=1 go test -run '^TestBudgetStall$' -count=1 -v . ;;
*) echo "usage: $0 [all|compare|profiles|overhead|stall]" >&2; exit 2 ;;
esac
go test -run "$tests" -update -count=1 -timeout 120m -v .
echo "wrote $(pwd)/results/ (${1:-all})"

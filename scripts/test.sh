#!/usr/bin/env bash
# Every check CI runs: Redocly CLI's lint of openapi.json (redocly.yaml says
# which rules apply), gofmt, go vet, generated code up to date with
# openapi.json, and all tests with the race detector (fuzz seed corpora under
# testdata/ run as plain tests; every exchange with the sandbox is checked
# against openapi.json), in the SDK's module and in the modules beside it
# that keep their dependencies out of its go.mod (redisbudget, whose tests
# start a private redis-server when one is installed, otelbodo, the
# OpenTelemetry option, and internal/compare, whose plain tests are a short
# smoke run of every contender). go.work joins the four modules.
#
# It first says what it found of what it needs (Go; a C compiler for -race;
# redis-server; Node.js with npx for the lint; git for the release check),
# prints a line as each step and module starts and ends, and closes with a
# summary that names whatever was skipped and how to enable it. A check that
# fails does not stop the others; the script exits 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
# redisbudget and internal/compare build against the SDK's working tree only
# through go.work, whatever GOWORK says elsewhere (GOWORK=off would make them
# fetch the SDK at the version they require).
export GOWORK="$PWD/go.work"

# The Redocly CLI version the lint is pinned to; raise it deliberately.
REDOCLY_VERSION=2.77.0

modules=(. redisbudget otelbodo internal/compare)
passed=()
failed=()
skipped=() # each: what was skipped: how to enable it
started=$(date +%s)

elapsed() { echo "$(($(date +%s) - $1)) s"; }

# step NAME COMMAND...: runs one check, says how long it took and records
# the outcome. While it runs, a line every 30 s says it still does (building
# with -race the first time takes minutes).
step() {
	local name=$1 t0 rc ticker
	shift
	t0=$(date +%s)
	echo "== $name"
	(
		trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
		while :; do
			sleep 30 &
			sleeper=$!
			wait "$sleeper"
			echo "   ... $name: still running ($(elapsed "$t0"))"
		done
	) &
	ticker=$!
	"$@"
	rc=$?
	kill "$ticker" 2>/dev/null
	wait "$ticker" 2>/dev/null
	if [ "$rc" = 0 ]; then
		echo "-- ok: $name ($(elapsed "$t0"))"
		passed+=("$name")
	else
		echo "-- FAILED: $name ($(elapsed "$t0"))"
		failed+=("$name")
	fi
}

skip() {
	echo "== $1"
	echo "-- SKIPPED: $2"
	skipped+=("$1: $2")
}

echo "== what the checks need"
if ! command -v go >/dev/null 2>&1; then
	echo "go:           not found. Install Go 1.26 or later and run again."
	exit 1
fi
echo "go:           $(go version)"
race=(-race)
if [ "$(go env CGO_ENABLED)" = 1 ]; then
	echo "C compiler:   $(go env CC), for the race detector"
else
	race=()
	echo "C compiler:   none found (cgo is off), so the tests run without -race"
	skipped+=("the race detector: no C compiler, so the tests ran without -race; install gcc (apt-get install gcc) or clang and run again")
fi
if command -v redis-server >/dev/null 2>&1; then
	echo "redis-server: $(redis-server --version | cut -d' ' -f1-3), started privately by redisbudget's tests"
elif [ -n "${CI:-}" ]; then
	echo "redis-server: not found, and CI is set, so redisbudget's Redis tests fail"
else
	echo "redis-server: not found, so redisbudget's tests that need Redis skip"
	skipped+=("redisbudget's Redis tests: redis-server is not installed; install it (apt-get install redis-server) and run again")
fi
node_ok=0
if command -v npx >/dev/null 2>&1; then
	# Redocly CLI 2.x runs on Node.js 20.19+ (20.x) or 22.12+.
	if node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a === 20 && b >= 19 || a === 22 && b >= 12 || a > 22 ? 0 : 1)'; then
		node_ok=1
		echo "node, npx:    $(node --version), for the lint with @redocly/cli@$REDOCLY_VERSION"
	else
		echo "node, npx:    $(node --version) is too old for @redocly/cli@$REDOCLY_VERSION (it needs 20.19+ or 22.12+), so the lint is skipped"
	fi
else
	echo "node, npx:    not found, so the lint is skipped"
fi
if command -v git >/dev/null 2>&1; then
	echo "git:          $(git --version), for the release check (internal/release)"
else
	echo "git:          not found, so the release check (internal/release) skips"
	skipped+=("the release check (internal/release): git is not installed; install it and run again")
fi

lint() {
	# NO_UPDATE_NOTIFIER and REDOCLY_TELEMETRY keep the output to the lint.
	NO_UPDATE_NOTIFIER=1 REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
		npx --yes "@redocly/cli@$REDOCLY_VERSION" lint --config redocly.yaml --max-problems 50 openapi.json
}
if [ "$node_ok" = 1 ]; then
	step "redocly lint openapi.json (@redocly/cli@$REDOCLY_VERSION, redocly.yaml)" lint
else
	skip "redocly lint openapi.json" "openapi.json was not linted; install Node.js 20.19+ or 22.12+ with npm (CI's .ci/run installs them) and run again"
fi

check_gofmt() {
	local unformatted
	unformatted=$(gofmt -l $(find . -name '*.go' -not -path './.git/*')) || return 1
	if [ -n "$unformatted" ]; then
		printf 'gofmt would change:\n%s\n' "$unformatted"
		return 1
	fi
}
step gofmt check_gofmt

for m in "${modules[@]}"; do
	step "go vet ./... in $m" bash -c 'cd "$1" && go vet ./...' _ "$m"
done

generated=(gen/oapi internal/ops services_gen.go models_gen.go)
before=$(mktemp -d)
trap 'rm -rf "$before"' EXIT
check_generate() {
	local path stale=0
	cp -r "${generated[@]}" "$before"/
	go generate ./... || return 1
	for path in "${generated[@]}"; do
		diff -r "$before/$(basename "$path")" "$path" >/dev/null || { echo "stale: $path"; stale=1; }
	done
	if [ "$stale" = 1 ]; then
		echo "generated code did not match openapi.json; go generate ./... has now rewritten it: review and commit"
		return 1
	fi
}
step "go generate (generated code must match openapi.json)" check_generate

for m in "${modules[@]}"; do
	step "go test ${race[*]:+${race[*]} }./... in $m" bash -c 'cd "$1" && shift && go test "$@" -count=1 ./...' _ "$m" "${race[@]}"
done

echo
echo "== summary ($(elapsed "$started"))"
for s in "${passed[@]}"; do echo "ok       $s"; done
for s in "${failed[@]}"; do echo "FAILED   $s"; done
for s in "${skipped[@]}"; do echo "SKIPPED  $s"; done
echo "checks: ${#passed[@]} passed, ${#failed[@]} failed, ${#skipped[@]} skipped"
[ "${#failed[@]}" = 0 ]

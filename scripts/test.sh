#!/usr/bin/env bash
# Every check CI runs: Redocly CLI's lint of openapi.json (redocly.yaml says
# which rules apply), gofmt, go vet, generated code up to date with
# openapi.json, and all tests with the race detector (fuzz seed corpora under
# testdata/ run as plain tests; every exchange with the sandbox is checked
# against openapi.json), in the SDK's module and in the modules beside it
# that keep their dependencies out of its go.mod (redisbudget, whose tests
# start a private redis-server when one is installed, and internal/compare,
# whose plain tests are a short smoke run of every contender).
set -euo pipefail
cd "$(dirname "$0")/.."

# The Redocly CLI version the lint is pinned to; raise it deliberately.
REDOCLY_VERSION=2.77.0

echo "== redocly lint openapi.json (@redocly/cli@$REDOCLY_VERSION, redocly.yaml)"
if command -v npx >/dev/null 2>&1; then
	# Redocly CLI 2.x runs on Node.js 20.19+ (20.x) or 22.12+.
	if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a === 20 && b >= 19 || a === 22 && b >= 12 || a > 22 ? 0 : 1)'; then
		echo "SKIPPED: Node.js $(node --version) is too old for @redocly/cli@$REDOCLY_VERSION (it needs 20.19+ or 22.12+), so openapi.json was not linted."
	else
		# NO_UPDATE_NOTIFIER and REDOCLY_TELEMETRY keep the output to the lint.
		NO_UPDATE_NOTIFIER=1 REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
			npx --yes "@redocly/cli@$REDOCLY_VERSION" lint --config redocly.yaml --max-problems 50 openapi.json
	fi
else
	echo "SKIPPED: npx (Node.js and npm) is not installed, so openapi.json was not linted."
	echo "Install Node.js 20 or later with npm to run this check; CI (.ci/run) installs them."
fi

echo "== gofmt"
unformatted=$(gofmt -l $(find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
	printf 'gofmt would change:\n%s\n' "$unformatted"
	exit 1
fi

modules=(. redisbudget internal/compare)

echo "== go vet"
for m in "${modules[@]}"; do
	(cd "$m" && go vet ./...)
done

echo "== go generate (generated code must match openapi.json)"
generated=(internal/gen internal/ops services_gen.go models_gen.go)
before=$(mktemp -d)
trap 'rm -rf "$before"' EXIT
cp -r "${generated[@]}" "$before"/
go generate ./...
stale=0
for path in "${generated[@]}"; do
	diff -r "$before/$(basename "$path")" "$path" >/dev/null || { echo "stale: $path"; stale=1; }
done
if [ "$stale" = 1 ]; then
	echo "generated code did not match openapi.json; go generate ./... has now rewritten it: review and commit"
	exit 1
fi

echo "== go test -race"
for m in "${modules[@]}"; do
	(cd "$m" && go test -race -count=1 ./...)
done

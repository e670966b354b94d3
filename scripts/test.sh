#!/usr/bin/env bash
# Every check CI runs: gofmt, go vet, generated code up to date with
# openapi.json, and all tests with the race detector (fuzz seed corpora under
# testdata/ run as plain tests), in the SDK's module and in the modules
# beside it that keep their dependencies out of its go.mod (redisbudget,
# whose tests start a private redis-server when one is installed, and
# internal/compare, whose plain tests are a short smoke run of every
# contender).
set -euo pipefail
cd "$(dirname "$0")/.."

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
generated=(gen internal/ops services_gen.go models_gen.go)
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

#!/usr/bin/env bash
# Builds Jaeger v2 (the all-in-one `jaeger` binary, `cmd/jaeger` of the Go module
# github.com/jaegertracing/jaeger) for the consumer tests, once, and prints its path.
#
#   scripts/build-jaeger.sh            # prints e.g. ~/.cache/waffle/jaeger-v1.76.0/jaeger
#
# The binary is cached outside the repository, in ${XDG_CACHE_HOME:-~/.cache}/waffle/jaeger-<version>/,
# keyed by the module version (JAEGER_MODULE_VERSION, default below; module v1.76.0 is Jaeger
# v2.13). A later run finds it there and builds nothing. The first run needs Go (on PATH or in
# /usr/local/go/bin) and the Go module proxy, and takes minutes on a small machine.
#
# Why a wrapper module: `go install github.com/jaegertracing/jaeger/cmd/jaeger@v1.76.0` refuses
# a module whose go.mod has a `replace` directive, and Jaeger's has one (github.com/Shopify/sarama
# => v1.33.0). So the script writes a throwaway module that requires Jaeger and repeats that
# `replace`, resolves its dependencies (`go mod tidy`) and builds `cmd/jaeger` in it.
#
# Progress goes to stderr; stdout is only the binary's path. Any failure exits non-zero with a
# line saying which step failed.
set -euo pipefail

version="${JAEGER_MODULE_VERSION:-v1.76.0}"
module=github.com/jaegertracing/jaeger
cache="${XDG_CACHE_HOME:-$HOME/.cache}/waffle/jaeger-$version"
bin="$cache/jaeger"

say() { printf 'build-jaeger: %s\n' "$*" >&2; }
fail() { say "error: $*"; exit 1; }

if [ -x "$bin" ]; then
    echo "$bin"
    exit 0
fi

go=$(command -v go || true)
if [ -z "$go" ] && [ -x /usr/local/go/bin/go ]; then
    go=/usr/local/go/bin/go
fi
[ -n "$go" ] || fail "Go is not installed (not on PATH, not in /usr/local/go/bin); it is needed once to build $module/cmd/jaeger@$version into $bin"

mkdir -p "$cache" || fail "cannot create the cache directory $cache"
work=$(mktemp -d "$cache/build.XXXXXX") || fail "cannot create a build directory under $cache"
trap 'rm -rf "$work"' EXIT

say "building Jaeger v2 ($module/cmd/jaeger@$version) with $("$go" version) into $bin"
say "a wrapper module in $work repeats Jaeger's replace directive (go install refuses it); first run only, minutes"

# The replace line is Jaeger's own, read from its go.mod, so a newer version brings its own.
# (-json reports a failure in its "Error" field on stdout.)
"$go" mod download -json "$module@$version" >"$work/download.json" 2>"$work/download.err" \
    || fail "go mod download $module@$version failed: $(sed -n 's/^[[:space:]]*"Error": //p' "$work/download.json") $(tail -5 "$work/download.err")"
upstream_gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' "$work/download.json")
[ -f "$upstream_gomod" ] || fail "go mod download did not say where $module@$version's go.mod is"
replaces=$(grep -E '^replace[[:space:]]' "$upstream_gomod" || true)
go_line=$(grep -E '^go[[:space:]]' "$upstream_gomod" || echo "go 1.24")

cat >"$work/go.mod" <<EOF
module waffle.invalid/jaeger-build

$go_line

require $module $version

$replaces
EOF
# An import for `go mod tidy` to keep the requirements `cmd/jaeger` needs (never compiled).
cat >"$work/tools.go" <<EOF
//go:build tools

package tools

import _ "$module/cmd/jaeger"
EOF

(cd "$work" && "$go" mod tidy >/dev/null 2>"$work/tidy.err") \
    || fail "go mod tidy in the wrapper module failed: $(tail -5 "$work/tidy.err")"
say "dependencies resolved; compiling (go build -trimpath)"
(cd "$work" && "$go" build -trimpath -o "$work/jaeger" "$module/cmd/jaeger") \
    || fail "go build $module/cmd/jaeger failed (see the compiler's output above)"
"$work/jaeger" --help >/dev/null 2>&1 || fail "the built $work/jaeger does not run"
mv "$work/jaeger" "$bin"
say "built $bin"
echo "$bin"

#!/usr/bin/env bash
# ARCHITECTURE.md names every source file: each file under a crate's src/ by its path below src/
# (`export/chrome/rows.rs`), the Python package's modules, the C/C++ headers and the fuzz
# targets by name. Prints the files it misses and fails if there are any.
set -euo pipefail
cd "$(dirname "$0")/.."
doc=ARCHITECTURE.md
missing=0
while IFS= read -r f; do
    case "$f" in
        */src/*) name="${f#*/src/}" ;;
        *) name="$(basename "$f")" ;;
    esac
    if ! grep -qF -- "$name" "$doc"; then
        echo "ARCHITECTURE.md does not name $f (as \`$name\`)"
        missing=1
    fi
done < <(git ls-files -- '*/src/*.rs' 'python/waffle/*.py' 'ffi/include/*' 'fuzz/fuzz_targets/*.rs' | grep -v '^fuzz/corpus/')
exit "$missing"

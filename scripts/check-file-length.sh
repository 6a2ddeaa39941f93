#!/usr/bin/env bash
# No source file over 400 lines without a reason at its top: a file longer than that says why in
# its first 30 lines, in a sentence that begins "Over 400 lines" (any case). Prints the files
# that do not and fails if there are any. Data (corpora, golden outputs, fixtures' data) and
# prose (Markdown) are not source.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=400
bad=0
while IFS= read -r f; do
    [ -f "$f" ] || continue
    lines=$(wc -l <"$f")
    if [ "$lines" -gt "$limit" ] && ! head -n 30 "$f" | grep -qi 'over 400 lines'; then
        echo "$f: $lines lines and no reason at its top (a sentence beginning \"Over 400 lines\")"
        bad=1
    fi
done < <(git ls-files -- '*.rs' '*.py' '*.c' '*.h' '*.hpp' '*.cpp' '*.sh' '*.js' '*.toml' \
    | grep -v -e '^fuzz/corpus/' -e '/data/' -e '/golden/')
exit "$bad"

# Sourced by the bench scripts: what `/usr/bin/time -v` wrote to FILE, on one line: wall
# seconds, CPU seconds (user + system) and peak resident memory in KiB.
time_v() {
    awk -F': ' '
        /Elapsed \(wall clock\)/ { n = split($2, p, ":"); w = 0; for (i = 1; i <= n; i++) w = w * 60 + p[i] }
        /User time|System time/ { c += $2 }
        /Maximum resident set size/ { r = $2 }
        END { print w, c, r }' "$1"
}

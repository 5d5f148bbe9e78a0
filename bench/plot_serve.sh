#!/bin/sh
# bench/plot_serve.sh BENCH.jsonl OUT.svg - the latency-vs-rate chart of `make bench BENCH=serve`'s lines
# ({"bench":"serve","server":..,"rate":..,"p50_ttft_s":..,"p99_ttft_s":..}): p99 TTFT (solid) and p50 TTFT
# (dashed) against the request rate, one colour per server, the SLO (serve_slo's slo_p99_ttft_s) as a grey
# line. Log-scaled latency. POSIX sh and awk only. README's chart is drawn by it.
set -u
[ $# -eq 2 ] || { echo "usage: bench/plot_serve.sh BENCH.jsonl OUT.svg" >&2; exit 2; }
[ -r "$1" ] || { echo "plot_serve.sh: cannot read $1" >&2; exit 1; }
awk '
function num(k,   m) { if (match($0, "\"" k "\":[-0-9.eE+]+")) { m = substr($0, RSTART + length(k) + 3, RLENGTH - length(k) - 3); return m + 0 } return -1 }
function str(k,   m) { if (match($0, "\"" k "\":\"[^\"]*\"")) return substr($0, RSTART + length(k) + 4, RLENGTH - length(k) - 5); return "" }
function X(r) { return L + (r - 0) / (xmax) * (Wd - L - R) }
function Y(v) { if (v < ymin) v = ymin; return Tp + (log(ymax) - log(v)) / (log(ymax) - log(ymin)) * (Ht - Tp - Bt) }
/"bench":"serve_slo"/ { slo = num("slo_p99_ttft_s") }
/"bench":"serve"[,}]/ {
    s = str("server"); if (s == "") s = "ptserve"
    if (!(s in seen)) { seen[s] = 1; order[++ns] = s }
    k = ++n[s]; rate[s, k] = num("rate"); p50[s, k] = num("p50_ttft_s"); p99[s, k] = num("p99_ttft_s")
    if (rate[s, k] > xmax) xmax = rate[s, k]
    if (p99[s, k] > ymax) ymax = p99[s, k]
    if (p50[s, k] > 0 && (ymin == 0 || p50[s, k] < ymin)) ymin = p50[s, k]
}
END {
    if (!ns) { print "plot_serve.sh: no serve lines" > "/dev/stderr"; exit 1 }
    Wd = 640; Ht = 400; L = 70; R = 150; Tp = 30; Bt = 50
    xmax = xmax * 1.08; if (slo > ymax) ymax = slo
    ymin = ymin / 1.5; ymax = ymax * 1.5
    col[1] = "#1f77b4"; col[2] = "#d62728"; col[3] = "#2ca02c"
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", Wd, Ht
    printf "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
    printf "<text x=\"%d\" y=\"18\" font-size=\"14\">TTFT vs request rate (p99 solid, p50 dashed)</text>\n", L
    for (e = -4; e <= 3; e++) for (m = 1; m <= 5; m += 4) { v = m * 10 ^ e; if (v >= ymin && v <= ymax) {
        printf "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", L, Wd - R, Y(v), Y(v)
        printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g s</text>\n", L - 6, Y(v) + 4, v } }
    step = xmax > 40 ? 10 : xmax > 16 ? 4 : xmax > 8 ? 2 : 1
    for (x = 0; x <= xmax; x += step) {
        printf "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#eee\"/>\n", X(x), X(x), Tp, Ht - Bt
        printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", X(x), Ht - Bt + 16, x }
    printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">requests per second (Poisson arrivals)</text>\n", (L + Wd - R) / 2, Ht - 12
    printf "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", L, Tp, Wd - L - R, Ht - Tp - Bt
    if (slo > 0) {
        printf "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" stroke-dasharray=\"2,3\"/>\n", L, Wd - R, Y(slo), Y(slo)
        printf "<text x=\"%d\" y=\"%.1f\" fill=\"#666\">SLO p99 %g s</text>\n", Wd - R + 6, Y(slo) + 4, slo }
    for (i = 1; i <= ns; i++) { s = order[i]; c = col[(i - 1) % 3 + 1]
        for (q = 0; q < 2; q++) { pts = ""
            for (k = 1; k <= n[s]; k++) pts = pts sprintf("%.1f,%.1f ", X(rate[s, k]), Y(q ? p50[s, k] : p99[s, k]))
            printf "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", pts, c, q ? " stroke-dasharray=\"6,4\"" : ""
            for (k = 1; k <= n[s]; k++) printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", X(rate[s, k]), Y(q ? p50[s, k] : p99[s, k]), c }
        printf "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/><text x=\"%d\" y=\"%d\">%s</text>\n", Wd - R + 6, Wd - R + 26, Tp + 10 + 20 * i, Tp + 10 + 20 * i, c, Wd - R + 30, Tp + 14 + 20 * i, s }
    print "</svg>"
}' "$1" >"$2.tmp" && mv "$2.tmp" "$2" || { rm -f "$2.tmp"; exit 1; }

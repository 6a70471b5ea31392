# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the evrdma authors
# bench/summary.awk: run-bench's tables. Input files, in this order:
#   series       id|group|mode|label
#   comparisons  numerator|denominator or -|label|lower or higher|goal|
#                sizes of the goal (all)|metric ("": the group's)
#   rounds.txt   round series size metric value
# Variables: csv (the CSV file to write), sizes (the size list, for the
# column order), rounds, busy_us. Prints the human tables on stdout.
# Plain POSIX awk (Debian's mawk): no gawk extensions.

function hsize(s) {
	if (s >= 1048576 && s % 1048576 == 0) return (s / 1048576) "M"
	if (s >= 1024 && s % 1024 == 0) return (s / 1024) "K"
	return s
}

function gmetric(g) {
	if (g == "lat") return "typ"
	if (g == "bw") return "bw"
	if (g == "conn") return "cps"
	if (g == "cg") return "ir"
	return "mps"		# rate, fan
}

function unit(m) {
	if (m == "typ" || m == "min" || m == "p99") return "us"
	if (m == "bw") return "MB/s"
	if (m == "mps") return "Mpps"
	if (m == "cps" || m == "setup") return "conn/s"
	if (m == "ir" || m == "own" || m == "rest") return "instructions"
	if (m == "wake") return "wake-ups per message"
	return "ratio"
}

# Sort v[1..n] ascending (insertion sort; n is small).
function sortv(v, n,    i, j, t) {
	for (i = 2; i <= n; i++) {
		t = v[i]
		for (j = i - 1; j >= 1 && v[j] > t; j--)
			v[j + 1] = v[j]
		v[j + 1] = t
	}
}

function median(v, n) {
	if (n == 0) return ""
	sortv(v, n)
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}

# Figures of series id, size s, metric m over the rounds: fills st[]
# (median, min, max, n); @return the median or "".
function stats(id, s, m,    r, n, v, k) {
	n = 0
	for (k = 1; k <= nrounds; k++) {
		r = roundv[k]
		if ((id, s, m, r) in val)
			v[++n] = val[id, s, m, r] + 0
	}
	st["n"] = n
	if (n == 0) { st["med"] = st["min"] = st["max"] = ""; return "" }
	st["med"] = median(v, n)
	st["min"] = v[1]
	st["max"] = v[n]
	return st["med"]
}

# Per-round ratios of comparison c at size s for metric m: fills st[] as
# stats(); @return the median or "".
function rstats(c, s, m,    r, n, v, k, a, b) {
	n = 0
	for (k = 1; k <= nrounds; k++) {
		r = roundv[k]
		if (!((cnum[c], s, m, r) in val))
			continue
		a = val[cnum[c], s, m, r] + 0
		if (cden[c] == "-") {
			v[++n] = a
			continue
		}
		if (!((cden[c], s, m, r) in val))
			continue
		b = val[cden[c], s, m, r] + 0
		if (b > 0)
			v[++n] = a / b
	}
	st["n"] = n
	if (n == 0) { st["med"] = st["min"] = st["max"] = ""; return "" }
	st["med"] = median(v, n)
	st["min"] = v[1]
	st["max"] = v[n]
	return st["med"]
}

# Does ratio x meet goal g ("<=1.10", "<1", ">=0.95", ">1")? 1, 0
function meets(x, g,    op, lim) {
	op = g
	sub(/[0-9.].*$/, "", op)
	lim = substr(g, length(op) + 1) + 0
	x += 0
	if (op == "<=") return x <= lim
	if (op == "<") return x < lim
	if (op == ">=") return x >= lim
	if (op == ">") return x > lim
	return 1
}

function goal_for(c, s) {
	if (cgoal[c] == "") return 0
	return csizes[c] == "all" || index(" " csizes[c] " ", " " s " ") > 0
}

function fmt(x) {
	if (x == "") return "-"
	if (x >= 1000) return sprintf("%.0f", x)
	if (x >= 100) return sprintf("%.1f", x)
	if (x >= 0.1) return sprintf("%.2f", x)
	return sprintf("%.4f", x)
}

function csvq(s) {
	if (s ~ /[",]/) { gsub(/"/, "\"\"", s); return "\"" s "\"" }
	return s
}

FNR == 1 { file++ }
file == 1 {
	split($0, f, "|")
	ns++
	sid[ns] = f[1]; sgrp[f[1]] = f[2]; smode[f[1]] = f[3]
	slbl[f[1]] = f[4]
	next
}
file == 2 {
	split($0, f, "|")
	nc++
	cnum[nc] = f[1]; cden[nc] = f[2]; clbl[nc] = f[3]; cdir[nc] = f[4]
	cgoal[nc] = f[5]; csizes[nc] = f[6]; cmet[nc] = f[7]
	if (cmet[nc] == "") cmet[nc] = gmetric(sgrp[f[1]])
	next
}
file == 3 && NF == 5 {
	val[$2, $3, $4, $1] = $5
	if (!($1 in seenr)) { seenr[$1] = 1; roundv[++nrounds] = $1 }
	g = sgrp[$2]
	if (!((g, $3) in gsize)) {
		gsize[g, $3] = 1
		gsizes[g] = gsizes[g] " " $3
	}
}

END {
	ngroups = split("lat bw rate conn fan cg", groups, " ")
	title["lat"] = "one-way latency, us (half the round trip; typical = median of the round trips)"
	title["bw"] = "bandwidth, MB/s (MB = 2^20 bytes, as perftest)"
	title["rate"] = "message rate, 10^6 messages per second (echoed: each counts once)"
	title["conn"] = "connection setup, connections per second (connect, first echo, close)"
	title["fan"] = "many connections on one loop: aggregate rate, Mpps (fairness: slowest / mean)"
	title["cg"] = "user-space instructions per 64-byte round trip, client side (callgrind; in\n  parentheses: those that ran in libevrdma and in the rest, bench/cg-split)"
	if (csv != "")
		print "kind,id,label,group,mode,size,metric,unit,median,min,max,rounds,goal,met" >csv
	printf "==== run-bench summary: medians over %s round(s); ratios: median of the per-round ratios ====\n", rounds
	for (gi = 1; gi <= ngroups; gi++) {
		g = groups[gi]
		# the columns: the sizes measured in this group, in the order
		# of the size list (then any others)
		ncol = 0
		split(sizes, sl, " ")
		for (i = 1; i in sl; i++)
			if ((g, sl[i]) in gsize && !((g, sl[i]) in incol)) {
				col[++ncol] = sl[i]; incol[g, sl[i]] = 1
			}
		split(gsizes[g], sl, " ")
		for (i = 1; i in sl; i++)
			if (!((g, sl[i]) in incol)) {
				col[++ncol] = sl[i]; incol[g, sl[i]] = 1
			}
		if (ncol == 0)
			continue
		m = gmetric(g)
		printf "\n%s\n", title[g]
		printf "  %-62s", "size, bytes"
		for (j = 1; j <= ncol; j++) printf " %9s", hsize(col[j])
		printf "\n"
		for (i = 1; i <= ns; i++) {
			id = sid[i]
			if (sgrp[id] != g) continue
			line = ""
			tail = ""
			any = 0
			for (j = 1; j <= ncol; j++) {
				v = stats(id, col[j], m)
				if (v != "") any = 1
				cell = m == "ir" && v != "" ? sprintf("%.0f", v) : fmt(v)
				if (g == "fan" && v != "")
					cell = cell "(" fmt(stats(id, col[j], "fmin")) ")"
				line = line sprintf(" %9s", cell)
				# instructions: libevrdma's own and the rest
				own = g == "cg" ? stats(id, col[j], "own") : ""
				if (own != "")
					tail = tail sprintf("   (libevrdma %.0f, rest %.0f)", own, stats(id, col[j], "rest"))
			}
			line = line tail
			if (!any && id ~ /adapter/)
				line = "   not measured (evrdma-bench without --bev-adapter)"
			else if (!any)
				line = line "   (not measured)"
			printf "  %-62s%s\n", substr(slbl[id], 1, 62), line
		}
		# the CSV: every figure of every series of this group
		for (i = 1; i <= ns; i++) {
			id = sid[i]
			if (sgrp[id] != g || csv == "") continue
			split("typ min p99 bw mps cps fmin fmax setup ir own rest wake", ml, " ")
			for (j = 1; j <= ncol; j++)
				for (k = 1; k in ml; k++) {
					if (stats(id, col[j], ml[k]) == "") continue
					print "figure," csvq(id) "," csvq(slbl[id]) "," g "," smode[id] "," col[j] "," ml[k] "," unit(ml[k]) "," st["med"] "," st["min"] "," st["max"] "," st["n"] ",," >csv
				}
		}
		# the ratios of this group
		hdr = 0
		for (c = 1; c <= nc; c++) {
			if (sgrp[cnum[c]] != g) continue
			if (!hdr) {
				printf "  %-62s", "ratios (" (cdir[c] == "lower" ? "below 1: evrdma faster" : "above 1: evrdma faster") "; * misses the goal)"
				for (j = 1; j <= ncol; j++) printf " %9s", hsize(col[j])
				printf "   goal\n"
				hdr = 1
			}
			line = ""
			gs = ""
			for (j = 1; j <= ncol; j++) {
				s = col[j]
				v = rstats(c, s, cmet[c])
				cell = fmt(v)
				met = ""
				if (goal_for(c, s)) {
					if (v == "")
						met = "not measured"
					else {
						met = meets(v, cgoal[c]) ? "yes" : "no"
						if (met == "no") cell = cell "*"
					}
					ngoal++
					goalline[ngoal] = sprintf("%-62s at %4s: %-7s goal %-6s %s", clbl[c], hsize(s), fmt(v), cgoal[c], met == "yes" ? "met" : met == "no" ? "MISSED" : met)
				}
				line = line sprintf(" %9s", cell)
				if (csv != "" && v != "")
					print "ratio," csvq(cnum[c] "/" cden[c]) "," csvq(clbl[c]) "," g ",," s "," cmet[c] ",ratio," st["med"] "," st["min"] "," st["max"] "," st["n"] "," csvq(goal_for(c, s) ? cgoal[c] : "") "," met >csv
				# latency: the ratio of the minimums too (CSV)
				if (csv != "" && g == "lat" && rstats(c, s, "min") != "")
					print "ratio," csvq(cnum[c] "/" cden[c]) "," csvq(clbl[c] " (min)") "," g ",," s ",min,ratio," st["med"] "," st["min"] "," st["max"] "," st["n"] ",," >csv
			}
			if (cgoal[c] != "")
				gs = cgoal[c] (csizes[c] == "all" ? "" : " at " csizes[c])
			printf "  %-62s%s   %s\n", substr(clbl[c], 1, 62), line, gs
		}
	}
	if (ngoal > 0) {
		printf "\ngoals (issues 16 and 27; reported, not asserted):\n"
		for (i = 1; i <= ngoal; i++)
			printf "  %s\n", goalline[i]
	}
	if (csv != "")
		close(csv)
}

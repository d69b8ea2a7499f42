package perf

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "**NO**"
}

func fmtInt(f float64) string {
	s := fmt.Sprintf("%.0f", f)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d%time.Second == 0:
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func fmtBytes(f float64) string {
	switch {
	case f >= 1<<30:
		return fmt.Sprintf("%.2f GiB", f/(1<<30))
	case f >= 1<<20:
		return fmt.Sprintf("%.1f MiB", f/(1<<20))
	case f >= 1<<10:
		return fmt.Sprintf("%.1f KiB", f/(1<<10))
	}
	return fmt.Sprintf("%.0f B", f)
}

func cpuList(cpu map[string]float64) string {
	keys := make([]string, 0, len(cpu))
	for k := range cpu {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, cpu[k]))
	}
	return strings.Join(parts, ", ")
}

func waitList(ws []Share, n int) string {
	var parts []string
	for _, w := range ws[:min(n, len(ws))] {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", w.What, 100*w.Share))
	}
	if len(parts) == 0 {
		return "no samples"
	}
	return strings.Join(parts, ", ")
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

func trimQuery(s string, n int) string {
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}

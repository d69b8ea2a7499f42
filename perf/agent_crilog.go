package perf

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// criSandboxCall is RunPodSandbox's name in the report.
const criSandboxCall = "RunPodSandbox (sandbox, its network by CNI)"

// criLogCalls are the CRI calls of a pod's start whose duration containerd's log shows: containerd 1.6's CRI
// plugin logs each at info level when it is called and when it returns (pkg/cri/server/instrumented_service.go),
// with the same key in both lines: the sandbox's metadata, the sandbox ID and the container's metadata, the
// container ID.
var criLogCalls = []struct {
	call       string
	begin, end *regexp.Regexp // submatch 1 is the key
}{
	{criSandboxCall,
		regexp.MustCompile(`^RunPodSandbox for (.+)$`),
		regexp.MustCompile(`^RunPodSandbox for (.+) returns sandbox id "[^"]*"$`)},
	{"CreateContainer",
		regexp.MustCompile(`^CreateContainer within sandbox ("[^"]*" for) container (.+)$`),
		regexp.MustCompile(`^CreateContainer within sandbox ("[^"]*" for) (.+) returns container id "[^"]*"$`)},
	{"StartContainer",
		regexp.MustCompile(`^StartContainer for ("[^"]*")$`),
		regexp.MustCompile(`^StartContainer for ("[^"]*") returns successfully$`)},
}

// criCalls reads containerd's log at path and summarises how long each of criLogCalls took, for the calls
// that began and returned between from and to. Unreadable lines are skipped; nil if the log cannot be read.
func criCalls(path string, from, to time.Time) []AgentCRICall {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	began := make([]map[string]time.Time, len(criLogCalls))
	took := make([][]time.Duration, len(criLogCalls))
	for i := range began {
		began[i] = map[string]time.Time{}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		at, msg, ok := logfmtLine(sc.Text())
		if !ok || at.Before(from) || at.After(to) {
			continue
		}
		for i, c := range criLogCalls {
			if m := c.end.FindStringSubmatch(msg); m != nil {
				key := strings.Join(m[1:], " ")
				if t0, ok := began[i][key]; ok {
					took[i] = append(took[i], at.Sub(t0))
					delete(began[i], key)
				}
				break
			}
			if m := c.begin.FindStringSubmatch(msg); m != nil {
				began[i][strings.Join(m[1:], " ")] = at
				break
			}
		}
	}
	var out []AgentCRICall
	for i, c := range criLogCalls {
		if len(took[i]) > 0 {
			out = append(out, AgentCRICall{Call: c.call, Calls: len(took[i]), P50: percentile(took[i], 50),
				P99: percentile(took[i], 99), Max: percentile(took[i], 100)})
		}
	}
	return out
}

// logfmtLine reads the time and the message of one line of containerd's log (logrus' text format:
// time="2026-12-02T05:07:13.412345678Z" level=info msg="...").
func logfmtLine(line string) (time.Time, string, bool) {
	ts, ok := logfmtValue(line, "time=")
	if !ok {
		return time.Time{}, "", false
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, "", false
	}
	msg, ok := logfmtValue(line, " msg=")
	return at, msg, ok
}

// logfmtValue is the value after key in line, unquoted if it is quoted.
func logfmtValue(line, key string) (string, bool) {
	i := strings.Index(line, key)
	if i < 0 {
		return "", false
	}
	rest := line[i+len(key):]
	if !strings.HasPrefix(rest, `"`) {
		v, _, _ := strings.Cut(rest, " ")
		return v, true
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", false
	}
	v, err := strconv.Unquote(q)
	return v, err == nil
}

package report

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// ErrJUnit is returned, wrapped with the file involved, when a JUnit file cannot be decoded.
var ErrJUnit = errors.New("report: invalid JUnit file")

// Status is the outcome of one conformance test.
type Status string

const (
	StatusPassed  Status = "passed"
	StatusFailed  Status = "failed"
	StatusSkipped Status = "skipped"
	// StatusNotRun is a test of the conformance list that no JUnit file mentions.
	StatusNotRun Status = "not run"
)

// ConformanceTag marks a spec as a conformance test, in its name; tests without it are dropped.
const ConformanceTag = "[Conformance]"

// Result is one test's outcome.
type Result struct {
	// Name is the spec's full text, as upstream's conformance.yaml spells its codename: ginkgo's "[It] " prefix
	// is removed.
	Name string
	// SIG is the first "[sig-xxx]" tag of the name without its brackets ("sig-apps"), or "unknown".
	SIG    string
	Status Status
	// Duration is the spec's run time as the JUnit file gives it (zero for unfocused and not run tests).
	Duration time.Duration
	// Message is, for a failed test, the failure's message attribute or, when that is empty (e2e.test leaves it
	// out), the text of its failure or error element, trimmed. For a skipped test it is the skip message
	// ("skipped", or "skipped - REASON" when the test called Skip).
	Message string
	// Serial is set when the name carries "[Serial]": the test must run alone, in the serial part of a run.
	Serial bool
}

// Run is what one or more JUnit files say about the conformance tests.
type Run struct {
	// Tests are the [Conformance] tests, one per name, sorted by name.
	Tests []Result
	// SuiteFailures are the failed suite-level nodes ([SynchronizedBeforeSuite], [ReportAfterSuite] ...), in file
	// order. When a BeforeSuite fails, ginkgo reports every spec as skipped, and this is the only trace of why.
	SuiteFailures []Result
}

// The subset of ginkgo v2's JUnit shape (reporters.JUnitTestSuites) that a report needs. The root is <testsuites>
// as ginkgo writes it, or a single <testsuite> as some other tools write.
type junitDoc struct {
	XMLName xml.Name
	Suites  []junitSuite `xml:"testsuite"`
	Cases   []junitCase  `xml:"testcase"`
}

type junitSuite struct {
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name    string        `xml:"name,attr"`
	Status  string        `xml:"status,attr"`
	Time    float64       `xml:"time,attr"`
	Skipped *junitMessage `xml:"skipped"`
	Error   *junitMessage `xml:"error"`
	Failure *junitMessage `xml:"failure"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// leafIt is the prefix ginkgo puts before the text of an It spec; the other leaf node types are suite-level
// nodes such as "[SynchronizedBeforeSuite]" or "[ReportAfterSuite] Kubernetes e2e suite report".
const leafIt = "[It] "

var sigRE = regexp.MustCompile(`\[(sig-[^\]]+)\]`)

// ParseJUnit decodes one JUnit file as ginkgo v2 writes it: a <testsuites> root or, as other tools write, a single
// <testsuite>. The run's tests come sorted by name; when the file lists a name twice, the rules of Merge pick one.
func ParseJUnit(r io.Reader) (Run, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Run{}, err
	}
	var doc junitDoc
	if err := xml.Unmarshal(data, &doc); err != nil {
		return Run{}, fmt.Errorf("%w: %w", ErrJUnit, err)
	}
	switch doc.XMLName.Local {
	case "testsuites":
	case "testsuite":
		doc.Suites = []junitSuite{{Cases: doc.Cases}}
	default:
		return Run{}, fmt.Errorf("%w: root element <%s>, want <testsuites> or <testsuite>", ErrJUnit, doc.XMLName.Local)
	}
	var m merger
	var suiteFailures []Result
	for _, suite := range doc.Suites {
		for _, c := range suite.Cases {
			res := c.result()
			switch {
			case strings.Contains(c.Name, ConformanceTag):
				m.add(res)
			case !strings.HasPrefix(c.Name, leafIt) && res.Status == StatusFailed:
				suiteFailures = append(suiteFailures, res)
			}
		}
	}
	return Run{Tests: m.sorted(), SuiteFailures: suiteFailures}, nil
}

// ReadJUnit reads the files in order and merges them (Merge): list the parallel part before the serial part, and a
// rerun after the run it repeats.
func ReadJUnit(paths ...string) (Run, error) {
	runs := make([]Run, 0, len(paths))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return Run{}, err
		}
		run, err := ParseJUnit(f)
		f.Close()
		if err != nil {
			return Run{}, fmt.Errorf("%s: %w", p, err)
		}
		runs = append(runs, run)
	}
	return Merge(runs...), nil
}

// Merge combines runs given in order. Of two results for one name, one that ran (passed or failed) wins over a
// skipped one, and otherwise the later one wins. Suite failures are all kept, in order.
func Merge(runs ...Run) Run {
	var m merger
	var suiteFailures []Result
	for _, run := range runs {
		for _, res := range run.Tests {
			m.add(res)
		}
		suiteFailures = append(suiteFailures, run.SuiteFailures...)
	}
	return Run{Tests: m.sorted(), SuiteFailures: suiteFailures}
}

// merger keeps one result per name, by the rules of Merge.
type merger struct {
	byName map[string]Result
}

func (m *merger) add(res Result) {
	if m.byName == nil {
		m.byName = make(map[string]Result)
	}
	if old, ok := m.byName[res.Name]; ok && res.Status == StatusSkipped && old.Status != StatusSkipped {
		return
	}
	m.byName[res.Name] = res
}

// sorted returns the results sorted by name.
func (m *merger) sorted() []Result {
	out := make([]Result, 0, len(m.byName))
	for _, res := range m.byName {
		out = append(out, res)
	}
	slices.SortFunc(out, func(a, b Result) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// result maps a test case to a Result. The elements decide the status, as ginkgo's reporter writes exactly one of
// them for every state but passed; the status attribute covers files of other writers that have none.
func (c junitCase) result() Result {
	name := strings.TrimPrefix(c.Name, leafIt)
	res := Result{Name: name, SIG: sigOf(name), Serial: strings.Contains(name, "[Serial]")}
	if !math.IsNaN(c.Time) && c.Time > 0 {
		res.Duration = time.Duration(c.Time * float64(time.Second))
	}
	switch {
	case c.Failure != nil:
		res.Status, res.Message = StatusFailed, c.Failure.text()
	case c.Error != nil:
		res.Status, res.Message = StatusFailed, c.Error.text()
	case c.Skipped != nil:
		res.Status, res.Message = StatusSkipped, c.Skipped.text()
	case c.Status == "skipped" || c.Status == "pending":
		res.Status = StatusSkipped
	case c.Status == "" || c.Status == "passed":
		res.Status = StatusPassed
	default: // failed, timedout, panicked, interrupted, aborted
		res.Status = StatusFailed
	}
	return res
}

// text is the message attribute when there is one, else the element's text. e2e.test leaves the attribute out
// (the same message starts the text, after "[FAILED] ", followed by the location of the failure).
func (m *junitMessage) text() string {
	if s := strings.TrimSpace(m.Message); s != "" {
		return s
	}
	return strings.TrimSpace(m.Text)
}

// sigOf returns the first "[sig-xxx]" tag of name without brackets, or "unknown".
func sigOf(name string) string {
	if m := sigRE.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return "unknown"
}

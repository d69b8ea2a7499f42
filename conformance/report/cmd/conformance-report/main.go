// Command conformance-report renders the JUnit files of a conformance run into the block of docs/conformance.md
// between its markers, so that a run can be re-rendered by hand (after correcting conformance/causes.yaml, say):
//
//	go run ./conformance/report/cmd/conformance-report \
//	  --junit .cache/conformance/parallel/junit_01.xml --junit .cache/conformance/serial/junit_01.xml \
//	  --list .cache/conformance/conformance.yaml \
//	  --meta date='2026-12-06 14:03 UTC' --meta suite='k8s.io/kubernetes v1.37.2'
//
// --list is the output of `e2e.test --list-conformance-tests`; with it, tests that no file mentions count as not
// run. Without --meta rows the run table has only the time spent in tests.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wheelhouse-dev/wheelhouse/conformance/report"
)

// config is what the flags say.
type config struct {
	// JUnit are the JUnit files in order (parallel part first); a directory stands for its junit*.xml files.
	JUnit []string
	// List is upstream's conformance.yaml, or "".
	List   string
	Causes string
	// Out is the Markdown file whose block is rewritten, or "-" for standard output (the block alone).
	Out  string
	Meta report.Meta
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance-report:", err)
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "conformance-report:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("conformance-report", flag.ContinueOnError)
	fs.Func("junit", "JUnit file or directory of junit*.xml files; repeatable or comma-separated, in run order (required)",
		func(v string) error {
			for p := range strings.SplitSeq(v, ",") {
				if p = strings.TrimSpace(p); p != "" {
					cfg.JUnit = append(cfg.JUnit, p)
				}
			}
			return nil
		})
	fs.StringVar(&cfg.List, "list", "", "conformance.yaml as `e2e.test --list-conformance-tests` prints it (optional: counts tests no file mentions as not run)")
	fs.StringVar(&cfg.Causes, "causes", "conformance/causes.yaml", "causes file that explains failures")
	fs.StringVar(&cfg.Out, "out", "docs/conformance.md", `Markdown file whose block between the conformance markers is rewritten ("-": print the block)`)
	fs.Func("meta", "run table row key=value; repeatable. Keys date, suite, command, machine, duration, nodes have their place; others follow in order",
		func(v string) error { return addMeta(&cfg.Meta, v) })
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if len(cfg.JUnit) == 0 {
		return cfg, errors.New("--junit is required")
	}
	return cfg, nil
}

// addMeta sets the field of meta that key=value names, or appends an extra row.
func addMeta(meta *report.Meta, kv string) error {
	key, value, ok := strings.Cut(kv, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return fmt.Errorf("want key=value, got %q", kv)
	}
	fields := map[string]*string{
		"date": &meta.Date, "suite": &meta.Suite, "command": &meta.Command, "machine": &meta.Machine,
		"duration": &meta.Duration, "durations": &meta.Duration, "nodes": &meta.Nodes,
	}
	if p, ok := fields[key]; ok {
		*p = value
		return nil
	}
	meta.Extra = append(meta.Extra, report.Field{Key: key, Value: value})
	return nil
}

func run(cfg config) error {
	files, err := junitFiles(cfg.JUnit)
	if err != nil {
		return err
	}
	junit, err := report.ReadJUnit(files...)
	if err != nil {
		return err
	}
	var list []report.ListEntry
	if cfg.List != "" {
		if list, err = report.ReadList(cfg.List); err != nil {
			return err
		}
	}
	causes, err := report.LoadCauses(cfg.Causes)
	if err != nil {
		return err
	}
	s := report.Summarize(junit, list, causes)
	if cfg.Out == "-" {
		_, err := fmt.Print(report.Render(s, cfg.Meta))
		return err
	}
	if err := report.WriteFile(cfg.Out, s, cfg.Meta); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "conformance-report: %d of %d tests pass; wrote %s\n", s.All.Passed, s.All.Total, cfg.Out)
	return nil
}

// junitFiles expands directories into their junit*.xml files, sorted; files stay as given.
func junitFiles(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			out = append(out, p)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(p, "junit*.xml"))
		if err != nil {
			return nil, err
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("%s: no junit*.xml files", p)
		}
		slices.Sort(matches)
		out = append(out, matches...)
	}
	return out, nil
}

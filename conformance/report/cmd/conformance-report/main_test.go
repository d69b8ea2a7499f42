package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wheelhouse-dev/wheelhouse/conformance/report"
)

const testdata = "../../testdata"

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    config
		wantErr string
	}{{
		name: "repeated and comma-separated files, meta rows",
		args: []string{"--junit", "a.xml, b.xml", "--junit", "c", "--list", "l.yaml", "--out", "-",
			"--meta", "date=2026-12-06", "--meta", "command=e2e.test --x=y", "--meta", "durations=27m",
			"--meta", "commit=abc", "--meta", "note="},
		want: config{
			JUnit: []string{"a.xml", "b.xml", "c"}, List: "l.yaml", Causes: "conformance/causes.yaml", Out: "-",
			Meta: report.Meta{Date: "2026-12-06", Command: "e2e.test --x=y", Duration: "27m",
				Extra: []report.Field{{Key: "commit", Value: "abc"}, {Key: "note", Value: ""}}},
		},
	}, {
		name:    "no junit",
		args:    []string{"--out", "x.md"},
		wantErr: "--junit is required",
	}, {
		name:    "meta without =",
		args:    []string{"--junit", "a.xml", "--meta", "date"},
		wantErr: "want key=value",
	}, {
		name:    "stray argument",
		args:    []string{"--junit", "a.xml", "b.xml"},
		wantErr: "unexpected arguments",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseFlags(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRun renders the testdata run into a file that has hand-written text around its markers, with the files
// given as directories.
func TestRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "conformance.md")
	const before, after = "# Kubernetes conformance\n\nintro\n\n", "\nreading\n"
	doc := before + report.BeginMarker + "\nold\n" + report.EndMarker + after
	if err := os.WriteFile(out, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config{
		JUnit:  []string{filepath.Join(testdata, "parallel"), filepath.Join(testdata, "serial"), filepath.Join(testdata, "rerun")},
		List:   filepath.Join(testdata, "conformance.yaml"),
		Causes: filepath.Join(testdata, "causes.yaml"),
		Out:    out,
	}
	if err := run(cfg); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := string(data)
	if !strings.HasPrefix(got, before+report.BeginMarker+"\n**7 of 18 [Conformance] tests pass (38.9 %)**") ||
		!strings.HasSuffix(got, report.EndMarker+after) {
		t.Errorf("unexpected file:\n%s", got)
	}
	cfg.JUnit = []string{t.TempDir()}
	if err := run(cfg); err == nil || !strings.Contains(err.Error(), "no junit*.xml files") {
		t.Errorf("empty directory: error = %v", err)
	}
}

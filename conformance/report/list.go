package report

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ErrList is returned, wrapped with the detail, when a conformance list cannot be used.
var ErrList = errors.New("report: invalid conformance list")

// ListEntry is one test of upstream's conformance.yaml, as `e2e.test --list-conformance-tests` prints it.
type ListEntry struct {
	// Testname is the short human name ("Watchers, ...").
	Testname string `yaml:"testname"`
	// Codename is the spec's full text, the name JUnit files give the test (after ginkgo's "[It] ").
	Codename    string `yaml:"codename"`
	Description string `yaml:"description"`
	// Release is the Kubernetes release that promoted the test to conformance ("v1.29").
	Release string `yaml:"release"`
	// File is the test's source file in the kubernetes repository.
	File string `yaml:"file"`
}

// ParseList decodes a conformance list. Unknown fields are accepted (a later suite may add some); an entry without
// a codename, or a codename twice, is an error.
func ParseList(data []byte) ([]ListEntry, error) {
	var list []ListEntry
	if err := yaml.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrList, err)
	}
	seen := make(map[string]bool, len(list))
	for i, e := range list {
		if strings.TrimSpace(e.Codename) == "" {
			return nil, fmt.Errorf("%w: entry %d (testname %q) has no codename", ErrList, i+1, e.Testname)
		}
		if seen[e.Codename] {
			return nil, fmt.Errorf("%w: codename %q listed twice", ErrList, e.Codename)
		}
		seen[e.Codename] = true
	}
	return list, nil
}

// ReadList reads and parses the conformance list at path.
func ReadList(path string) ([]ListEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	list, err := ParseList(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return list, nil
}

package report

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ErrCauses is returned, wrapped with the entry involved, when a causes file is not exactly as documented.
var ErrCauses = errors.New("report: invalid causes file")

// ExistsIssue is the conformance issue itself: a cause with this issue is a feature that exists today and is to be
// fixed there, not a feature a later issue brings.
const ExistsIssue = 23

// Group is the broad kind of a cause, the first level of the failures in the report.
type Group string

const (
	GroupAPI     Group = "API behaviour"
	GroupKind    Group = "missing kind or controller"
	GroupNode    Group = "node/runtime"
	GroupNetwork Group = "network"
	GroupImage   Group = "image"
)

// Groups are the valid groups, in the order the report lists them.
var Groups = []Group{GroupAPI, GroupKind, GroupNode, GroupNetwork, GroupImage}

// Cause explains why the tests whose names match it fail.
type Cause struct {
	// Match is a Go regular expression, matched against the test name anywhere (anchor it with ^ to match from the
	// start).
	Match string `yaml:"match"`
	Group Group  `yaml:"group"`
	// Cause is one line: what is missing or wrong.
	Cause string `yaml:"cause"`
	// Issue is the tracker issue that brings the feature, or ExistsIssue.
	Issue int `yaml:"issue"`

	re  *regexp.Regexp
	pos int // the entry's index in its file, the order the report lists causes in
}

// Causes is a parsed causes file: its entries in file order.
type Causes struct {
	entries []Cause
}

// causeFields are the keys an entry must have, all of them and no other.
var causeFields = []string{"match", "group", "cause", "issue"}

// ParseCauses decodes a causes file strictly: a YAML sequence of mappings, each with exactly the keys match, group,
// cause and issue; match must compile, group be one of Groups, cause be one non-empty line and issue a positive
// number. Every error wraps ErrCauses and names the entry (its number, line and match). An empty file has no
// entries.
func ParseCauses(data []byte) (Causes, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Causes{}, fmt.Errorf("%w: %w", ErrCauses, err)
	}
	if len(doc.Content) == 0 {
		return Causes{}, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.SequenceNode {
		return Causes{}, fmt.Errorf("%w: line %d: want a list of entries", ErrCauses, root.Line)
	}
	var cs Causes
	for i, node := range root.Content {
		c, err := parseCause(node)
		if err != nil {
			return Causes{}, fmt.Errorf("%w: entry %d (line %d%s): %w", ErrCauses, i+1, node.Line, matchOf(node), err)
		}
		c.pos = i
		cs.entries = append(cs.entries, c)
	}
	return cs, nil
}

// LoadCauses reads and parses the causes file at path.
func LoadCauses(path string) (Causes, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Causes{}, err
	}
	cs, err := ParseCauses(data)
	if err != nil {
		return Causes{}, fmt.Errorf("%s: %w", path, err)
	}
	return cs, nil
}

// Entries returns the causes in file order.
func (cs Causes) Entries() []Cause { return slices.Clone(cs.entries) }

// Classify returns the first cause whose expression matches name, and whether there is one.
func (cs Causes) Classify(name string) (Cause, bool) {
	for _, c := range cs.entries {
		if c.re.MatchString(name) {
			return c, true
		}
	}
	return Cause{}, false
}

func parseCause(node *yaml.Node) (Cause, error) {
	if node.Kind != yaml.MappingNode {
		return Cause{}, fmt.Errorf("want a mapping with keys %s", strings.Join(causeFields, ", "))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		key := node.Content[i].Value
		if !slices.Contains(causeFields, key) {
			return Cause{}, fmt.Errorf("unknown field %q", key)
		}
		if seen[key] {
			return Cause{}, fmt.Errorf("field %q given twice", key)
		}
		seen[key] = true
	}
	for _, f := range causeFields {
		if !seen[f] {
			return Cause{}, fmt.Errorf("missing field %q", f)
		}
	}
	var c Cause
	if err := node.Decode(&c); err != nil {
		return Cause{}, err
	}
	return c, c.validate()
}

// validate checks a decoded entry and compiles its expression.
func (c *Cause) validate() error {
	if c.Match == "" {
		return errors.New("empty match")
	}
	re, err := regexp.Compile(c.Match)
	if err != nil {
		return fmt.Errorf("match: %w", err)
	}
	c.re = re
	if !slices.Contains(Groups, c.Group) {
		return fmt.Errorf("unknown group %q (want one of %s)", c.Group, quoteGroups())
	}
	if strings.TrimSpace(c.Cause) == "" || strings.ContainsAny(c.Cause, "\r\n") {
		return fmt.Errorf("cause must be one non-empty line, got %q", c.Cause)
	}
	if c.Issue <= 0 {
		return fmt.Errorf("issue must be a positive number, got %d", c.Issue)
	}
	return nil
}

// matchOf is `, match "..."` for an entry that has a scalar match, to name the entry in errors.
func matchOf(node *yaml.Node) string {
	if node.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(node.Content); i += 2 {
		if node.Content[i].Value == "match" && node.Content[i+1].Kind == yaml.ScalarNode {
			return fmt.Sprintf(", match %q", node.Content[i+1].Value)
		}
	}
	return ""
}

func quoteGroups() string {
	q := make([]string, len(Groups))
	for i, g := range Groups {
		q[i] = fmt.Sprintf("%q", g)
	}
	return strings.Join(q, ", ")
}

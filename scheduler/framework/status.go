// Package framework is the scheduling framework: the extension points plugins implement (PreFilter, Filter,
// PostFilter, PreScore, Score, with PreFilter extensions for preemption's what-if), the per-cycle state, and the
// scheduler's view of nodes (NodeInfo: a node with its pods, requested resources, ports and affinity-bearing
// pods) and of the pod being placed (PodInfo: its requests and parsed affinity terms). It mirrors
// kube-scheduler's framework so its plugins' behaviour carries over; see docs/design/scheduler.md.
package framework

import (
	"errors"
	"strings"
)

// Code is a plugin's verdict.
type Code int

const (
	// Success: the pod passes (a nil *Status is Success too).
	Success Code = iota
	// Unschedulable: the pod does not fit the node now, but preemption might help.
	Unschedulable
	// UnschedulableAndUnresolvable: the pod does not fit and removing pods would not change that.
	UnschedulableAndUnresolvable
	// Error: the plugin failed; the pod is retried with backoff.
	Error
	// Skip: a PreFilter or PreScore plugin has nothing to do for this pod; its Filter or Score is skipped.
	Skip
)

// Status is a plugin's verdict with the reasons shown in FailedScheduling events.
type Status struct {
	code    Code
	reasons []string
	err     error
	plugin  string
}

// NewStatus makes a status with reasons.
func NewStatus(code Code, reasons ...string) *Status { return &Status{code: code, reasons: reasons} }

// AsStatus wraps an error as an Error status.
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{code: Error, reasons: []string{err.Error()}, err: err}
}

// Code is the status's code (Success for nil).
func (s *Status) Code() Code {
	if s == nil {
		return Success
	}
	return s.code
}

// IsSuccess tells whether the status is Success.
func (s *Status) IsSuccess() bool { return s.Code() == Success }

// IsSkip tells whether the status is Skip.
func (s *Status) IsSkip() bool { return s.Code() == Skip }

// IsRejected tells whether the pod was found not to fit (Unschedulable or UnschedulableAndUnresolvable).
func (s *Status) IsRejected() bool {
	c := s.Code()
	return c == Unschedulable || c == UnschedulableAndUnresolvable
}

// Reasons are the human-readable reasons.
func (s *Status) Reasons() []string {
	if s == nil {
		return nil
	}
	return s.reasons
}

// Message joins the reasons.
func (s *Status) Message() string { return strings.Join(s.Reasons(), ", ") }

// Err is the status as an error (nil for Success).
func (s *Status) Err() error {
	if s.IsSuccess() {
		return nil
	}
	if s.err != nil {
		return s.err
	}
	return errors.New(s.Message())
}

// Plugin names the plugin that returned the status.
func (s *Status) Plugin() string {
	if s == nil {
		return ""
	}
	return s.plugin
}

// WithPlugin records which plugin returned the status.
func (s *Status) WithPlugin(name string) *Status {
	if s != nil {
		s.plugin = name
	}
	return s
}

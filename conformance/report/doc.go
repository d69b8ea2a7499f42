// Package report turns the JUnit files of a run of upstream Kubernetes' conformance suite against Wheelhouse into
// the block of docs/conformance.md between its markers: how many [Conformance] tests pass, per SIG, and why the
// others fail.
//
// The pipeline has four stages, each usable alone:
//
//   - ParseJUnit and ReadJUnit read the JUnit XML that e2e.test's ReportAfterSuite writes into --report-dir
//     (junit_01.xml, ginkgo v2's reporter with labels, failure message attributes and passing specs' timelines
//     left out). Only specs whose name contains "[Conformance]" are kept; the unfocused specs a focused run lists
//     as skipped are dropped with every other spec. Several files (a parallel part and a [Serial] part run after
//     it) merge into one Run: a test that one file skipped and another ran takes the result of the run, and of two
//     results that both ran, the later file's wins (a later file is a later run).
//   - ParseList and ReadList read upstream's conformance.yaml (`e2e.test --list-conformance-tests`), the list of
//     every conformance test of the suite's version, so that a test absent from every file still counts, as "not
//     run".
//   - ParseCauses and LoadCauses read conformance/causes.yaml, the hand-kept explanations of failures: a regular
//     expression over the test name, a group, a one-line cause and the tracker issue that brings the feature. The
//     file is parsed strictly; the first entry that matches a name explains it, and a failed test no entry matches
//     is unclassified.
//   - Summarize counts the results per SIG and classifies the failures; Render formats a Summary and the run's Meta
//     as Markdown, and WriteFile puts that between the markers of a file, keeping every byte outside them.
//
// Everything is deterministic: the same inputs render the same bytes, so re-rendering a run leaves the file as
// it was. Times and dates appear only as the caller passes them in Meta, and as the JUnit durations.
package report

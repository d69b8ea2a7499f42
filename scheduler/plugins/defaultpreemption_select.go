package plugins

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// dpPick chooses among candidates as upstream, each rule breaking the previous one's ties: fewest PDB
// violations; lowest priority of the most important victim; smallest sum of victim priorities; fewest
// victims; latest start among the most important victims; then the first in candidate order.
func dpPick(cands []dpCandidate) dpCandidate {
	rules := []func(c *dpCandidate) int64{
		func(c *dpCandidate) int64 { return -int64(c.pdbViolations) },
		func(c *dpCandidate) int64 { return -int64(corev1helpers.PodPriority(c.victims[0])) },
		func(c *dpCandidate) int64 {
			var sum int64
			for _, v := range c.victims {
				sum += int64(corev1helpers.PodPriority(v)) + math.MaxInt32 + 1 // all terms >= 0
			}
			return -sum
		},
		func(c *dpCandidate) int64 { return -int64(len(c.victims)) },
		dpEarliestStartOfTop,
	}
	for _, rule := range rules {
		var kept []dpCandidate
		best := int64(math.MinInt64)
		for i := range cands {
			switch s := rule(&cands[i]); {
			case s > best:
				best, kept = s, append(kept[:0], cands[i])
			case s == best:
				kept = append(kept, cands[i])
			}
		}
		if len(kept) == 1 {
			return kept[0]
		}
		cands = kept
	}
	return cands[0]
}

// dpEarliestStartOfTop is the earliest start among the candidate's highest-priority victims.
func dpEarliestStartOfTop(c *dpCandidate) int64 {
	top, earliest := corev1helpers.PodPriority(c.victims[0]), dpStartNanos(c.victims[0])
	for _, v := range c.victims[1:] {
		switch pr := corev1helpers.PodPriority(v); {
		case pr > top:
			top, earliest = pr, dpStartNanos(v)
		case pr == top:
			earliest = min(earliest, dpStartNanos(v))
		}
	}
	return earliest
}

// dpFitMessage is upstream's FitError text for the dry run: "0/N nodes are available: " and a sorted
// histogram of the reasons (a node not tried counts as "Preemption is not helpful for scheduling").
func dpFitMessage(snap *framework.Snapshot, statuses framework.NodeToStatus) string {
	hist := map[string]int{}
	for _, n := range snap.Nodes {
		st, ok := statuses[n.Name()]
		if !ok {
			hist[dpReasonNotHelpful]++
			continue
		}
		for _, r := range st.Reasons() {
			hist[r]++
		}
	}
	parts := make([]string, 0, len(hist))
	for r, n := range hist {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return fmt.Sprintf("0/%d nodes are available: %s.", len(snap.Nodes), strings.Join(parts, ", "))
}

package controllers

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// share is an active ReplicaSet of a given size, sized for maxBefore, created age seconds before the newest.
func share(spec, maxBefore int32, age int) rsShare {
	return rsShare{Spec: spec, MaxBefore: maxBefore, rs: &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("rs-%d", age), CreationTimestamp: metav1.NewTime(time.Unix(1_000_000-int64(age), 0))}}}
}

// TestProportionalSizes: upstream's proportions, rounding, order of ties and leftovers.
func TestProportionalSizes(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		want, surge, statusReplicas int32
		shares                      []rsShare
		sizes                       []int32
	}{
		// The conformance suite's: 8 old and 5 new (sized for 10+3), scaled to 30: 8·33/13 ≈ 20, 5·33/13 ≈ 13.
		{"up 10 to 30", 30, 3, 13, []rsShare{share(8, 13, 1), share(5, 13, 0)}, []int32{20, 13}},
		{"down 30 to 10", 10, 3, 33, []rsShare{share(20, 33, 1), share(13, 33, 0)}, []int32{8, 5}},
		{"to zero", 0, 3, 13, []rsShare{share(8, 13, 1), share(5, 13, 0)}, []int32{0, 0}},
		// Equal sizes: growing, the newer takes the odd replica; shrinking, the older gives it.
		{"tie up", 11, 0, 10, []rsShare{share(5, 10, 1), share(5, 10, 0)}, []int32{5, 6}},
		{"tie down", 9, 0, 10, []rsShare{share(5, 10, 1), share(5, 10, 0)}, []int32{4, 5}},
		// Without max-replicas a ReplicaSet is scaled against status.replicas.
		{"no annotation", 30, 3, 13, []rsShare{share(8, 0, 1), share(5, 0, 0)}, []int32{20, 13}},
		// Rounding leaves a remainder: it goes to the first in order. 5·16/15 ≈ 5: none grows, 1 left for the newest.
		{"leftover to the first", 16, 0, 15, []rsShare{share(5, 15, 2), share(5, 15, 1), share(5, 15, 0)}, []int32{5, 5, 6}},
		// None moves past what is left: 7·10/21 ≈ 3, so −4 each, but the last only has −3 left.
		{"never past what is left", 10, 0, 21, []rsShare{share(7, 21, 2), share(7, 21, 1), share(7, 21, 0)}, []int32{3, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := proportionalSizes(tc.want, tc.surge, tc.statusReplicas, tc.shares)
			if diff := cmp.Diff(tc.sizes, got); diff != "" {
				t.Fatalf("sizes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProportionalSizesInvariants: from a consistent state (every active ReplicaSet sized for the current
// total), scaling gives the ReplicaSets exactly spec.replicas+maxSurge between them, none negative, and none
// moves against the direction of the scaling.
func TestProportionalSizesInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(t, "sets")
		shares := make([]rsShare, n)
		total := int32(0)
		for i := range shares {
			shares[i] = share(rapid.Int32Range(1, 50).Draw(t, "size"), 0, rapid.IntRange(0, 3).Draw(t, "age")+10*i)
			total += shares[i].Spec
		}
		for i := range shares {
			shares[i].MaxBefore = total
		}
		want := rapid.Int32Range(0, 200).Draw(t, "want")
		surge := rapid.Int32Range(0, 10).Draw(t, "surge")
		allowed := int32(0)
		if want > 0 {
			allowed = want + surge
		}
		sizes := proportionalSizes(want, surge, total, shares)
		sum := int32(0)
		for i, s := range sizes {
			sum += s
			if s < 0 || (allowed > total && s < shares[i].Spec) || (allowed < total && s > shares[i].Spec) {
				t.Fatalf("ReplicaSet %d: %d → %d while the total goes %d → %d", i, shares[i].Spec, s, total, allowed)
			}
		}
		if sum != allowed {
			t.Fatalf("sizes %v sum to %d, want %d", sizes, sum, allowed)
		}
	})
}

// TestPlanRollingSteps: upstream's rolling-update steps, one at a time.
func TestPlanRollingSteps(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		want, surge, unavailable int32
		newRS                    rsCounts
		old                      []rsCounts
		newSpec                  int32
		oldSpecs                 []int32
	}{
		// The conformance suite's proportional-scaling rollout: 10 replicas, maxSurge 3, maxUnavailable 2.
		{"new created at 3, old cut to 8", 10, 3, 2, rsCounts{3, 0}, []rsCounts{{10, 10}}, 3, []int32{8}},
		{"new grows to 5", 10, 3, 2, rsCounts{3, 0}, []rsCounts{{8, 8}}, 5, []int32{8}},
		{"stuck: nothing more", 10, 3, 2, rsCounts{5, 0}, []rsCounts{{8, 8}}, 5, []int32{8}},
		// After the proportional scaling to 30 (20 and 13), the old ReplicaSet's new pods are not available yet;
		// total − minAvailable − the new one's unavailable = 33 − 28 − 13 < 0: they are not cut either.
		{"stuck after scaling: unavailable old pods kept", 30, 3, 2, rsCounts{13, 0}, []rsCounts{{20, 8}}, 13, []int32{20}},
		// The rollover: the stuck ReplicaSet's unavailable pod goes, the adopted one's available pod stays.
		{"rollover: stuck first", 1, 1, 0, rsCounts{0, 0}, []rsCounts{{1, 1}, {1, 0}}, 0, []int32{1, 0}},
		{"rollover: new grows", 1, 1, 0, rsCounts{0, 0}, []rsCounts{{1, 1}, {0, 0}}, 1, []int32{1, 0}},
		{"rollover: new not yet available", 1, 1, 0, rsCounts{1, 0}, []rsCounts{{1, 1}, {0, 0}}, 1, []int32{1, 0}},
		{"rollover: new available, adopted goes", 1, 1, 0, rsCounts{1, 1}, []rsCounts{{1, 1}, {0, 0}}, 1, []int32{0, 0}},
		// A status that has not caught up with a scale-down is not spare availability.
		{"stale status", 4, 1, 0, rsCounts{4, 4}, []rsCounts{{0, 3}}, 4, []int32{0}},
		{"new too large", 3, 1, 0, rsCounts{5, 5}, []rsCounts{{1, 1}}, 3, []int32{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newSpec, oldSpecs := planRolling(tc.want, tc.surge, tc.unavailable, tc.newRS, slices.Clone(tc.old))
			if newSpec != tc.newSpec || !slices.Equal(oldSpecs, tc.oldSpecs) {
				t.Fatalf("got new %d, old %v; want new %d, old %v", newSpec, oldSpecs, tc.newSpec, tc.oldSpecs)
			}
		})
	}
}

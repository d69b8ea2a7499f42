package satoken

import (
	"testing"
	"time"
)

// TestEnded is upstream's rule for tokens of objects being deleted (issue 34 item 8): an object not being
// deleted keeps its tokens, one whose deletionTimestamp is in the future (a pod's grace period) or less than
// DeletionLeeway ago too, and one terminating for longer has lost them.
func TestEnded(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tk := New(memKeys{}, func() time.Time { return now })
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	for _, tc := range []struct {
		name     string
		deletion *time.Time
		want     bool
	}{
		{"not being deleted", nil, false},
		{"grace period running", at(30 * time.Second), false},
		{"deleted now", at(0), false},
		{"within the leeway", at(-DeletionLeeway + time.Second), false},
		{"exactly the leeway ago", at(-DeletionLeeway), false},
		{"past the leeway", at(-DeletionLeeway - time.Second), true},
		{"terminating for an hour", at(-time.Hour), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tk.Ended(tc.deletion); got != tc.want {
				t.Errorf("Ended = %v, want %v", got, tc.want)
			}
		})
	}
}

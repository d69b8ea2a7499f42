package kubeapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// TestStatusFor: what a client sees for the errors below the API — retryable conditions are 503 or 504 with
// their reason, anything unexpected a 500 that never shows its cause.
func TestStatusFor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		code   int32
		reason metav1.StatusReason
	}{
		{"a collection reloading", fmt.Errorf("authorize: %w", watchcache.ErrReset), http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable},
		{"the cache stopping", watchcache.ErrClosed, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable},
		{"the store unavailable", storeError(fmt.Errorf("get: %w", store.ErrUnavailable), schema.GroupResource{Resource: "pods"}, "p"), http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable},
		{"anything else", errors.New("secret detail"), http.StatusInternalServerError, metav1.StatusReasonInternalError},
	} {
		st := statusFor(tc.err)
		if st.Code != tc.code || st.Reason != tc.reason {
			t.Errorf("%s: %d %s, want %d %s", tc.name, st.Code, st.Reason, tc.code, tc.reason)
		}
		if strings.Contains(st.Message, "secret detail") {
			t.Errorf("%s: the 500 shows its cause: %q", tc.name, st.Message)
		}
	}
}

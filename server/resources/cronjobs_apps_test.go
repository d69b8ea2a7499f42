package resources

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestParseCronSchedule(t *testing.T) {
	tests := []struct {
		spec, wantErr string
	}{
		{"* * * * *", ""},
		{"*/15 0-6,22,23 1 jan-MAR sun", ""},
		{"5/10 * ? * MON-fri", ""},
		{"0 0 31 dec 6", ""},
		{"@daily", ""},
		{"@every 1h30m", ""},
		{"TZ=Europe/Paris 0 9 * * *", ""},
		{"CRON_TZ=UTC @hourly", ""},
		{"", "empty spec string"},
		{"* * * *", "expected exactly 5 fields, found 4: [* * * *]"},
		{"* * * * * *", "expected exactly 5 fields, found 6: [* * * * * *]"},
		{"60 * * * *", "end of range (60) above maximum (59): 60"},
		{"* * 0 * *", "beginning of range (0) below minimum (1): 0"},
		{"* * * * 7", "end of range (7) above maximum (6): 7"},
		{"5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"},
		{"*/0 * * * *", "step of range should be a positive number: */0"},
		{"1-2-3 * * * *", "too many hyphens: 1-2-3"},
		{"*/2/3 * * * *", "too many slashes: */2/3"},
		{"x * * * *", `failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax`},
		{"* * * * monday", `failed to parse int from monday: strconv.Atoi: parsing "monday": invalid syntax`},
		{"@fortnightly", "unrecognized descriptor: @fortnightly"},
		{"@every soon", `failed to parse duration @every soon: time: invalid duration "soon"`},
		{"TZ=Nowhere/Else * * * * *", "provided bad location Nowhere/Else: unknown time zone Nowhere/Else"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			var got string
			if err := parseCronSchedule(tt.spec); err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("parseCronSchedule(%q) = %q, want %q", tt.spec, got, tt.wantErr)
			}
		})
	}
}

// TestAppsRegistration checks the discovery facts of every kind registered by the apps files.
func TestAppsRegistration(t *testing.T) {
	type facts struct {
		Plural, Storage        string
		ShortNames, Categories []string
		Namespaced, Status     bool
		Scale, Generation      bool
	}
	tests := []struct {
		obj  runtime.Object
		want facts
	}{
		{&appsv1.Deployment{}, facts{"deployments", "deployments.apps", []string{"deploy"}, []string{"all"}, true, true, true, true}},
		{&appsv1.ReplicaSet{}, facts{"replicasets", "replicasets.apps", []string{"rs"}, []string{"all"}, true, true, true, true}},
		{&appsv1.DaemonSet{}, facts{"daemonsets", "daemonsets.apps", []string{"ds"}, []string{"all"}, true, true, false, true}},
		{&appsv1.StatefulSet{}, facts{"statefulsets", "statefulsets.apps", []string{"sts"}, []string{"all"}, true, true, true, true}},
		{&appsv1.ControllerRevision{}, facts{"controllerrevisions", "controllerrevisions.apps", nil, nil, true, false, false, false}},
		{&batchv1.Job{}, facts{"jobs", "jobs.batch", nil, []string{"all"}, true, true, false, true}},
		{&batchv1.CronJob{}, facts{"cronjobs", "cronjobs.batch", []string{"cj"}, []string{"all"}, true, true, false, true}},
		{&coordinationv1.Lease{}, facts{"leases", "leases.coordination.k8s.io", nil, nil, true, false, false, false}},
		{&discoveryv1.EndpointSlice{}, facts{"endpointslices", "endpointslices.discovery.k8s.io", nil, nil, true, false, false, false}},
		{&eventsv1.Event{}, facts{"events", "events", []string{"ev"}, nil, true, false, false, false}},
		{&schedulingv1.PriorityClass{}, facts{"priorityclasses", "priorityclasses.scheduling.k8s.io", []string{"pc"}, nil, false, false, false, false}},
		{&policyv1.PodDisruptionBudget{}, facts{"poddisruptionbudgets", "poddisruptionbudgets.policy", []string{"pdb"}, nil, true, true, false, true}},
		{&rbacv1.Role{}, facts{"roles", "roles.rbac.authorization.k8s.io", nil, nil, true, false, false, false}},
		{&rbacv1.RoleBinding{}, facts{"rolebindings", "rolebindings.rbac.authorization.k8s.io", nil, nil, true, false, false, false}},
		{&rbacv1.ClusterRole{}, facts{"clusterroles", "clusterroles.rbac.authorization.k8s.io", nil, nil, false, false, false, false}},
		{&rbacv1.ClusterRoleBinding{}, facts{"clusterrolebindings", "clusterrolebindings.rbac.authorization.k8s.io", nil, nil, false, false, false, false}},
		{&autoscalingv2.HorizontalPodAutoscaler{}, facts{"horizontalpodautoscalers", "horizontalpodautoscalers.autoscaling", []string{"hpa"}, []string{"all"}, true, true, false, false}},
	}
	for _, tt := range tests {
		r := appsResource(t, tt.obj)
		t.Run(r.Plural+"."+r.GVK.Group, func(t *testing.T) {
			got := facts{r.Plural, r.Storage, r.ShortNames, r.Categories, r.Namespaced, r.Status, r.Scale != nil,
				r.Generation}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("registration (-want +got):\n%s", diff)
			}
			if r.New == nil || r.NewList == nil || r.Validate == nil || r.Table == nil {
				t.Errorf("New, NewList, Validate and Table must be set")
			}
			if _, ok := Default().Lookup(r.GroupVersionResource()); !ok {
				t.Errorf("not in the default registry")
			}
		})
	}
}

func TestValidateRBACName(t *testing.T) {
	for name, wantOK := range map[string]bool{"system:node": true, "edit": true, "a/b": false, "..": false,
		"50%": false} {
		if got := len(ValidateRBACName(name, false)) == 0; got != wantOK {
			t.Errorf("ValidateRBACName(%q) ok = %v, want %v", name, got, wantOK)
		}
	}
	r := appsResource(t, &rbacv1.ClusterRole{})
	if !slices.Equal(r.NameValidation("system:node", false), ValidateRBACName("system:node", false)) {
		t.Errorf("clusterroles do not use ValidateRBACName")
	}
}

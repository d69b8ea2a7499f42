package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// Actions on objects go through the Kubernetes API as the signed-in user (kubeapi.UserConfig): RBAC,
// validation, admission and the API's audit log apply exactly as for kubectl. Each is what the kubectl command
// of the same name sends.

// fieldManager names the dashboard's writes in managedFields.
const fieldManager = "wheelhouse-dashboard"

var actionLabels = map[string]action{
	"delete":   {Name: "delete", Label: "Delete", Confirm: true, Danger: true},
	"restart":  {Name: "restart", Label: "Restart", Confirm: true},
	"pause":    {Name: "pause", Label: "Pause rollout"},
	"resume":   {Name: "resume", Label: "Resume rollout"},
	"cordon":   {Name: "cordon", Label: "Cordon"},
	"uncordon": {Name: "uncordon", Label: "Uncordon"},
	"rollback": {Name: "rollback", Label: "Roll back", Confirm: true},
	"reveal":   {Name: "reveal", Label: "Reveal", Confirm: true},
	"scale":    {Name: "scale", Label: "Scale"},
}

// detailActions fills the actions the user may take on the object (their RBAC decides; the API decides again).
func (d *Dashboard) detailActions(ctx context.Context, s *scope, res *resources.Resource, ref objectRef, v *detailPageView) {
	can := func(verb, sub string) bool {
		ok, _, err := d.cfg.Authorizer.Authorize(ctx, attrs(s, res, verb, sub, ref))
		return err == nil && ok
	}
	obj := d.cachedObject(ctx, s, res, ref)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		if can("patch", "") {
			v.Actions = append(v.Actions, actionLabels["restart"])
			if o.Spec.Paused {
				v.Actions = append(v.Actions, actionLabels["resume"])
			} else {
				v.Actions = append(v.Actions, actionLabels["pause"])
			}
			if rs := d.byKey["replicasets.apps"]; rs != nil {
				if col, err := d.collection(ctx, s, rs); err == nil {
					cur := o.Annotations[revisionAnnotation]
					for _, r := range ownedBy(col, o.Namespace, string(o.UID)) {
						a := r.(*appsv1.ReplicaSet).Annotations[revisionAnnotation]
						if n, err := strconv.ParseInt(a, 10, 64); err == nil && a != cur {
							v.Revisions = append(v.Revisions, n)
						}
					}
				}
			}
		}
		if can("patch", "scale") || can("update", "scale") {
			r := ptrOr(o.Spec.Replicas, 1)
			v.Scale = &r
		}
	case *appsv1.StatefulSet:
		if can("patch", "") {
			v.Actions = append(v.Actions, actionLabels["restart"])
		}
		if can("patch", "scale") {
			r := ptrOr(o.Spec.Replicas, 1)
			v.Scale = &r
		}
	case *appsv1.ReplicaSet:
		if can("patch", "scale") {
			r := ptrOr(o.Spec.Replicas, 1)
			v.Scale = &r
		}
	case *appsv1.DaemonSet:
		if can("patch", "") {
			v.Actions = append(v.Actions, actionLabels["restart"])
		}
	case *corev1.Node:
		if can("patch", "") {
			if o.Spec.Unschedulable {
				v.Actions = append(v.Actions, actionLabels["uncordon"])
			} else {
				v.Actions = append(v.Actions, actionLabels["cordon"])
			}
		}
	}
	if can("delete", "") {
		v.Actions = append(v.Actions, actionLabels["delete"])
	}
}

func attrs(s *scope, res *resources.Resource, verb, sub string, ref objectRef) kubeapi.Attributes {
	return kubeapi.Attributes{User: s.user, Cluster: s.cluster.ID, Verb: verb, Group: res.GVK.Group, Resource: res.Plural,
		Subresource: sub, Namespace: ref.Namespace, Name: ref.Name}
}

// cachedObject is the object as the watch cache has it (nil when absent).
func (d *Dashboard) cachedObject(ctx context.Context, s *scope, res *resources.Resource, ref objectRef) any {
	col, err := d.collection(ctx, s, res)
	if err != nil {
		return nil
	}
	e, ok, _ := col.Get(ref.Namespace, ref.Name)
	if !ok {
		return nil
	}
	return e.Object
}

// confirmView asks before a destructive or audited action.
type confirmView struct {
	Shell    shell
	Ref      objectRef
	Kind     string
	Action   action
	Message  string
	Revision string
	Key      string
}

func (d *Dashboard) confirmPage(c echo.Context) error {
	s, ref, res, ok, err := d.objectPage(c)
	if !ok {
		return err
	}
	a, ok := actionLabels[c.Param("action")]
	if !ok || !a.Confirm {
		return d.notFound(c, "There is no such action.")
	}
	v := confirmView{Shell: d.shell(s, a.Label+" "+ref.Name, ref.Key), Ref: ref, Kind: res.GVK.Kind, Action: a,
		Revision: c.QueryParam("revision"), Key: c.QueryParam("key")}
	switch a.Name {
	case "delete":
		v.Message = fmt.Sprintf("Delete %s %s? This cannot be undone.", res.GVK.Kind, ref.Name)
	case "restart":
		v.Message = fmt.Sprintf("Restart every pod of %s %s, replacing them one by one as its update strategy says?", res.GVK.Kind, ref.Name)
	case "rollback":
		v.Message = fmt.Sprintf("Roll %s %s back to revision %s?", res.GVK.Kind, ref.Name, v.Revision)
	case "reveal":
		v.Message = fmt.Sprintf("Reveal the value of key %q of secret %s? Your reveal is recorded in the team's audit log.", v.Key, ref.Name)
	}
	return d.render(c, http.StatusOK, confirmPage(v))
}

// act takes an action on an object and goes back to its page with the outcome.
func (d *Dashboard) act(c echo.Context) error {
	s, ref, res, ok, err := d.objectPage(c)
	if !ok {
		return err
	}
	ctx := c.Request().Context()
	name := c.Param("action")
	if _, ok := actionLabels[name]; !ok {
		return d.notFound(c, "There is no such action.")
	}
	cfg := d.userConfig(s)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return d.internalError(c, err)
	}
	ri := dyn.Resource(res.GroupVersionResource()).Namespace(ref.Namespace)
	patch := func(pt types.PatchType, body any, sub ...string) error {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		_, err = ri.Patch(ctx, ref.Name, pt, b, metav1.PatchOptions{FieldManager: fieldManager}, sub...)
		return err
	}
	back := ref.href()
	var done string
	switch name {
	case "delete":
		err = ri.Delete(ctx, ref.Name, metav1.DeleteOptions{})
		done = fmt.Sprintf("%s %s deleted", res.GVK.Kind, ref.Name)
		if err == nil {
			back = Prefix + "/c/" + url.PathEscape(s.cluster.ID) + "/r/" + url.PathEscape(ref.Key) + "?" + url.Values{"ns": {ref.Namespace}}.Encode()
			return c.Redirect(http.StatusSeeOther, back+"&done="+url.QueryEscape(done))
		}
	case "scale":
		n, perr := strconv.ParseInt(strings.TrimSpace(c.FormValue("replicas")), 10, 32)
		if perr != nil || n < 0 {
			return c.Redirect(http.StatusSeeOther, back+"?error="+url.QueryEscape("Replicas must be a whole number, 0 or more."))
		}
		err = patch(types.MergePatchType, map[string]any{"spec": map[string]any{"replicas": n}}, "scale")
		done = fmt.Sprintf("scaled to %d replicas", n)
	case "restart":
		err = patch(types.StrategicMergePatchType, map[string]any{"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"annotations": map[string]string{
				"kubectl.kubernetes.io/restartedAt": d.cfg.Now().Format(time.RFC3339)}}}}})
		done = "restart started"
	case "pause", "resume":
		err = patch(types.MergePatchType, map[string]any{"spec": map[string]any{"paused": name == "pause"}})
		done = "rollout " + name + "d"
	case "cordon", "uncordon":
		err = patch(types.MergePatchType, map[string]any{"spec": map[string]any{"unschedulable": name == "cordon"}})
		done = "node " + name + "ed"
	case "rollback":
		err = d.rollback(ctx, s, res, ref, c.FormValue("revision"), patch)
		done = "rolled back to revision " + c.FormValue("revision")
	case "reveal":
		return d.reveal(c, s, ref, cfg)
	}
	if err != nil {
		return c.Redirect(http.StatusSeeOther, back+"?error="+url.QueryEscape(apiMessage(err)))
	}
	return c.Redirect(http.StatusSeeOther, back+"?done="+url.QueryEscape(done))
}

// rollback is `kubectl rollout undo --to-revision`: the Deployment's pod template becomes the one of the
// ReplicaSet of that revision (without its pod-template-hash label).
func (d *Dashboard) rollback(ctx context.Context, s *scope, res *resources.Resource, ref objectRef, revision string,
	patch func(types.PatchType, any, ...string) error) error {
	if ref.Key != "deployments.apps" {
		return errors.New("only Deployments roll back")
	}
	dep, ok := d.cachedObject(ctx, s, res, ref).(*appsv1.Deployment)
	if !ok {
		return apierrors.NewNotFound(appsv1.Resource("deployments"), ref.Name)
	}
	col, err := d.collection(ctx, s, d.byKey["replicasets.apps"])
	if err != nil {
		return err
	}
	for _, o := range ownedBy(col, dep.Namespace, string(dep.UID)) {
		rs := o.(*appsv1.ReplicaSet)
		if rs.Annotations[revisionAnnotation] != revision {
			continue
		}
		tmpl := rs.Spec.Template.DeepCopy()
		delete(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
		return patch(types.JSONPatchType, []map[string]any{
			{"op": "test", "path": "/metadata/uid", "value": string(dep.UID)},
			{"op": "replace", "path": "/spec/template", "value": tmpl},
		})
	}
	return fmt.Errorf("deployment %s has no revision %q", ref.Name, revision)
}

// reveal shows one value of a Secret, read through the API as the user, and records the reveal in the team's
// audit log.
func (d *Dashboard) reveal(c echo.Context, s *scope, ref objectRef, cfg *rest.Config) error {
	ctx := c.Request().Context()
	key := c.FormValue("key")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return d.internalError(c, err)
	}
	sec, err := cs.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	result := "200"
	if err != nil {
		result = strconv.Itoa(apiCode(err))
	}
	r := c.Request()
	ev := tenancy.AuditEvent{At: d.cfg.Now(), TeamID: s.team.ID, ClusterID: s.cluster.ID, Actor: s.v.sess.Email,
		ActorID: s.v.sess.UserID, Action: "reveal secret", Resource: fmt.Sprintf("secrets/%s/%s key %s", ref.Namespace, ref.Name, key),
		Result: result, Source: remoteIP(r), UserAgent: r.UserAgent()}
	if aerr := d.cfg.Tenancy.Audit(context.WithoutCancel(ctx), ev); aerr != nil {
		return d.internalError(c, aerr) // no reveal without its record
	}
	if err != nil {
		return c.Redirect(http.StatusSeeOther, ref.href()+"?error="+url.QueryEscape(apiMessage(err)))
	}
	val, ok := sec.Data[key]
	if !ok {
		return c.Redirect(http.StatusSeeOther, ref.href()+"?error="+url.QueryEscape("The secret has no key "+strconv.Quote(key)+"."))
	}
	return d.render(c, http.StatusOK, revealPage(d.shell(s, "Secret "+ref.Name, ref.Key), ref, key, string(val)))
}

// apiMessage is an API error as a person reads it: the Status message (never an internal error's text).
func apiMessage(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		if st.Code >= 500 {
			return "The server could not do this right now; try again."
		}
		return st.Message
	}
	return "The request failed; try again."
}

func apiCode(err error) int {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return int(se.Status().Code)
	}
	return http.StatusInternalServerError
}
